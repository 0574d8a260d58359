"""Operator-managed MIG under the default `serial` (issue 10 #6): plan the whole fleet before any
change, and the MIG manager acts on a node only after the rollout cordoned and drained it.

Three A100 hosts (virtual cluster) first get `all-1g.5gb` from the host backend; a long-running
workload holds a MIG device on each node (owned by a ReplicaSet, so the drain evicts it). Then
`site.yml` switches to `gpufleet_mig_backend: operator` with a different plan per host and the
default serial. A watcher records what the cluster shows while the run goes on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from typing import Any, Dict, List

import pytest
import yaml

from gpulab import gpustate, hosts, tools

from labtools import BUILD, REPO, ensure_collection_path, environ

ensure_collection_path()

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient  # noqa: E402  pylint: disable=wrong-import-position

_PROBLEM = hosts.prerequisites_problem()
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=f"lab hosts cannot run here: {_PROBLEM}")

NODES = ["op-0", "op-1", "op-2"]
FAST_ENV = {"GPULAB_RESYNC_SECONDS": "0.3", "GPULAB_OPERAND_START_DELAY": "0.2", "GPULAB_POD_START_DELAY": "0.1",
            "GPULAB_POD_STOP_DELAY": "0.1", "GPULAB_DEFAULT_RUNTIME": "0.2", "GPULAB_MIG_APPLY_DELAY": "0.3"}
# Each host's own plan; the custom names exist only in that host's mig_configs.
PLANS = {
    "op-0": ("custom-op-0", {"custom-op-0": [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.10gb": 3}}]}),
    "op-1": ("custom-op-1", {"custom-op-1": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]}),
    "op-2": ("all-balanced", {}),
}
CONFIGMAP = ("gpufleet-mig-parted-config", "gpu-operator")


def _helm() -> str:
    shared = "/work/main/.cache/helm/helm"
    return shared if os.path.exists(shared) else tools.ensure_helm(os.path.join(REPO, ".cache"))


def _flat(result: subprocess.CompletedProcess) -> str:
    return re.sub(r"\s+", " ", result.stdout + result.stderr)


class Fleet:
    def __init__(self, lab_dir: str, info: Dict[str, Any]) -> None:
        self.dir = lab_dir
        self.inventory = info["inventory"]
        self.state_files = {h["name"]: h["state_file"] for h in info["hosts"]}
        self.kubeconfig = os.path.join(lab_dir, "kubeconfig")
        self.k8s = K8sClient.connect({"kubeconfig": self.kubeconfig}, retries=0)
        self.plans = os.path.join(lab_dir, "plans.yml")
        with open(self.plans, "w", encoding="utf-8") as handle:
            yaml.safe_dump({"all": {"hosts": {name: {"mig_config": plan, "mig_configs": configs}
                                              for name, (plan, configs) in PLANS.items()}}}, handle)

    def play(self, *options: str, **variables: Any) -> subprocess.CompletedProcess:
        base = {
            "gpufleet_kubeconfig": self.kubeconfig, "gpufleet_report_dir": os.path.join(self.dir, "reports"),
            "gpu_operator_chart_ref": os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin"),
            "gpu_operator_helm_binary": _helm(), "gpu_operator_chart_version": "", "gpu_operator_repo_url": "",
            "gpu_operator_driver_enabled": False, "gpu_operator_wait_timeout": 120, "gpu_operator_wait_interval": 1,
            "gpufleet_rollout_settle_timeout": 60, "verify_pod_timeout": 30, "gpufleet_drain_timeout": 60,
            "mig_operator_poll_interval": 0.5, "mig_operator_timeout": 120, "mig_operator_drain_timeout": 60,
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        }
        path = os.path.join(self.dir, "vars.yml")
        with open(path, "w", encoding="utf-8") as handle:
            yaml.safe_dump(dict(base, **variables), handle)
        argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", self.inventory,
                "-i", self.plans, "-e", "@" + path, os.path.join(REPO, "playbooks", "site.yml"), *options]
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                   ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="yaml", ANSIBLE_FORKS="5")
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=900)  # noqa: S603

    def workload(self, node: str) -> None:
        """A long-running pod on a 1g.5gb MIG device of the node (a GPU process), owned by a ReplicaSet."""
        rs = self.k8s.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                              "metadata": {"name": "busy-" + node, "namespace": "default"},
                              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "busy-" + node}},
                                       "template": {"metadata": {"labels": {"app": "busy-" + node}},
                                                    "spec": {"containers": [{"name": "c", "image": "busy"}]}}}})
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
                 "uid": rs["metadata"]["uid"], "controller": True}
        container = {"name": "c", "image": "busy", "resources": {"limits": {"nvidia.com/mig-1g.5gb": 1}}}
        self.k8s.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "busy-" + node, "namespace": "default", "labels": {"app": "busy-" + node},
                                      "annotations": {"lab.gpufleet.io/runtime-seconds": "3600"},
                                      "ownerReferences": [owner]},
                         "spec": {"nodeName": node, "containers": [container]}})

    def layout(self, node: str) -> List[str]:
        gpu = gpustate.load(self.state_files[node]).gpus[0]
        return sorted(gi.profile for gi in gpu.gpu_instances) if gpu.mig_current else []

    def mig_failures(self) -> List[str]:
        return ["%s: %s" % (e["involvedObject"]["name"], e.get("message")) for e in self.k8s.list("Event")
                if e.get("reason") == "MigConfigFailed"]


class Watcher(threading.Thread):
    """Polls the nodes and the MIG manager ConfigMap while a run goes on."""

    def __init__(self, fleet: Fleet) -> None:
        super().__init__(daemon=True)
        self.fleet = fleet
        self.done = threading.Event()
        self.untouched_changes: List[str] = []  # mig.config set/changed on a schedulable node
        self.configmaps: List[str] = []  # every distinct ConfigMap content seen
        self.initial = {n: self._labels(fleet.k8s.get("Node", n)).get("nvidia.com/mig.config") for n in NODES}

    @staticmethod
    def _labels(node: Any) -> Dict[str, str]:
        return ((node or {}).get("metadata") or {}).get("labels") or {}

    def run(self) -> None:
        seen = dict(self.initial)
        while not self.done.wait(0.05):
            for name in NODES:
                node = self.fleet.k8s.get("Node", name) or {}
                value = self._labels(node).get("nvidia.com/mig.config")
                if value != seen[name] and not (node.get("spec") or {}).get("unschedulable"):
                    self.untouched_changes.append("%s: nvidia.com/mig.config %s -> %s while schedulable"
                                                  % (name, seen[name], value))
                seen[name] = value
            cm = self.fleet.k8s.get("ConfigMap", CONFIGMAP[0], CONFIGMAP[1])
            text = ((cm or {}).get("data") or {}).get("config.yaml")
            if text and text not in self.configmaps:
                self.configmaps.append(text)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("opbackend"))
    with environ(FAST_ENV):  # the API server process inherits them
        info = hosts.up(lab_dir, [hosts.parse_host_spec("%s=A100-40GB:1@gpu_hosts" % n) for n in NODES],
                        cluster=True, first_address=os.environ.get("GPUFLEET_TEST_OPLAB_ADDRESS", "127.0.13.2"))
    try:
        lab = Fleet(lab_dir, info)
        result = lab.play(mig_config="all-1g.5gb")  # host backend; extra vars win over the plans
        assert result.returncode == 0, _flat(result)[-4000:]
        assert all(lab.layout(n) == ["1g.5gb"] * 7 for n in NODES)
        yield lab
    finally:
        hosts.down(lab_dir)


def test_operator_backend_plans_the_fleet_and_drains_before_the_mig_manager_acts(fleet):
    for node in NODES:
        fleet.workload(node)
    watcher = Watcher(fleet)
    watcher.start()
    try:
        result = fleet.play(gpufleet_mig_backend="operator")
    finally:
        watcher.done.set()
        watcher.join()
    output = _flat(result)
    # Never the MIG manager on a node we have not cordoned and drained.
    assert watcher.untouched_changes == [], (watcher.untouched_changes, fleet.mig_failures(), output[-3000:])
    assert fleet.mig_failures() == []
    assert result.returncode == 0, output[-4000:]
    # Planned before any change: every ConfigMap the MIG manager could read holds every host's plan.
    assert watcher.configmaps, "no ConfigMap seen"
    for text in watcher.configmaps:
        configs = yaml.safe_load(text)["mig-configs"]
        assert {"custom-op-0", "custom-op-1", "all-balanced"} <= set(configs), sorted(configs)
    assert fleet.layout("op-0") == ["2g.10gb"] * 3
    assert fleet.layout("op-1") == ["3g.20gb"] * 2
    assert fleet.layout("op-2") != ["1g.5gb"] * 7
    for node in NODES:
        labels = fleet.k8s.get("Node", node)["metadata"]["labels"]
        assert labels["nvidia.com/mig.config"] == PLANS[node][0]
        assert labels["nvidia.com/mig.config.state"] == "success"
        assert not fleet.k8s.get("Node", node)["spec"].get("unschedulable")

    again = fleet.play(gpufleet_mig_backend="operator")
    assert again.returncode == 0, _flat(again)[-4000:]
    assert re.findall(r"changed=(\d+)", again.stdout) and set(re.findall(r"changed=(\d+)", again.stdout)) == {"0"}, \
        _flat(again)[-3000:]
    before = {n: fleet.layout(n) for n in NODES}
    checked = fleet.play("--check", gpufleet_mig_backend="operator")
    assert checked.returncode == 0, _flat(checked)[-4000:]
    assert {n: fleet.layout(n) for n in NODES} == before
