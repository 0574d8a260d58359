"""MIG mode changes, reset and reboot: Ampere vs Hopper, idle vs busy (docs/reference/specs.md §4.1, §5)."""

from __future__ import annotations

import pytest

from gpulab import gpustate, shims, smi, workload

BUSY_TAIL = ("is currently being used by one or more other processes (e.g. CUDA application or a monitoring "
             "application such as another instance of nvidia-smi). Please first kill all processes using the "
             "device and retry the command or reboot the system to make MIG mode effective.")


def _modes(path):
    gpu = gpustate.load(path).gpus[0]
    return gpu.mig_current, gpu.mig_pending


@pytest.mark.parametrize("model", ["A100-40GB", "A30", "H100-80GB", "H200"])
def test_enable_on_idle_gpu_is_effective(make_host, model):
    path = make_host([(model, 1)])
    rc, out, _err = smi.run(["-i", "0", "-mig", "1"], path)
    assert rc == 0
    assert out == "Enabled MIG Mode for GPU 00000000:07:00.0\nAll done.\n"
    assert _modes(path) == (True, True)
    rc, out, _err = smi.run(["-mig", "0"], path)
    assert out == "Disabled MIG Mode for GPU 00000000:07:00.0\nAll done.\n"
    assert _modes(path) == (False, False)


def test_ampere_mode_persists_across_reboot(make_host):
    path = make_host([("A100-80GB", 1)])
    smi.run(["-mig", "1"], path)
    smi.run(["mig", "-cgi", "9", "-C"], path)
    gpustate.reboot(path)
    state = gpustate.load(path)
    assert (state.gpus[0].mig_current, state.gpus[0].mig_pending) == (True, True)
    assert state.gpus[0].gpu_instances == []  # instances never survive a reboot
    assert state.reboots == 1


@pytest.mark.parametrize("model", ["H100-80GB", "H100-NVL", "H200"])
def test_hopper_mode_is_lost_at_reboot(make_host, model):
    path = make_host([(model, 1)])
    smi.run(["-mig", "1"], path)
    assert _modes(path) == (True, True)
    gpustate.reboot(path)
    assert _modes(path) == (False, False)


@pytest.mark.parametrize("model", ["A100-40GB", "H100-80GB"])
def test_busy_gpu_goes_pending_with_warning(make_host, model):
    path = make_host([(model, 1)])
    workload.start(path, 0, "train.py", 1000)
    events = len(gpustate.load(path).events)
    rc, out, _err = smi.run(["-mig", "1"], path)
    assert rc == 0
    assert out == ("Warning: MIG mode is in pending enable state for GPU 00000000:07:00.0:In use by another client\n"
                   f"00000000:07:00.0 {BUSY_TAIL}\nAll done.\n")
    assert _modes(path) == (False, True)
    assert len(gpustate.load(path).events) == events + 1
    _rc, query, _err = smi.run(["--query-gpu=mig.mode.current,mig.mode.pending", "--format=csv,noheader"], path)
    assert query == "Disabled, Enabled\n"


def test_pending_enable_becomes_effective_at_reboot_on_ampere_only(make_host):
    ampere = make_host([("A100-40GB", 1)])
    hopper = make_host([("H100-80GB", 1)])
    for path in (ampere, hopper):
        workload.start(path, 0, "train.py", 1000)
        smi.run(["-mig", "1"], path)
        gpustate.reboot(path)
    assert _modes(ampere) == (True, True)
    assert _modes(hopper) == (False, False)
    assert gpustate.load(ampere).gpus[0].processes == []


def test_reset_refused_while_processes_run_then_applies_pending(make_host):
    path = make_host([("A100-40GB", 1)])
    pid = workload.start(path, 0, "train.py", 1000)
    smi.run(["-mig", "1"], path)
    before = gpustate.load(path)
    rc, out, _err = smi.run(["-r"], path)
    assert rc == 255
    assert out.startswith("The following GPUs could not be reset:\n  GPU 00000000:07:00.0: In use by another client\n\n"
                          "1 device is currently being used by one or more other processes")
    assert gpustate.load(path).events == before.events
    workload.stop(path, pid)
    rc, out, _err = smi.run(["-i", "0", "-r"], path)
    assert (rc, out) == (0, "GPU 00000000:07:00.0 was successfully reset.\nAll done.\n")
    assert _modes(path) == (True, True)


def test_gpu_client_services_keep_the_gpu_busy(make_host):
    """docs/reference/specs.md §5: on a DGX, nvsm/dcgm hold the GPU until stopped (opt-in per host)."""
    path = make_host([("A100-40GB", 1)])
    with gpustate.locked(path) as state:
        state.gpu_client_services = ["nvsm", "nvidia-dcgm"]
    smi.run(["-mig", "1"], path)
    assert _modes(path) == (False, True)
    shims.systemctl_main(["stop", "nvsm", "nvidia-dcgm"], path, env={})
    smi.run(["-mig", "1"], path)
    assert _modes(path) == (True, True)


def test_non_mig_gpu_mode_change_is_a_warning(make_host):
    path = make_host([("A10", 1)])
    rc, out, _err = smi.run(["-mig", "1"], path)
    assert rc == 0
    assert out == ("Unable to enable MIG Mode for GPU 00000000:07:00.0: Not Supported\n"
                   "Treating as warning and moving on.\nAll done.\n")


def test_mode_change_with_instances_is_refused(make_host):
    path = make_host([("H100-80GB", 1)])
    smi.run(["-mig", "1"], path)
    smi.run(["mig", "-cgi", "19"], path)
    _rc, out, _err = smi.run(["-mig", "0"], path)
    assert "Unable to disable MIG Mode for GPU 00000000:07:00.0: In use by another client" in out
    assert _modes(path) == (True, True)


def test_invalid_mig_value(make_host):
    path = make_host([("H100-80GB", 1)])
    rc, _out, _err = smi.run(["-mig", "2"], path)
    assert rc == 2
    assert _modes(path) == (False, False)


def test_power_off_makes_smi_fail(make_host):
    path = make_host([("H100-80GB", 1)])
    assert shims.shutdown_main(["-h", "now"], path) == 0
    rc, out, _err = smi.run(["-L"], path)
    assert rc == 9 and "couldn't communicate with the NVIDIA driver" in out
    gpustate.reboot(path)
    assert smi.run(["-L"], path)[0] == 0


def test_repeated_mode_command_is_audited_as_unchanged(make_host):
    path = make_host([("A30", 1)])
    smi.run(["-mig", "1"], path)
    smi.run(["-mig", "1"], path)
    details = [e["detail"] for e in gpustate.load(path).events if e["action"] == "mig-mode"]
    assert [d["changed"] for d in details] == [True, False]
