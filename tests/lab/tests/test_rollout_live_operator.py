"""playbooks/rollout.yml on nodes where the GPU Operator's pods run (issue 11, parts 1 and 3).

Real SSH hosts plus the lab's virtual cluster with a ClusterPolicy: the device plugin, GFD and DCGM
exporter pods hold each host's GPUs (docs/reference/specs.md §7.6), and a drain leaves them
running. A host MIG change must pause them the way NVIDIA's MIG manager does, need no reboot on
Hopper, restore every deploy label to its previous value, and lift only a cordon the run set.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from typing import Any, Callable, Dict, List

import pytest
import yaml


from gpulab import gpustate, hosts
from labtools import FAST_ENV, environ
from test_mig_failures import _ansible_playbook, _collections_path, _flat

LAB_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(os.path.dirname(LAB_ROOT))

pytestmark = pytest.mark.lab_hosts

SPECS = ["op-h100=H100-80GB:1", "op-h200=H200:1"]
DEPLOY = "nvidia.com/gpu.deploy."
POLICY = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
          "spec": {"mig": {"strategy": "single"}, "migManager": {"enabled": False}}}


class LiveLab:
    def __init__(self, lab_dir: str, info: Dict[str, Any]):
        self.dir = lab_dir
        self.inventory = info["inventory"]
        self.kubeconfig = info["cluster"]["kubeconfig"]
        self.state_files = {h["name"]: h["state_file"] for h in info["hosts"]}

    def kubectl(self, *args: str, stdin: str = "") -> str:
        proc = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args], input=stdin, capture_output=True,
                              text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def node(self, name: str) -> Dict[str, Any]:
        return json.loads(self.kubectl("get", "node", name, "-o", "json"))

    def deploy_labels(self, name: str) -> Dict[str, str]:
        labels = self.node(name)["metadata"].get("labels") or {}
        return {k: v for k, v in labels.items() if k.startswith(DEPLOY)}

    def running_operands(self, name: str) -> list:
        pods = json.loads(self.kubectl("get", "pods", "-n", "gpu-operator", "--field-selector",
                                       "spec.nodeName=%s" % name, "-o", "json"))["items"]
        return sorted(p["metadata"]["name"].rsplit("-", 1)[0] for p in pods
                      if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"))

    def wait(self, what: str, probe, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            time.sleep(0.3)
        raise AssertionError("timed out waiting for %s" % what)

    def play(self, tmp_path, playbook: str, host: str, extra: Dict[str, Any]) -> subprocess.CompletedProcess:
        """A playbook of the collection against ``host`` only (group ``rollout_nodes``), with ``extra`` vars."""
        group = tmp_path / "group.yml"  # the rollout's hosts (its summary lists this group)
        group.write_text(yaml.safe_dump({"all": {"children": {"rollout_nodes": {"hosts": {host: None}}}}}))
        extra_file = tmp_path / "vars.yml"
        extra_file.write_text(yaml.safe_dump(dict({"gpufleet_kubeconfig": self.kubeconfig}, **extra)))
        argv = [_ansible_playbook(), "-i", self.inventory, "-i", str(group), playbook, "-e", "@" + str(extra_file)]
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=_collections_path(), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="yaml")
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=600)  # noqa: S603

    def rollout(self, tmp_path, host: str, mig_config: str) -> subprocess.CompletedProcess:
        return self.play(tmp_path, os.path.join(REPO_ROOT, "playbooks", "rollout.yml"), host, {
            "gpufleet_gpu_hosts": "rollout_nodes", "mig_config": mig_config,
            "gpufleet_report_dir": str(tmp_path / "reports"), "gpufleet_rollout_settle_timeout": 60,
            "verify_pod_timeout": 60, "gpufleet_run_id": "test-run"})


def start_live_lab(lab_dir: str, specs: List[str], ready: Callable[["LiveLab", str], Any]) -> "LiveLab":
    """SSH GPU hosts and the virtual cluster with a ClusterPolicy, once ``ready(lab, node)`` holds on every node."""
    with environ(FAST_ENV):  # the API server process inherits them
        info = hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in specs], cluster=True)
    try:
        lab = LiveLab(lab_dir, info)
        lab.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}))
        lab.kubectl("apply", "-f", "-", stdin=json.dumps(POLICY))
        for name in lab.state_files:
            lab.wait("the operands on %s" % name, lambda n=name: ready(lab, n))
    except BaseException:
        hosts.down(lab_dir)
        raise
    return lab


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("livelab"))
    lab = start_live_lab(lab_dir, SPECS, lambda lab, n: "nvidia-device-plugin-daemonset" in lab.running_operands(n)
                         and gpustate.load(lab.state_files[n]).gpu_client_pods)
    try:
        yield lab
    finally:
        hosts.down(lab_dir)


def test_host_mig_change_on_a_running_operator_node_needs_no_reboot(live, tmp_path):
    node = "op-h100"
    live.kubectl("label", "node", node, DEPLOY + "dcgm-exporter=false", "--overwrite")
    live.wait("dcgm exporter gone", lambda: "nvidia-dcgm-exporter" not in live.running_operands(node))
    labels_before = live.deploy_labels(node)
    operands_before = live.running_operands(node)
    result = live.rollout(tmp_path, node, "all-1g.10gb")
    output = _flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-4000:]
    state = gpustate.load(live.state_files[node])
    assert state.gpus[0].mig_current, output[-6000:]
    assert state.reboots == 0
    assert state.gpus[0].mig_current and len(state.gpus[0].gpu_instances) == 7
    assert live.deploy_labels(node) == labels_before  # dcgm-exporter stays false
    meta = live.node(node)
    assert not meta["spec"].get("unschedulable")
    assert "gpufleet.sharing/paused-operands" not in (meta["metadata"].get("annotations") or {})
    assert "gpufleet.sharing/cordoned-by" not in (meta["metadata"].get("annotations") or {})
    assert live.running_operands(node) == operands_before
    # issue 26 (2): the device plugin and GFD were paused, so the pods the restore waited for started
    # after the change: they are not restarted again (the verification above saw the new devices)
    restart = "Restart the node's device plugin and feature discovery so they see the new devices"
    assert "%s] *" % restart in output and re.search(re.escape(restart) + r"\] \**\s*skipping: \[%s\]" % node, output)


def test_a_node_cordoned_by_someone_else_is_changed_and_left_cordoned(live, tmp_path):
    node = "op-h200"
    live.kubectl("cordon", node)
    result = live.rollout(tmp_path, node, "all-1g.18gb")
    output = _flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-4000:]
    assert gpustate.load(live.state_files[node]).reboots == 0
    meta = live.node(node)
    assert meta["spec"].get("unschedulable") is True
    summary = json.loads((tmp_path / "reports" / "rollout-summary.json").read_text())
    row = [r for r in summary["nodes"] if r["node"] == node][0]
    assert row["outcome"] == "changed"
    assert "left cordoned" in row["reason"], row
