"""The operator's DaemonSet pods hold the GPUs of their host (docs/reference/specs.md §7.6).

In-process lab: a running device plugin / GFD / DCGM exporter pod attaches to the host as a
non-compute client, so a MIG mode change goes pending and a reset is refused, exactly as for a host
GPU client service; setting the operand's deploy label to ``paused-for-mig-change`` makes its pod
go and the GPU free; ``true`` brings it back.
"""

from __future__ import annotations

import pytest

from gpulab import driver, gpustate
from test_cluster_behaviour_operator import Lab, wait_for

DEPLOY = "nvidia.com/gpu.deploy."
PAUSED = "paused-for-mig-change"


@pytest.fixture
def lab(tmp_path):
    made = Lab(tmp_path, {"op-h100": [("H100-80GB", 1)]})
    try:
        made.policy({"mig": {"strategy": "single"}, "migManager": {"enabled": False}})
        made.wait_ready()
        yield made
    finally:
        made.stop()


def _clients(lab: Lab):
    return gpustate.load(lab.paths["op-h100"]).gpu_client_pods


def _set_mig(lab: Lab, enable: bool) -> str:
    with gpustate.locked(lab.paths["op-h100"]) as state:
        return driver.set_mig_mode(state, state.gpu(0), enable)


def test_running_operands_hold_the_gpu_and_a_mode_change_stays_pending(lab):
    clients = wait_for("operand pods attached as GPU clients",
                       lambda: [c for c in _clients(lab) if "nvidia-device-plugin-daemonset" in c])
    assert clients
    state = gpustate.load(lab.paths["op-h100"])
    assert state.gpus[0].processes == []  # not compute processes: nvidia-smi does not list them
    assert _set_mig(lab, True) == "pending"
    with pytest.raises(driver.DriverError):
        with gpustate.locked(lab.paths["op-h100"]) as locked_state:
            driver.reset_gpu(locked_state, locked_state.gpu(0))


def test_pausing_the_deploy_labels_frees_the_gpu_and_true_brings_the_pods_back(lab):
    wait_for("device plugin attached", lambda: _clients(lab))
    keys = [key for key, value in lab.labels("op-h100").items() if key.startswith(DEPLOY) and value == "true"]
    for key in keys:
        if key.rsplit(".", 1)[-1] in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm"):
            lab.label("op-h100", key, PAUSED)
    wait_for("operand pods gone", lambda: not lab.operand_pods("nvidia-device-plugin-daemonset", "op-h100")
             and not _clients(lab))
    assert _set_mig(lab, True) == "effective"
    lab.label("op-h100", DEPLOY + "device-plugin", "true")
    wait_for("device plugin back", lambda: lab.operand_pods("nvidia-device-plugin-daemonset", "op-h100"))
    wait_for("device plugin attached again", lambda: _clients(lab))


# Third-party GPU clients (issue 25 part 6): the operator v26.7.0 labels GPU nodes
# nvidia.com/gpu.deploy.client=true (controllers/state_manager.go, gpu-operator #2607) for DaemonSets
# of node agents that hold the GPUs; mig-parted v0.15.0 pauses that label when the node carries it
# (pkg/mig/reconfigure/reconfigure.go, mig-parted #426).
CLIENT = DEPLOY + "client"
AGENT_NS = "monitoring"


def agent_daemonset(name: str = "gpu-health-agent", namespace: str = AGENT_NS) -> dict:
    """A node agent's DaemonSet: selects the client label and opens every GPU (NVIDIA_VISIBLE_DEVICES=all)."""
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": {CLIENT: "true"},
                                           "containers": [{"name": "agent", "image": "example.com/gpu-health-agent:1.0",
                                                           "command": ["gpu-health-agent", "--interval=30s"],
                                                           "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}}}


def _agent_pods(lab: Lab, node: str):
    return [p for p in lab.store.items("v1/pods", AGENT_NS, field_selector=f"spec.nodeName={node}")
            if not p["metadata"].get("deletionTimestamp")]


def test_operator_labels_gpu_nodes_for_third_party_clients_and_their_pods_hold_the_gpu(lab):
    wait_for("client label", lambda: lab.labels("op-h100").get(CLIENT) == "true")
    lab.store.create("v1/namespaces", {"metadata": {"name": AGENT_NS}})
    lab.store.create("apps/v1/daemonsets", agent_daemonset())
    wait_for("agent attached as a GPU client", lambda: [c for c in _clients(lab) if c.startswith(AGENT_NS + "/")])
    for key in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm"):
        lab.label("op-h100", DEPLOY + key, PAUSED)
    wait_for("only the agent is left", lambda: _clients(lab) and all(c.startswith(AGENT_NS + "/") for c in _clients(lab)))
    assert _agent_pods(lab, "op-h100")  # the operands' pause alone leaves the agent holding the GPU
    assert _set_mig(lab, True) == "pending"
    _set_mig(lab, False)
    lab.label("op-h100", CLIENT, PAUSED)  # what the MIG manager v0.15.0 does too
    wait_for("agent gone", lambda: not _agent_pods(lab, "op-h100") and not _clients(lab))
    assert _set_mig(lab, True) == "effective"
    assert lab.labels("op-h100")[CLIENT] == PAUSED  # the operator keeps a paused value
    lab.label("op-h100", CLIENT, "true")
    wait_for("agent back", lambda: _agent_pods(lab, "op-h100") and _clients(lab))


def test_the_lab_mig_manager_pauses_the_client_label_and_waits_for_the_agent(tmp_path):
    """The lab's MIG manager is mig-parted v0.15.0's (the operator v26.7.0 ships it): it pauses the
    client label too, waits for the agent's pod, applies, and sets the label back to true."""
    made = Lab(tmp_path, {"mm-h100": [("H100-80GB", 1)]})
    try:
        made.policy({"mig": {"strategy": "single"}})
        made.wait_ready()
        made.store.create("v1/namespaces", {"metadata": {"name": AGENT_NS}})
        made.store.create("apps/v1/daemonsets", agent_daemonset())
        wait_for("agent attached", lambda: [c for c in gpustate.load(made.paths["mm-h100"]).gpu_client_pods
                                            if c.startswith(AGENT_NS + "/")])
        wait_for("initial success", lambda: made.labels("mm-h100").get("nvidia.com/mig.config.state") == "success")
        made.label("mm-h100", "nvidia.com/mig.config", "all-1g.10gb")
        wait_for("applied or failed", lambda: made.labels("mm-h100").get("nvidia.com/mig.config.state") == "failed"
                 or gpustate.load(made.paths["mm-h100"]).gpus[0].gpu_instances, timeout=20)
        wait_for("done", lambda: made.labels("mm-h100").get("nvidia.com/mig.config.state") in ("success", "failed"))
        assert made.labels("mm-h100")["nvidia.com/mig.config.state"] == "success"
        assert made.labels("mm-h100")[CLIENT] == "true"
        state = gpustate.load(made.paths["mm-h100"])
        assert state.gpus[0].mig_current and len(state.gpus[0].gpu_instances) == 7 and state.reboots == 0
        wait_for("agent back", lambda: _agent_pods(made, "mm-h100"))
    finally:
        made.stop()
