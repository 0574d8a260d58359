"""Least privilege, proven: the playbooks run green on a lab cluster that enforces RBAC, with a
ServiceAccount bound to the ClusterRoles shipped in rbac/, and fail naming the permission when a
rule is missing.

One lab (the virtual cluster plus one A100 host over SSH), one ServiceAccount token:
1. site.yml on the fresh cluster with gpufleet-sharing + gpufleet-sharing-operator-install;
2. rollout.yml (a MIG layout change, a workload pod to evict) and verify.yml with gpufleet-sharing
   only;
3. gpufleet-sharing without its pods/eviction rule: the rollout fails with Kubernetes' message.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any, Dict, List

import pytest
import yaml

from gpulab import hosts, tools
from gpulab.cluster import access, server
from labtools import environ

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RBAC_DIR = os.path.join(REPO, "rbac")
NODE = "a100-inf-0"
SA_USER = "system:serviceaccount:gpufleet:gpufleet-sharing"
FAST_ENV = {"GPULAB_RESYNC_SECONDS": "0.3", "GPULAB_OPERAND_START_DELAY": "0.1",
            "GPULAB_POD_START_DELAY": "0.05", "GPULAB_POD_STOP_DELAY": "0.05",
            "GPULAB_DEFAULT_RUNTIME": "0.1", "GPULAB_MIG_APPLY_DELAY": "0.05"}
SMALL = {"mig_config": "inference-small",
         "mig_configs": {"inference-small": [{"device-filter": ["0x20B010DE", "0x20B110DE"],
                                              "devices": "all", "mig-enabled": True,
                                              "mig-devices": {"1g.5gb": 7}}]}}

# The workload holds no GPU: only the whole-node drain evicts it (the per-GPU scope, the default, keeps pods on
# GPUs that do not change, docs/rollout.md). These tests are about the eviction rule, so they drain the node.
NODE_SCOPE = {"gpufleet_mig_drain_scope": "node"}

pytestmark = pytest.mark.lab_hosts


def load(name: str) -> List[Dict[str, Any]]:
    with open(os.path.join(RBAC_DIR, name), encoding="utf-8") as handle:
        return access.documents(yaml.safe_load_all(handle))


def team_namespaces() -> List[str]:
    """The namespaces of the lab inventory's teams (gpufleet_teams): the playbooks write their LocalQueues."""
    with open(os.path.join(REPO, "inventories", "lab", "group_vars", "all.yml"), encoding="utf-8") as handle:
        return sorted({ns for team in yaml.safe_load(handle).get("gpufleet_teams") or [] for ns in team["namespaces"]})


def install_binding() -> Dict[str, Any]:
    binding = dict(load("bindings.yml")[-1])
    binding["metadata"] = {"name": "gpufleet-sharing-operator-install"}
    binding["roleRef"] = dict(binding["roleRef"], name="gpufleet-sharing-operator-install")
    return binding


class RbacLab:
    def __init__(self, lab_dir: str, kubeconfig: str, helm: str):
        self.dir, self.kubeconfig, self.helm = lab_dir, kubeconfig, helm

    def play(self, playbook: str, tmp_dir: str, extra: Dict[str, Any] = None) -> subprocess.CompletedProcess:
        extra_file = os.path.join(tmp_dir, "extra-%s.yml" % playbook)
        with open(extra_file, "w", encoding="utf-8") as handle:
            yaml.safe_dump(dict(extra or {}, gpufleet_kubeconfig=self.kubeconfig,
                                gpu_operator_chart_ref=os.path.join(
                                    REPO, "tests", "lab", "charts", "gpu-operator-standin"),
                                gpu_operator_helm_binary=self.helm,
                                gpufleet_report_dir=os.path.join(tmp_dir, "reports")), handle)
        argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                "-i", os.path.join(self.dir, "inventory.yml"),
                "-i", os.path.join(REPO, "inventories", "lab"), "-e", "@" + extra_file,
                os.path.join(REPO, "playbooks", playbook)]
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"),
                   ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default",
                   ANSIBLE_CALLBACK_RESULT_FORMAT="yaml")
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env,  # noqa: S603
                              timeout=400)

    def workload(self) -> None:
        """A long-running pod on the node, owned by a ReplicaSet, for the drain to evict."""
        replicaset = access.admin_request(self.dir, "POST", "/apis/apps/v1/namespaces/default/replicasets", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "busy"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "busy"}},
                     "template": {"metadata": {"labels": {"app": "busy"}},
                                  "spec": {"containers": [{"name": "c", "image": "busy"}]}}}})
        if replicaset["_code"] == 409:
            replicaset = access.admin_request(self.dir, "GET", "/apis/apps/v1/namespaces/default/replicasets/busy")
        answer = access.admin_request(self.dir, "POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "busy-", "labels": {"app": "busy"},
                         "annotations": {"lab.gpufleet.io/runtime-seconds": "3600",
                                         "lab.gpufleet.io/gpu-process": "false"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "busy", "uid": replicaset["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busy"}]}})
        assert answer["_code"] == 201, answer

    def requests(self) -> Dict[str, int]:
        return server.metrics(self.dir)["requests"]


def flat(result: subprocess.CompletedProcess) -> str:
    return re.sub(r"\s+", " ", result.stdout + result.stderr)


def assert_green(result: subprocess.CompletedProcess) -> str:
    output = flat(result)
    assert result.returncode == 0, output[-4000:]
    assert "forbidden" not in output, output[-4000:]
    return output


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("rbaclab"))
    with environ(FAST_ENV):  # the API server process inherits them
        hosts.up(lab_dir, [hosts.parse_host_spec("%s=A100-40GB:1@a100_inference,gpu_hosts" % NODE)],
                 cluster=True)
    try:
        access.apply(lab_dir, load("gpufleet-sharing.yml") + load("gpufleet-sharing-operator-install.yml")
                     + load("bindings.yml") + [install_binding()])
        access.create_namespaces(lab_dir, team_namespaces())  # the cluster admin's step before the quotas
        kubeconfig = os.path.join(lab_dir, "kubeconfig-gpufleet")
        assert access.service_account_kubeconfig(lab_dir, "gpufleet", "gpufleet-sharing", kubeconfig) == SA_USER
        yield RbacLab(lab_dir, kubeconfig, tools.ensure_helm(os.path.join(REPO, ".cache")))
    finally:
        hosts.down(lab_dir)


def test_site_on_a_fresh_cluster_with_the_install_and_rollout_roles(lab, tmp_path):
    assert_green(lab.play("site.yml", str(tmp_path)))
    # the lab inventory's teams got their queues with the restricted identity (issue 23)
    queues = access.admin_request(lab.dir, "GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    assert sorted(q["metadata"]["name"] for q in queues["items"]) == ["inference", "research"], queues
    # the identity really is restricted: what no role grants is refused
    with open(lab.kubeconfig, encoding="utf-8") as handle:
        token = yaml.safe_load(handle)["users"][0]["user"]["token"]
    denied = access.admin_request(lab.dir, "GET", "/api/v1/serviceaccounts", token=token)
    assert denied["_code"] == 403
    assert denied["message"] == ('serviceaccounts is forbidden: User "%s" cannot list resource '
                                 '"serviceaccounts" in API group "" at the cluster scope' % SA_USER)


def test_rollout_and_verify_with_the_rollout_role_only(lab, tmp_path):
    access.delete(lab.dir, install_binding())
    lab.workload()
    server.metrics(lab.dir, reset=True)
    output = assert_green(lab.play("rollout.yml", str(tmp_path), dict(SMALL, **NODE_SCOPE)))
    assert re.search(r"%s +changed" % NODE, output), output[-3000:]
    assert lab.requests().get("create v1/pods/eviction", 0) >= 1  # the drain evicted the workload
    assert_green(lab.play("verify.yml", str(tmp_path), SMALL))


def test_without_the_eviction_rule_the_rollout_fails_naming_it(lab, tmp_path):
    role = load("gpufleet-sharing.yml")[0]
    role["rules"] = [rule for rule in role["rules"] if rule["resources"] != ["pods/eviction"]]
    access.apply(lab.dir, [role])
    lab.workload()
    try:
        result = lab.play("rollout.yml", str(tmp_path), NODE_SCOPE)  # back to the inventory's layout
    finally:
        access.apply(lab.dir, load("gpufleet-sharing.yml"))
    output = flat(result)
    assert result.returncode != 0, output[-3000:]
    assert ('is forbidden: User "%s" cannot create resource "pods/eviction" in API group "" in '
            'the namespace "default"' % SA_USER) in output, output[-4000:]
    node = access.admin_request(lab.dir, "GET", "/api/v1/nodes/%s" % NODE)
    assert node["spec"].get("unschedulable") is True  # a failed node stays cordoned...
    assert node["metadata"]["annotations"]["gpufleet.sharing/rollout"].startswith("failed:")  # ...with why


def test_the_shipped_files_are_what_the_docs_describe():
    names = {doc["metadata"]["name"] for name in ("gpufleet-sharing.yml", "gpufleet-sharing-operator-install.yml")
             for doc in load(name)}
    assert names == {"gpufleet-sharing", "gpufleet-sharing-operator-install"}
    with open(os.path.join(REPO, "docs", "rbac.md"), encoding="utf-8") as handle:
        text = handle.read()
    for rule in load("gpufleet-sharing.yml")[0]["rules"]:
        for resource in rule["resources"]:
            assert "`%s`" % resource in text, resource
