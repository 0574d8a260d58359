"""Issue 21: the lab's API server refuses what the real one refuses (gpulab.cluster.corevalidation).

Each case is a request Kubernetes answers with 422 (pkg/apis/core/validation/validation.go, tag
v1.31.0: ValidateSecretUpdate, ValidateSecret, validateNodeTaints, ValidateTolerations,
validateContainerCommon), and a server-side apply to a custom resource whose list of strings is atomic
(CRD lists without x-kubernetes-list-type are atomic: https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy).
"""

from __future__ import annotations

import base64
import json

import pytest

from gpulab.cluster.errors import ApiError
from gpulab.cluster.store import Store

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "clusterpolicies.nvidia.com"},
       "spec": {"group": "nvidia.com", "scope": "Cluster",
                "names": {"plural": "clusterpolicies", "singular": "clusterpolicy", "kind": "ClusterPolicy",
                          "listKind": "ClusterPolicyList"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _docker_config() -> str:
    return base64.b64encode(json.dumps({"auths": {"r.example": {"auth": "eDp5"}}}).encode()).decode()


def _refused(call) -> ApiError:
    with pytest.raises(ApiError) as info:
        call()
    assert info.value.code == 422, info.value
    return info.value


def test_a_secret_type_change_is_refused():
    store = Store()
    store.create("v1/secrets", {"metadata": {"name": "regcred", "namespace": "default"}, "type": "Opaque",
                                "data": {"a": "eA=="}})
    rv = store.resource_version()
    error = _refused(lambda: store.patch("v1/secrets", "default", "regcred",
                                         {"type": "kubernetes.io/dockerconfigjson",
                                          "data": {".dockerconfigjson": _docker_config()}}, "merge"))
    assert "type" in str(error) and "immutable" in str(error)
    assert store.resource_version() == rv


def test_a_docker_config_secret_needs_its_json():
    store = Store()
    _refused(lambda: store.create("v1/secrets", {"metadata": {"name": "x", "namespace": "default"},
                                                 "type": "kubernetes.io/dockerconfigjson", "data": {"a": "eA=="}}))


@pytest.mark.parametrize("taints,words", [
    ([{"key": "gpu", "effect": "NoSchedule"}, {"key": "gpu", "value": "x", "effect": "NoSchedule"}], "unique"),
    ([{"key": "gpu", "effect": "NoScheduel"}], "effect"),
    ([{"key": "bad key", "effect": "NoSchedule"}], "key"),
])
def test_invalid_or_duplicate_taints_are_refused(taints, words):
    store = Store()
    store.create("v1/nodes", {"metadata": {"name": "n1"}})
    error = _refused(lambda: store.patch("v1/nodes", None, "n1", {"spec": {"taints": taints}}, "merge"))
    assert words in str(error)
    _refused(lambda: store.create("v1/nodes", {"metadata": {"name": "n2"}, "spec": {"taints": taints}}))


@pytest.mark.parametrize("toleration,words", [
    ({"key": "gpu", "operator": "Exist"}, "operator"),
    ({"key": "gpu", "operator": "exists"}, "operator"),
    ({"key": "gpu", "operator": "Exists", "value": "x"}, "value must be empty"),
    ({"operator": "Equal", "value": "x"}, "key"),
    ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}, "NoExecute"),
])
def test_invalid_tolerations_are_refused(toleration, words):
    store = Store()
    pod = {"metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": [toleration]}}
    error = _refused(lambda: store.create("v1/pods", pod))
    assert words in str(error) and "tolerations[0]" in str(error)


@pytest.mark.parametrize("image", [" busybox", "busybox\n", "busybox:1.36 "])
def test_an_image_with_surrounding_whitespace_is_refused(image):
    store = Store()
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": image}]}}
    assert "whitespace" in str(_refused(lambda: store.create("v1/pods", pod)))


def test_server_side_apply_replaces_a_custom_resource_string_list():
    """helm 4 upgrades the ClusterPolicy by server-side apply: its imagePullSecrets, a list of strings,
    is atomic (the lab used to merge it as objects keyed by name, and failed every such upgrade)."""
    store = Store()
    store.create("apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    body = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"driver": {"imagePullSecrets": []}, "toolkit": {"env": [{"name": "A", "value": "1"}]}}}
    store.patch("nvidia.com/v1/clusterpolicies", None, "cluster-policy", body, "apply", field_manager="helm")
    body["spec"]["driver"]["imagePullSecrets"] = ["mirror-pull", "team-pull"]
    body["spec"]["toolkit"]["env"] = [{"name": "B", "value": "2"}]
    applied = store.patch("nvidia.com/v1/clusterpolicies", None, "cluster-policy", body, "apply", field_manager="helm")
    assert applied["spec"]["driver"]["imagePullSecrets"] == ["mirror-pull", "team-pull"]
    assert applied["spec"]["toolkit"]["env"] == [{"name": "B", "value": "2"}]
    body["spec"]["driver"]["imagePullSecrets"] = ["team-pull"]
    again = store.patch("nvidia.com/v1/clusterpolicies", None, "cluster-policy", body, "apply", field_manager="helm")
    assert again["spec"]["driver"]["imagePullSecrets"] == ["team-pull"]
