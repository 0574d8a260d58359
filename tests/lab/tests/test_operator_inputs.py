"""Issue 21 (3, 6, 7, 8 and the lab's string-list patch): gpu_operator against the lab and a real helm.

- registry_credentials writes only a Secret the collection created (label app.kubernetes.io/managed-by=
  gpufleet.sharing); any other Secret of that name -- a team's regcred, Helm's release record -- is refused
  by name with the reason, before anything changes;
- no URL's user:password@ in a result, a message or a diff, even for values applied by an earlier run;
- proxy and pull-secret input is refused before the first request (no helm upgrade, no resourceVersion moved);
- a helm upgrade that adds pull secrets to the ClusterPolicy (a list of strings under server-side apply) works.
"""

from __future__ import annotations

import base64
import json

import pytest

# The harness and the fixtures (helm, helm_binary) of the operator module tests.
from test_cluster_modules_operator import Lab, helm, operator_args  # noqa: F401 pylint: disable=unused-import
# The private-registry lab of the pull-secret tests (one A100 node, the mirror requires credentials).
from test_pull_secrets import MIRROR, docker_secret, lab  # noqa: F401 pylint: disable=unused-import

PLANTED = "s3cr3t-Planted-Pa55word-0x7e"


def _upgrades(helm) -> list:  # noqa: F811
    return [call for call in helm.calls() if call[:1] == ["upgrade"]]


def _no_planted(*texts: str) -> None:
    forms = [PLANTED, base64.b64encode(PLANTED.encode()).decode(), base64.b64encode(("robot:" + PLANTED).encode()).decode()]
    assert not [form for text in texts for form in forms if form in text], "the planted secret was shown"


def test_a_secret_not_created_by_the_collection_is_never_overwritten(lab, helm):  # noqa: F811
    lab.k8s.ensure_namespace("gpu-operator")
    lab.k8s.create(docker_secret("regcred"))  # a team's own pull secret
    before, team = lab.rv(), lab.store.get("v1/secrets", "gpu-operator", "regcred")
    creds = {"name": "regcred", "username": "robot", "password": PLANTED}
    refused = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, registry_credentials=creds),
                      env=helm.environment)
    assert refused.get("failed") and "gpu-operator/regcred" in refused["msg"], refused
    assert "not created by gpufleet.sharing" in refused["msg"]
    assert lab.rv() == before and lab.store.get("v1/secrets", "gpu-operator", "regcred") == team
    assert not _upgrades(helm)
    _no_planted(json.dumps(refused))


def test_helm_release_record_is_never_overwritten(lab, helm):  # noqa: F811
    lab.k8s.ensure_namespace("gpu-operator")
    lab.k8s.create(docker_secret("mirror-pull"))
    installed = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, image_pull_secrets=["mirror-pull"]),
                        env=helm.environment)
    assert installed.get("cluster_policy_state") == "ready", installed
    record = "sh.helm.release.v1.gpu-operator.v1"
    before, kept = lab.rv(), lab.store.get("v1/secrets", "gpu-operator", record)
    creds = {"name": record, "username": "robot", "password": PLANTED}
    refused = lab.run("gpu_operator", operator_args(lab, helm, registry=MIRROR, image_pull_secrets=["mirror-pull"],
                                                    registry_credentials=creds), env=helm.environment)
    assert refused.get("failed") and record in refused["msg"], refused
    assert lab.rv() == before and lab.store.get("v1/secrets", "gpu-operator", record) == kept


def test_adding_pull_secrets_by_upgrade_reaches_the_cluster_policy(lab, helm):  # noqa: F811
    """helm 4 applies the ClusterPolicy server-side: its imagePullSecrets is a list of strings (atomic)."""
    lab.k8s.ensure_namespace("gpu-operator")
    lab.k8s.create(docker_secret("mirror-pull"))
    first = lab.run("gpu_operator", operator_args(lab, helm, wait=False), env=helm.environment)
    assert not first.get("failed"), first
    upgraded = lab.run("gpu_operator", operator_args(lab, helm, wait=False, image_pull_secrets=["mirror-pull"]),
                       env=helm.environment)
    assert upgraded.get("action") == "upgraded", upgraded
    policy = lab.store.get("nvidia.com/v1/clusterpolicies", None, "cluster-policy")
    assert policy["spec"]["driver"]["imagePullSecrets"] == ["mirror-pull"]


def test_proxy_password_of_an_earlier_run_is_not_in_the_diff(lab, helm):  # noqa: F811
    proxy = {"http_proxy": "http://bob:%s@proxy.lab.test:3128" % PLANTED}
    applied = lab.run("gpu_operator", operator_args(lab, helm, wait=False, proxy=proxy), env=helm.environment)
    assert not applied.get("failed"), applied
    planned = lab.run("gpu_operator", operator_args(lab, helm, wait=False), check=True, diff=True,
                      env=helm.environment)
    assert planned.get("changed") and "diff" in planned, planned
    assert "http://<redacted>@proxy.lab.test:3128" in json.dumps(planned["diff"])
    _no_planted(json.dumps(applied), json.dumps(planned))


@pytest.mark.parametrize("extra,words", [
    ({"proxy": {"http_proxy": "htp://proxy.lab.test:3128"}}, "proxy.http_proxy"),
    ({"proxy": {"https_proxy": "https://bob:%s@proxy.lab.test:99999" % PLANTED}}, "port '99999'"),
    ({"proxy": {"http_proxy": "http://proxy.lab.test:3128\nLD_PRELOAD=/tmp/x.so"}}, "control character"),
    ({"image_pull_secrets": [""]}, "image_pull_secrets[0]"),
    ({"registry": MIRROR, "registry_credentials": {"name": "c", "username": "ro:bot", "password": PLANTED}},
     "registry_credentials.username"),
    ({"registry": MIRROR, "registry_credentials": {"name": "c", "username": "robot", "password": ""}},
     "registry_credentials.password"),
    ({"registry": "bob:%s@%s" % (PLANTED, MIRROR)}, "must not contain credentials"),
])
def test_bad_operator_input_changes_nothing(lab, helm, extra, words):  # noqa: F811
    before = lab.rv()
    refused = lab.run("gpu_operator", operator_args(lab, helm, **extra), env=helm.environment)
    assert refused.get("failed") and words in refused["msg"], refused
    assert lab.rv() == before and not _upgrades(helm)
    assert len(refused["msg"]) < 2000  # an empty password would have masked every character boundary
    _no_planted(json.dumps(refused))


def test_a_no_proxy_list_is_joined(lab, helm):  # noqa: F811
    applied = lab.run("gpu_operator", operator_args(lab, helm, wait=False, proxy={"no_proxy": [".svc", "10.0.0.0/8"]}),
                      env=helm.environment)
    env = {e["name"]: e["value"] for e in applied["release_values"]["driver"]["env"]}
    assert env["NO_PROXY"] == ".svc,10.0.0.0/8", env
