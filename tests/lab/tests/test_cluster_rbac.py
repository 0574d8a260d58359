"""RBAC in the lab's API server: the admin token stays cluster-admin; a ServiceAccount token gets
exactly what its bindings grant, and a denial is Kubernetes' 403 with its message form."""

from __future__ import annotations

import pytest

from gpulab.cluster import access, rbac, server

HOSTS = [{"name": "gpu-a", "state_file": "/nonexistent/gpu-a.json"}]
SA_USER = "system:serviceaccount:ops:runner"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"

ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "node-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                   "resourceNames": ["allowed"]}]}
BINDING = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": "runner-node-reader"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                       "name": "node-reader"},
           "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "ops"}]}
NS_ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": "evictor", "namespace": "ops"},
           "rules": [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
                     {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}
NS_BINDING = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": {"name": "runner-evictor", "namespace": "ops"},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                          "name": "evictor"},
              "subjects": [{"kind": "ServiceAccount", "name": "runner"}]}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("rbac"))
    running = server.serve_in_thread(lab_dir, HOSTS)
    access.apply(lab_dir, [ROLE, BINDING])
    kubeconfig = str(tmp_path_factory.mktemp("kc") / "runner")
    user = access.service_account_kubeconfig(lab_dir, "ops", "runner", kubeconfig)
    access.apply(lab_dir, [NS_ROLE, NS_BINDING])
    token = running.api.rbac.mint("ops", "runner")[0]
    yield {"dir": lab_dir, "lab": running, "user": user, "token": token, "kubeconfig": kubeconfig}
    running.stop()


def as_runner(lab, method, path, body=None):
    return access.admin_request(lab["dir"], method, path, body, token=lab["token"])


def test_the_rbac_types_are_served_and_the_admin_is_unrestricted(lab):
    listed = access.admin_request(lab["dir"], "GET", RBAC_API + "/clusterroles")
    assert listed["_code"] == 200
    assert "node-reader" in [item["metadata"]["name"] for item in listed["items"]]
    assert access.admin_request(lab["dir"], "GET", "/api/v1/secrets")["_code"] == 200
    groups = access.admin_request(lab["dir"], "GET", "/apis")
    assert "rbac.authorization.k8s.io" in [g["name"] for g in groups["groups"]]


def test_a_minted_kubeconfig_is_the_service_account(lab):
    assert lab["user"] == SA_USER
    with open(lab["kubeconfig"], encoding="utf-8") as handle:
        text = handle.read()
    assert "user: %s" % SA_USER in text
    assert as_runner(lab, "GET", "/api/v1/nodes")["_code"] == 200
    assert as_runner(lab, "GET", "/api/v1/nodes/gpu-a")["_code"] == 200
    assert as_runner(lab, "GET", "/apis")["_code"] == 200  # discovery for every authenticated user


def test_a_cluster_scoped_denial_names_verb_resource_and_scope(lab):
    answer = as_runner(lab, "PATCH", "/api/v1/nodes/gpu-a", None)
    assert answer["_code"] == 403
    assert answer["reason"] == "Forbidden"
    assert answer["message"] == ('nodes "gpu-a" is forbidden: User "%s" cannot patch resource '
                                 '"nodes" in API group "" at the cluster scope' % SA_USER)
    assert answer["details"] == {"kind": "nodes", "name": "gpu-a"}


def test_a_namespaced_denial_and_a_subresource(lab):
    answer = as_runner(lab, "GET", "/api/v1/namespaces/default/pods")
    assert answer["_code"] == 403
    assert answer["message"] == ('pods is forbidden: User "%s" cannot list resource "pods" in '
                                 'API group "" in the namespace "default"' % SA_USER)
    answer = as_runner(lab, "GET", "/api/v1/nodes/gpu-a/status")
    assert answer["message"].endswith('cannot get resource "nodes/status" in API group "" at '
                                      'the cluster scope')
    answer = as_runner(lab, "POST", "/api/v1/namespaces/default/pods/x/eviction", {})
    assert answer["message"] == ('pods "x" is forbidden: User "%s" cannot create resource '
                                 '"pods/eviction" in API group "" in the namespace "default"'
                                 % SA_USER)


def test_a_role_binding_grants_only_in_its_namespace(lab):
    assert as_runner(lab, "GET", "/api/v1/namespaces/ops/pods")["_code"] == 200
    # allowed: the eviction reaches the store (the pod does not exist)
    assert as_runner(lab, "POST", "/api/v1/namespaces/ops/pods/x/eviction", {})["_code"] == 404
    assert as_runner(lab, "GET", "/api/v1/pods")["message"].endswith(
        'cannot list resource "pods" in API group "" at the cluster scope')


def test_resource_names_and_group_in_the_message(lab):
    assert as_runner(lab, "GET", "/api/v1/namespaces/ops/configmaps/allowed")["_code"] == 404
    answer = as_runner(lab, "GET", "/api/v1/namespaces/ops/configmaps/other")
    assert answer["_code"] == 403
    answer = as_runner(lab, "GET", "/apis/coordination.k8s.io/v1/namespaces/ops/leases") \
        if any(rt.key == "coordination.k8s.io/v1/leases" for rt in lab["lab"].store.resources()) \
        else as_runner(lab, "GET", "/apis/apps/v1/namespaces/ops/daemonsets")
    assert answer["_code"] == 403
    assert ' in API group "coordination.k8s.io" ' in answer["message"] or \
        answer["message"] == ('daemonsets.apps is forbidden: User "%s" cannot list resource '
                              '"daemonsets" in API group "apps" in the namespace "ops"' % SA_USER)


def test_dry_run_needs_the_same_verb(lab):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    answer = as_runner(lab, "POST", "/api/v1/namespaces/ops/configmaps?dryRun=All", body)
    assert answer["_code"] == 403
    assert 'cannot create resource "configmaps"' in answer["message"]


def test_a_missing_role_is_named_and_unknown_tokens_are_unauthorized(lab):
    dangling = dict(BINDING, metadata={"name": "dangling"},
                    roleRef=dict(BINDING["roleRef"], name="no-such-role"))
    access.apply(lab["dir"], [dangling])
    try:
        answer = as_runner(lab, "DELETE", "/api/v1/nodes/gpu-a")
        assert answer["_code"] == 403
        assert answer["message"].endswith(
            'at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "no-such-role" '
            'not found')
    finally:
        access.delete(lab["dir"], dangling)
    answer = access.admin_request(lab["dir"], "GET", "/api/v1/nodes", token="not-a-token")
    assert answer["_code"] == 401


def test_rule_matching_is_kubernetes_like():
    attrs = rbac.Attributes("create", "", "pods", "eviction", "ns", "p")
    assert rbac.rule_allows({"apiGroups": [""], "resources": ["pods/eviction"],
                             "verbs": ["create"]}, attrs)
    assert not rbac.rule_allows({"apiGroups": [""], "resources": ["pods"],
                                 "verbs": ["create"]}, attrs)
    assert rbac.rule_allows({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, attrs)
    assert rbac.rule_allows({"apiGroups": [""], "resources": ["pods/*"], "verbs": ["create"]},
                            attrs)
    assert not rbac.rule_allows({"apiGroups": [""], "resources": ["pods/eviction"],
                                 "verbs": ["create"], "resourceNames": ["q"]}, attrs)
    listing = rbac.Attributes("list", "", "pods", None, "ns", None)
    assert not rbac.rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"],
                                 "resourceNames": ["q"]}, listing)
