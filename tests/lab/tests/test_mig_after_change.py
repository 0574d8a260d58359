"""After a host MIG change on a node that runs the GPU Operator (issue 11, part 1).

NVIDIA's MIG manager, after it applies a config (docs/reference/specs.md §7.7), restarts the
operator validator (it validates only when it starts) and, with CDI, regenerates the management
CDI spec (it lists the MIG devices that existed when it was generated). The lab models both: the
validator's log names the devices it validated at its start, and each host keeps its management
spec under its own directory, written by the host's ``nvidia-ctk``. The rollout must leave neither
stale, and pause and restore the operands once, not once in the play and again in the mig role.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any, Dict, List

import pytest
import yaml

from gpulab import gpustate, hosts, migparted
from gpulab.cluster.operator.programs import VALIDATED_PREFIX
from gpulab.hosts import ctk
from test_mig_failures import _flat
from test_rollout_live_operator import REPO_ROOT, LiveLab, start_live_lab

NODE = "op-h100"
OTHER = "op-h200"
SPECS = ["op-h100=H100-80GB:1", "op-h200=H200:1"]
ALL_1G = {"version": "v1", "mig-configs": {"all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}


# --------------------------------------------------------------------------- the lab, without SSH

def test_lab_management_cdi_spec_keeps_the_devices_it_was_generated_with(tmp_path):
    state_file = str(tmp_path / "state.json")
    gpustate.create(state_file, "h", [("H100-80GB", 1)])
    ctk.write_spec(state_file)  # at install
    assert migparted.apply_config(state_file, ALL_1G, "all-1g.10gb")[0]
    now = ctk.device_nodes(gpustate.load(state_file))
    assert sum(1 for n in now if n.startswith("/dev/nvidia-caps/")) == 2 + 7 * 2  # config, monitor, GI + CI each
    assert ctk.spec_device_nodes(ctk.read_spec(state_file)) != now  # stale
    assert ctk.main(["cdi", "generate", "--mode=management", "--vendor=management.nvidia.com", "--class=gpu",
                     "--output=/var/run/cdi/management.nvidia.com-gpu.yaml"], state_file) == 0
    assert ctk.spec_device_nodes(ctk.read_spec(state_file)) == now
    assert ctk.read_spec(state_file)["kind"] == "management.nvidia.com/gpu"
    # Written under the host's own directory, never the machine's /var/run.
    assert os.path.isfile(tmp_path / "var" / "run" / "cdi" / "management.nvidia.com-gpu.yaml")
    assert ctk.main(["cdi", "generate", "--mode=management", "--output=/../../etc/x.yaml"], state_file) == 0
    assert os.path.isfile(tmp_path / "etc" / "x.yaml")
    assert ctk.main(["system", "create-device-nodes", "--control-devices"], state_file) == 0
    assert ctk.main(["system", "create-device-nodes", "--bogus"], state_file) == 1
    assert ctk.main(["cdi", "generate", "--mode=nvml"], state_file) == 1


# --------------------------------------------------------------------------- the live lab

pytestmark = pytest.mark.lab_hosts


def validator_pods(lab: LiveLab, node: str) -> List[Dict[str, Any]]:
    pods = json.loads(lab.kubectl("get", "pods", "-n", "gpu-operator", "-l", "app=nvidia-operator-validator",
                                  "--field-selector", "spec.nodeName=%s" % node, "-o", "json"))["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def validated(lab: LiveLab, node: str) -> List[str]:
    """The devices the node's running validator validated when it started."""
    pods = validator_pods(lab, node)
    assert len(pods) == 1, pods
    log = lab.kubectl("logs", "-n", "gpu-operator", pods[0]["metadata"]["name"])
    found = re.search(re.escape(VALIDATED_PREFIX) + r'([^"\n]*)', log)
    assert found, log
    return [] if found.group(1) == "none" else found.group(1).split(",")


def current_devices(lab: LiveLab, node: str) -> List[str]:
    state = gpustate.load(lab.state_files[node])
    found: List[str] = []
    for gpu in state.gpus:
        found += [pair[1].uuid for pair in gpu.mig_devices()] if gpu.mig_current else [gpu.uuid]
    return found


def ran(output: str, task: str) -> int:
    """How many times a task of that name ran (ok or changed, not skipped) in default-callback output."""
    count = 0
    for block in re.split(r"\nTASK \[", "\n" + output)[1:]:
        header = block.split("]", 1)[0]
        if header.split(" : ")[-1] == task:
            count += len(re.findall(r"^(?:ok|changed): \[", block, re.MULTILINE))
    return count


def play(lab: LiveLab, tmp_path, playbook: str, host: str, extra: Dict[str, Any]) -> subprocess.CompletedProcess:
    return lab.play(tmp_path, playbook, host, extra)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("afterlab"))
    live = start_live_lab(lab_dir, SPECS, lambda live, n: "nvidia-device-plugin-daemonset" in live.running_operands(n)
                          and "nvidia-operator-validator" in live.running_operands(n))
    try:
        yield live
    finally:
        hosts.down(lab_dir)


@pytest.fixture(scope="module")
def rolled(lab, tmp_path_factory):
    """One rollout of NODE to all-1g.10gb; what was there before, and the run."""
    before = {"validated": validated(lab, NODE), "spec": ctk.spec_device_nodes(ctk.read_spec(lab.state_files[NODE]))}
    tmp_path = tmp_path_factory.mktemp("rollout")
    result = play(lab, tmp_path, os.path.join(REPO_ROOT, "playbooks", "rollout.yml"), NODE, {
        "gpufleet_gpu_hosts": "rollout_nodes", "mig_config": "all-1g.10gb", "gpufleet_report_dir": str(tmp_path / "reports"),
        "gpufleet_rollout_settle_timeout": 60, "verify_pod_timeout": 60})
    output = _flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-4000:]
    assert len(current_devices(lab, NODE)) == 7
    return before, result


def test_rollout_restarts_the_validator_so_that_it_validates_the_new_devices(lab, rolled):
    before = rolled[0]
    assert before["validated"] == [gpustate.load(lab.state_files[NODE]).gpus[0].uuid]  # the whole GPU, at its start
    lab.wait("a validator running on %s" % NODE, lambda: "nvidia-operator-validator" in lab.running_operands(NODE))
    assert validated(lab, NODE) == current_devices(lab, NODE)


def test_rollout_regenerates_the_management_cdi_spec(lab, rolled):
    before = rolled[0]
    state = gpustate.load(lab.state_files[NODE])
    assert not any(n.startswith("/dev/nvidia-caps/") for n in before["spec"])
    assert ctk.spec_device_nodes(ctk.read_spec(lab.state_files[NODE])) == ctk.device_nodes(state)
    assert [e["action"] for e in state.events if e["actor"] == "nvidia-ctk"] == ["create-device-nodes", "cdi-generate"]


def test_rollout_pauses_and_restores_the_operands_once(rolled):
    result = rolled[1]
    output = result.stdout
    assert ran(output, "Pause the node's GPU operands") == 1, output[-6000:]
    assert ran(output, "Restore the node's GPU operands") + ran(
        output, "Restore the node's GPU operands (each deploy label to its previous value)") == 1, output[-6000:]


def test_mig_role_refuses_a_required_nvidia_ctk_that_is_missing_and_changes_nothing(lab, tmp_path):
    playbook = tmp_path / "mig.yml"
    playbook.write_text(yaml.safe_dump([{"name": "mig role", "hosts": "rollout_nodes", "gather_facts": False,
                                         "roles": [{"role": "gpufleet.sharing.mig"}]}]))
    state_before = open(lab.state_files[OTHER], "rb").read()
    labels_before = lab.deploy_labels(OTHER)
    result = play(lab, tmp_path, str(playbook), OTHER, {
        "mig_config": "all-1g.18gb", "mig_cdi_refresh": True, "mig_nvidia_ctk_binary": "/nonexistent/nvidia-ctk"})
    output = _flat(result.stdout + result.stderr)
    assert result.returncode != 0, output[-3000:]
    # Refused by mig_config in the role's plan step (mig_cdi_refresh is its cdi_refresh), before the pause.
    assert "fatal: [op-h200]" in output
    assert "cdi_refresh=true but /nonexistent/nvidia-ctk (nvidia_ctk_binary) does not exist" in output
    assert "so nothing was changed" in output
    assert open(lab.state_files[OTHER], "rb").read() == state_before
    assert lab.deploy_labels(OTHER) == labels_before


def test_mig_role_skips_the_cdi_spec_with_a_note_when_nvidia_ctk_is_missing(lab, tmp_path):
    playbook = tmp_path / "mig.yml"
    playbook.write_text(yaml.safe_dump([{"name": "mig role", "hosts": "rollout_nodes", "gather_facts": False,
                                         "roles": [{"role": "gpufleet.sharing.mig"}]}]))
    spec_before = ctk.read_spec(lab.state_files[OTHER])
    result = play(lab, tmp_path, str(playbook), OTHER, {
        "mig_config": "all-1g.18gb", "mig_nvidia_ctk_binary": "/nonexistent/nvidia-ctk"})
    output = _flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-4000:]
    assert "[WARNING]: /nonexistent/nvidia-ctk not found: the management CDI spec is not regenerated" in output
    assert len(current_devices(lab, OTHER)) == 7
    assert ctk.read_spec(lab.state_files[OTHER]) == spec_before
    # The role alone (a cluster configured) pauses, restores and restarts the validator too.
    lab.wait("a validator running on %s" % OTHER, lambda: "nvidia-operator-validator" in lab.running_operands(OTHER))
    assert validated(lab, OTHER) == current_devices(lab, OTHER)
    assert "gpufleet.sharing/paused-operands" not in (lab.node(OTHER)["metadata"].get("annotations") or {})
