"""The operator's DaemonSet pods hold the GPUs of their host (docs/reference/specs.md §7.6).

In-process lab: a running device plugin / GFD / DCGM exporter pod attaches to the host as a
non-compute client, so a MIG mode change goes pending and a reset is refused, exactly as for a host
GPU client service; setting the operand's deploy label to ``paused-for-mig-change`` makes its pod
go and the GPU free; ``true`` brings it back.
"""

from __future__ import annotations

import pytest

from gpulab import driver, gpustate
from test_cluster_behaviour_operator import Lab, wait_for  # noqa: E402  pylint: disable=wrong-import-position

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
