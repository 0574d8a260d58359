"""gpustate persistence, the reboot/shutdown/systemctl shims and simulated workloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpulab import gpustate, shims, smi, workload
from gpulab.models import ModelError

LAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------- gpustate

def test_create_is_deterministic_and_uses_reference_identifiers(tmp_path):
    first = gpustate.create(str(tmp_path / "a.json"), "gpu-a", [("A100-80GB", 2), ("H100-80GB", 1)])
    second = gpustate.create(str(tmp_path / "b.json"), "gpu-a", [("A100-80GB", 2), ("H100-80GB", 1)])
    assert [(g.uuid, g.pci_bus_id) for g in first.gpus] == [(g.uuid, g.pci_bus_id) for g in second.gpus]
    assert [g.index for g in first.gpus] == [0, 1, 2]
    assert len({g.uuid for g in first.gpus}) == 3
    other = gpustate.new_state("gpu-b", [("A100-80GB", 1)])
    assert other.gpus[0].uuid != first.gpus[0].uuid
    ref = gpustate.new_state("h200-ref", [("H200", 1)])
    assert (ref.gpus[0].uuid, ref.gpus[0].pci_bus_id) == ("GPU-163e5d76-4ee1-1290-9652-cc41f8103e00", "00000000:00:06.0")
    custom = gpustate.new_state("x", [("H200", 2)], overrides={1: {"uuid": "GPU-custom", "pci_bus_id": "00000000:AA:00.0"}})
    assert (custom.gpus[1].uuid, custom.gpus[1].pci_bus_id) == ("GPU-custom", "00000000:AA:00.0")


def test_state_round_trip_and_contract_fields(make_host):
    path = make_host([("A30", 1)])
    state = gpustate.load(path)
    assert gpustate.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    data = json.load(open(path, encoding="utf-8"))
    for key in ("hostname", "boot_id", "reboots", "driver_version", "gpus", "services", "events"):
        assert key in data
    for key in ("index", "model", "name", "uuid", "pci_bus_id", "pci_device_id", "memory_total_mib",
                "mig_current", "mig_pending", "gpu_instances", "processes"):
        assert key in data["gpus"][0]
    assert data["events"][0]["action"] == "create"


def test_locked_saves_only_on_clean_exit(make_host):
    path = make_host([("A30", 1)])
    before = open(path, encoding="utf-8").read()
    with pytest.raises(RuntimeError):
        with gpustate.locked(path) as state:
            state.gpus[0].mig_current = True
            raise RuntimeError("boom")
    assert open(path, encoding="utf-8").read() == before
    with gpustate.locked(path) as state:
        state.record("test", "touch")
    assert gpustate.load(path).events[-1]["action"] == "touch"
    leftovers = [name for name in os.listdir(os.path.dirname(path)) if name.startswith(".")]
    assert leftovers == []  # atomic writes leave no temp files


def test_missing_state_file(tmp_path):
    with pytest.raises(gpustate.StateError, match="no GPU state file"):
        gpustate.load(str(tmp_path / "nope.json"))
    rc, _out, err = smi.run(["-L"], str(tmp_path / "nope.json"))
    assert rc == 9 and "no GPU state file" in err


def test_unknown_model(tmp_path):
    with pytest.raises(ModelError, match="unknown GPU model 'B999'"):
        gpustate.create(str(tmp_path / "x.json"), "x", [("B999", 1)])


def test_process_validation(make_host):
    path = make_host([("A100-40GB", 1)])
    pid = gpustate.add_process(path, 0, None, "a.py", 100)
    with pytest.raises(gpustate.StateError, match="already runs"):
        gpustate.add_process(path, 0, pid, "b.py", 100)
    with pytest.raises(gpustate.StateError, match="not in MIG mode"):
        gpustate.add_process(path, 0, None, "b.py", 100, gi_id=1, ci_id=0)
    with pytest.raises(gpustate.StateError, match="not enough free memory"):
        gpustate.add_process(path, 0, None, "big.py", 10 ** 6)
    with pytest.raises(gpustate.StateError, match="no GPU with index 4"):
        gpustate.add_process(path, 4, None, "b.py", 100)
    assert gpustate.remove_process(path, pid) is True
    assert gpustate.remove_process(path, pid) is False
    smi.run(["-mig", "1"], path)
    with pytest.raises(gpustate.StateError, match="must run on a MIG device"):
        gpustate.add_process(path, 0, None, "b.py", 100)


# --------------------------------------------------------------------------- reboot / shutdown

def test_reboot_shim_changes_boot_id_and_side_file(make_host):
    path = make_host([("H100-80GB", 1)])
    boot = gpustate.load(path).boot_id
    assert open(gpustate.boot_id_path(path), encoding="utf-8").read() == boot + "\n"
    assert shims.reboot_main([], path) == 0
    state = gpustate.load(path)
    assert state.boot_id != boot and state.reboots == 1
    assert open(gpustate.boot_id_path(path), encoding="utf-8").read() == state.boot_id + "\n"
    assert state.events[-1]["actor"] == "reboot"


@pytest.mark.parametrize("argv, reboots, powered", [
    (["-r", "0", "Reboot initiated by Ansible"], 1, True),
    (["-r", "now"], 1, True),
    (["-r", "+2"], 1, True),
    (["-h", "now"], 0, False),
    (["-P", "+1"], 0, False),
    (["now"], 0, False),
    (["-k", "now"], 0, True),
    (["-c"], 0, True),
])
def test_shutdown_shim(make_host, argv, reboots, powered):
    path = make_host([("A30", 1)])
    assert shims.shutdown_main(argv, path) == 0
    state = gpustate.load(path)
    assert (state.reboots, state.powered_on) == (reboots, powered)


def test_shutdown_rejects_bad_time(make_host):
    path = make_host([("A30", 1)])
    assert shims.shutdown_main(["-r", "soon"], path) == 1
    assert gpustate.load(path).reboots == 0


def test_reboot_restores_enabled_services(make_host):
    path = make_host([("A30", 1)])
    shims.systemctl_main(["stop", "kubelet"], path, env={})
    shims.systemctl_main(["disable", "--now", "nvsm"], path, env={})
    shims.systemctl_main(["reboot"], path, env={})
    state = gpustate.load(path)
    assert state.services["kubelet"] == "active" and state.services["nvsm"] == "inactive"


# --------------------------------------------------------------------------- systemctl

def _ctl(capsys, path, *argv, env=None):
    rc = shims.systemctl_main(list(argv), path, env=env or {})
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_systemctl_start_stop_is_active(make_host, capsys):
    path = make_host([("A30", 1)])
    assert _ctl(capsys, path, "is-active", "nvidia-dcgm") == (0, "active\n", "")
    assert _ctl(capsys, path, "stop", "nvidia-dcgm.service", "nvsm")[0] == 0
    assert _ctl(capsys, path, "is-active", "nvidia-dcgm", "kubelet") == (3, "inactive\nactive\n", "")
    assert _ctl(capsys, path, "start", "--no-block", "nvidia-dcgm")[0] == 0
    assert _ctl(capsys, path, "is-active", "nvidia-dcgm")[1] == "active\n"
    assert _ctl(capsys, path, "start", "nope") == (5, "", "Failed to start nope.service: Unit nope.service not found.\n")
    assert _ctl(capsys, path, "status", "nope") == (4, "", "Unit nope.service could not be found.\n")
    rc, out, _err = _ctl(capsys, path, "status", "nvsm")
    assert rc == 3 and "Active: inactive (dead)" in out
    events = gpustate.load(path).events
    assert [e["detail"]["unit"] for e in events if e["actor"] == "systemctl"] == ["nvidia-dcgm", "nvsm", "nvidia-dcgm"]


def test_systemctl_double_dash_ends_the_options(make_host, capsys):
    """systemctl parses its argv with getopt_long(3) (systemd src/systemctl/systemctl.c): `--` ends the
    options, so what follows is a unit even when it starts with '-', and options before it still count."""
    path = make_host([("A30", 1)])
    assert _ctl(capsys, path, "is-active", "--", "nvidia-dcgm", "kubelet") == (0, "active\nactive\n", "")
    assert _ctl(capsys, path, "is-active", "--", "-H") == (3, "inactive\n", "")
    assert _ctl(capsys, path, "stop", "--no-block", "--", "nvsm") == (0, "", "")
    assert _ctl(capsys, path, "stop", "--", "--now") == (5, "", "Failed to stop --now.service: Unit --now.service not found.\n")
    assert _ctl(capsys, path, "start", "--", "nvsm")[0] == 0
    assert gpustate.load(path).services["nvsm"] == "active"


def test_systemctl_enable_show_cat_with_unit_files(make_host, capsys, tmp_path):
    path = make_host([("A30", 1)])
    units = tmp_path / "units"
    (units / "nvidia-mig-manager.service.d").mkdir(parents=True)
    (units / "nvidia-mig-manager.service").write_text("[Unit]\nDescription=Configure MIG on NVIDIA GPUs\n")
    (units / "nvidia-mig-manager.service.d" / "override.conf").write_text(
        '[Service]\nEnvironment="MIG_PARTED_SELECTED_CONFIG=all-disabled"\n')
    env = {"GPULAB_SYSTEMD_UNIT_PATH": str(units)}
    assert _ctl(capsys, path, "is-enabled", "nvidia-mig-manager", env=env) == (1, "disabled\n", "")
    assert _ctl(capsys, path, "daemon-reload", env=env)[0] == 0
    assert gpustate.load(path).services["nvidia-mig-manager"] == "inactive"
    assert _ctl(capsys, path, "enable", "nvidia-mig-manager", env=env)[0] == 0
    assert _ctl(capsys, path, "is-enabled", "nvidia-mig-manager", env=env) == (0, "enabled\n", "")
    rc, out, _err = _ctl(capsys, path, "show", "-p", "ActiveState,UnitFileState", "nvidia-mig-manager", env=env)
    assert (rc, out) == (0, "ActiveState=inactive\nUnitFileState=enabled\n")
    rc, out, _err = _ctl(capsys, path, "cat", "nvidia-mig-manager", env=env)
    assert rc == 0 and "Description=Configure MIG on NVIDIA GPUs" in out and "MIG_PARTED_SELECTED_CONFIG=all-disabled" in out
    assert _ctl(capsys, path, "show", "--value", "-p", "LoadState", "ghost", env=env)[1] == "not-found\n"
    assert _ctl(capsys, path, "enable", "ghost", env=env)[0] == 1


def test_systemctl_poweroff_and_unknown_verb(make_host, capsys):
    path = make_host([("A30", 1)])
    assert _ctl(capsys, path, "frobnicate")[0] == 1
    assert _ctl(capsys, path, "poweroff")[0] == 0
    assert gpustate.load(path).powered_on is False


# --------------------------------------------------------------------------- workloads

def test_workload_cli_on_mig_device(make_host):
    path = make_host([("H100-80GB", 1)])
    smi.run(["-mig", "1"], path)
    smi.run(["mig", "-cgi", "19,19", "-C"], path)
    env = dict(os.environ, PYTHONPATH=LAB_DIR)
    started = subprocess.run([sys.executable, "-m", "gpulab.workload", "start", "--state", path, "--gpu", "0",
                              "--mig-device", "1", "--name", "train.py", "--mib", "2000"],
                             env=env, capture_output=True, text=True, check=False)
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout)
    proc = gpustate.load(path).gpus[0].processes[0]
    assert (proc.pid, proc.gi_id, proc.ci_id, proc.used_mib) == (pid, 13, 0, 2000)
    _rc, apps, _err = smi.run(["--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,noheader"], path)
    assert apps == f"{pid}, train.py, 2000 MiB, {gpustate.load(path).gpus[0].uuid}\n"
    assert workload.main(["stop", "--state", path, "--pid", str(pid)]) == 0
    assert workload.main(["stop", "--state", path, "--pid", str(pid)]) == 1
    assert workload.main(["start", "--state", path, "--gpu", "0", "--mig-device", "5", "--name", "x"]) == 1


# --------------------------------------------------------------------------- boot-time units

def test_mig_manager_reapplies_the_selected_config_at_boot(make_host, tmp_path):
    """docs/reference/specs.md §4.1 + §6.4: Hopper loses MIG mode at reboot; an enabled nvidia-mig-manager.service
    applies the config selected in its override.conf again."""
    path = make_host([("H100-80GB", 1)], enabled=["nvidia-mig-manager"])
    etc = tmp_path / "etc-mig"
    etc.mkdir()
    (etc / "config.yaml").write_text(
        "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n"
        "  balanced:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {1g.10gb: 2, 2g.20gb: 1, 3g.40gb: 1}\n")
    units = tmp_path / "units" / "nvidia-mig-manager.service.d"
    units.mkdir(parents=True)
    (units / "override.conf").write_text('[Service]\nEnvironment="MIG_PARTED_SELECTED_CONFIG=balanced"\n')
    env = {"GPULAB_MIG_MANAGER_DIR": str(etc), "GPULAB_SYSTEMD_UNIT_PATH": str(tmp_path / "units")}
    assert shims.shutdown_main(["-r", "now"], path, env=env) == 0
    state = gpustate.load(path)
    assert state.gpus[0].mig_current is True
    assert sorted(gi.profile for gi in state.gpus[0].gpu_instances) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert state.events[-1]["actor"] == "nvidia-mig-manager" and state.events[-1]["detail"]["rc"] == 0
    (units / "override.conf").write_text('[Service]\nEnvironment="MIG_PARTED_SELECTED_CONFIG=all-disabled"\n')
    shims.reboot_main([], path, env=env)
    assert gpustate.load(path).gpus[0].mig_current is False


def test_mig_manager_not_enabled_does_nothing(make_host):
    path = make_host([("A100-40GB", 1)])
    assert shims.boot_services(path, env={}) is None
    smi.run(["-mig", "1"], path)
    shims.reboot_main([], path, env={})
    assert gpustate.load(path).gpus[0].mig_current is True  # Ampere keeps the mode, nothing re-applied
