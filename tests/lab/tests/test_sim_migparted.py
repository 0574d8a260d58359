"""nvidia-mig-parted emulation: schema errors, apply/assert/export, hooks, reset (docs/reference/specs.md §6, §5)."""

from __future__ import annotations

import copy
import json
import sys

import pytest
import yaml

from gpulab import gpustate, migparted, smi, workload

CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        "all-balanced": [
            {"device-filter": ["0x20B010DE", "0x20B110DE"], "devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
            {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        ],
        "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
        "mixed": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"4g.20gb": 1, "3g.20gb": 1}},
            {"devices": [1], "mig-enabled": False},
        ],
        "too-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.20gb": 2}}],
    },
}


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    return str(path)


@pytest.fixture
def node(make_host):
    return make_host([("A100-40GB", 2)])


def _bad(mutate):
    config = copy.deepcopy(CONFIG)
    mutate(config)
    return config


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c.update(version="v2"), "unknown version: v2"),
    (lambda c: c.pop("version"), "missing required field: version"),
    (lambda c: c.update(extra=1), "unexpected field: extra"),
    (lambda c: c["mig-configs"]["all-disabled"][0].update(colour="red"), "unexpected field: colour"),
    (lambda c: c["mig-configs"]["all-disabled"][0].pop("devices"), "missing required field: devices"),
    (lambda c: c["mig-configs"]["all-disabled"][0].pop("mig-enabled"), "missing required field: mig-enabled"),
    (lambda c: c["mig-configs"]["all-enabled"][0].pop("mig-devices"),
     "missing required field 'mig-devices' when 'mig-enabled' is true"),
    (lambda c: c["mig-configs"]["all-disabled"][0].update({"mig-devices": {"1g.5gb": 1}}),
     "MIG devices included when 'mig-enabled' is false"),
    (lambda c: c["mig-configs"]["all-disabled"][0].update({"device-filter": "A100"}), "invalid device-filter"),
    (lambda c: c["mig-configs"]["all-disabled"][0].update(devices="some"), "invalid format for 'devices'"),
    (lambda c: c["mig-configs"]["all-1g.5gb"][0].update({"mig-devices": {"one-g": 1}}), "invalid MIG profile name"),
])
def test_schema_errors_change_nothing(node, mutate, message):
    before = gpustate.load(node)
    ok, text = migparted.apply_config(node, _bad(mutate), "all-1g.5gb")
    assert not ok and message in text
    assert gpustate.load(node) == before


def test_schema_error_on_the_cli(node, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-enabled: true\n    mig-device: {}\n")
    rc, out, err = migparted.run(["apply", "-f", str(path), "-c", "x"], node, env={})
    assert rc == 1 and out == ""
    assert err == "FATA[0000] error parsing config file: unexpected field: mig-device\n"


def test_selected_config_must_exist(node, config_file):
    rc, _out, err = migparted.run(["apply", "-f", config_file, "-c", "nope"], node, env={})
    assert rc == 1 and "selected mig-config not present: nope" in err
    rc, _out, err = migparted.run(["apply", "-f", config_file], node, env={})
    assert rc == 1 and "selected-config" in err


def test_apply_is_idempotent_and_assert_follows(node, config_file):
    assert migparted.run(["assert", "-f", config_file, "-c", "all-balanced"], node, env={}) == (
        1, "", "ERRO[0000] Assertion failure: selected configuration not currently applied\n")
    assert migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], node, env={}) == (
        0, "MIG configuration applied successfully\n", "")
    events = gpustate.load(node).events
    assert migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], node, env={})[0] == 0
    assert gpustate.load(node).events == events  # second run changes nothing
    assert migparted.run(["assert", "-f", config_file, "-c", "all-balanced"], node, env={}) == (
        0, "Selected MIG configuration currently applied\n", "")
    _rc, out, _err = smi.run(["mig", "-lgi", "-i", "1"], node)
    assert [line.split()[3] for line in out.splitlines() if "MIG" in line] == ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]


def test_environment_variables_select_file_and_config(node, config_file):
    env = {"MIG_PARTED_CONFIG_FILE": config_file, "MIG_PARTED_SELECTED_CONFIG": "all-1g.5gb"}
    assert migparted.run(["apply"], node, env=env)[0] == 0
    assert migparted.run(["assert"], node, env=env)[0] == 0
    assert len(gpustate.load(node).gpus[0].gpu_instances) == 7


def test_device_filter_and_device_list(make_host, config_file):
    path = make_host([("A100-40GB", 1), ("H100-80GB", 1)])
    assert migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], path, env={})[0] == 0
    export = migparted.export_config(path)
    assert export["mig-configs"]["current"] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
    ]
    assert migparted.run(["apply", "-f", config_file, "-c", "mixed"], path, env={})[0] == 0
    state = gpustate.load(path)
    assert sorted((gi.profile, gi.start) for gi in state.gpus[0].gpu_instances) == [("3g.20gb", 4), ("4g.20gb", 0)]
    assert (state.gpus[1].mig_current, state.gpus[1].gpu_instances) == (False, [])


def test_unsupported_profile_for_the_model_changes_nothing(make_host, config_file):
    path = make_host([("H100-80GB", 1)])
    before = gpustate.load(path)
    rc, _out, err = migparted.run(["apply", "-f", config_file, "-c", "all-1g.5gb"], path, env={})
    assert rc == 1 and "MIG profile 1g.5gb is not supported on GPU 0" in err
    assert gpustate.load(path) == before


def test_impossible_geometry_fails_after_all_orderings(node, config_file):
    rc, _out, err = migparted.run(["apply", "-f", config_file, "-c", "too-big"], node, env={})
    assert rc == 1
    assert "error attempting multiple config orderings" in err and "Insufficient Resources" in err


def test_largest_first_builds_what_a_naive_order_cannot(make_host):
    """-cgi 19,19,14,9 fails on the driver (docs/reference/specs.md §3.2); mig-parted's largest-first order works."""
    path = make_host([("A100-40GB", 1)])
    config = {"version": "v1", "mig-configs": {"c": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}]}}
    ok, message = migparted.apply_config(path, config, "c")
    assert ok, message
    layout = sorted((gi.profile, gi.start) for gi in gpustate.load(path).gpus[0].gpu_instances)
    assert layout == [("1g.5gb", 0), ("1g.5gb", 1), ("2g.10gb", 2), ("3g.20gb", 4)]
    event = [e for e in gpustate.load(path).events if e["action"] == "apply-config"][0]
    assert event["detail"]["attempts"] == 1


def test_orderings_are_retried_after_a_failure(make_host, monkeypatch):
    """When an ordering fails, mig-parted clears and tries the next permutation (docs/reference/specs.md §3.2)."""
    path = make_host([("A100-40GB", 1)])
    real_create = migparted.driver.create_gpu_instance
    calls = {"n": 0}

    def flaky_create(gpu, profile, start=None):
        calls["n"] += 1
        if calls["n"] == 2:  # second GI of the first ordering
            raise migparted.driver.DriverError("Insufficient Resources")
        return real_create(gpu, profile, start)

    monkeypatch.setattr(migparted.driver, "create_gpu_instance", flaky_create)
    config = {"version": "v1", "mig-configs": {"c": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"4g.20gb": 1, "3g.20gb": 1}}]}}
    ok, message = migparted.apply_config(path, config, "c")
    assert ok, message
    event = [e for e in gpustate.load(path).events if e["action"] == "apply-config"][0]
    assert event["detail"]["attempts"] == 2
    assert sorted((gi.profile, gi.start) for gi in gpustate.load(path).gpus[0].gpu_instances) == [
        ("3g.20gb", 4), ("4g.20gb", 0)]


def test_mode_only_then_full_apply(node, config_file):
    rc, out, _err = migparted.run(["apply", "--mode-only", "-f", config_file, "-c", "all-balanced"], node, env={})
    assert (rc, out) == (0, "MIG configuration applied successfully\n")
    state = gpustate.load(node)
    assert [g.mig_current for g in state.gpus] == [True, True] and state.gpus[0].gpu_instances == []
    assert migparted.run(["assert", "-m", "-f", config_file, "-c", "all-balanced"], node, env={}) == (
        0, "Selected MIG mode settings from configuration currently applied\n", "")
    assert migparted.run(["assert", "-f", config_file, "-c", "all-balanced"], node, env={})[0] == 1
    assert migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], node, env={})[0] == 0


def test_reset_blocked_by_processes(node, config_file):
    workload.start(node, 0, "train.py", 1000)
    rc, out, err = migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], node, env={})
    assert rc == 1
    assert out.startswith("The following GPUs could not be reset:\n  GPU 00000000:07:00.0: In use by another client\n")
    assert "Please first kill all processes using this device" in out
    assert err == ("FATA[0000] Error applying MIG configuration with hooks: error resetting all GPUs: "
                   "exit status 255\n")
    state = gpustate.load(node)
    assert (state.gpus[0].mig_current, state.gpus[0].mig_pending) == (False, True)


def test_skip_reset_leaves_mode_pending_and_config_fails(node, config_file):
    workload.start(node, 0, "train.py", 1000)
    rc, _out, err = migparted.run(["apply", "-s", "-f", config_file, "-c", "all-balanced"], node, env={})
    assert rc == 1
    assert "unable to apply MIG config with MIG mode disabled" in err
    assert migparted.run(["apply", "-s", "-m", "-f", config_file, "-c", "all-balanced"], node, env={})[0] == 0


def test_assert_valid_config(node, config_file):
    assert migparted.run(["assert", "-a", "-f", config_file, "-c", "mixed"], node, env={}) == (
        0, "Selected MIG configuration is valid\n", "")


def _hook(log, name):
    script = ("import os, sys; open(sys.argv[1], 'a').write(' '.join([sys.argv[2], "
              "os.environ['MIG_PARTED_SELECTED_CONFIG'], os.environ['MIG_PARTED_SKIP_RESET'], "
              "os.environ.get('EXTRA', '-'), sys.argv[3]]) + chr(10))")
    return [{"command": sys.executable, "args": ["-c", script, log, name, "$HOME;x"], "envs": {"EXTRA": "e"},
             "workdir": "/"}]


def test_hooks_run_in_order_with_environment_and_no_shell(node, config_file, tmp_path):
    log = str(tmp_path / "hooks.log")
    hooks = {"version": "v1", "hooks": {name: _hook(log, name) for name in migparted.HOOK_NAMES}}
    hooks_file = tmp_path / "hooks.yaml"
    hooks_file.write_text(yaml.safe_dump(hooks))
    argv = ["apply", "-f", config_file, "-c", "all-balanced", "-k", str(hooks_file)]
    assert migparted.run(argv, node, env={})[0] == 0
    assert open(log, encoding="utf-8").read().splitlines() == [
        "apply-start all-balanced false e $HOME;x",
        "pre-apply-mode all-balanced false e $HOME;x",
        "pre-apply-config all-balanced false e $HOME;x",
        "apply-exit all-balanced false e $HOME;x",
    ]
    open(log, "w", encoding="utf-8").close()
    assert migparted.run(argv, node, env={})[0] == 0  # already applied: only start and exit hooks
    assert [line.split()[0] for line in open(log, encoding="utf-8")] == ["apply-start", "apply-exit"]


def test_apply_exit_runs_after_a_failure(node, config_file, tmp_path):
    log = str(tmp_path / "hooks.log")
    hooks_file = tmp_path / "hooks.yaml"
    hooks_file.write_text(yaml.safe_dump({"version": "v1", "hooks": {
        "apply-start": _hook(log, "apply-start"), "apply-exit": _hook(log, "apply-exit")}}))
    rc, _out, _err = migparted.run(["apply", "-f", config_file, "-c", "too-big", "-k", str(hooks_file)], node, env={})
    assert rc == 1
    assert [line.split()[0] for line in open(log, encoding="utf-8")] == ["apply-start", "apply-exit"]


def test_failing_hook_stops_apply(node, config_file, tmp_path):
    hooks_file = tmp_path / "hooks.yaml"
    hooks_file.write_text(yaml.safe_dump({"version": "v1", "hooks": {
        "pre-apply-mode": [{"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}]}}))
    before = gpustate.load(node)
    rc, _out, err = migparted.run(["apply", "-f", config_file, "-c", "all-balanced", "-k", str(hooks_file)], node, env={})
    assert rc == 1 and "error running pre-apply-mode hook: exit status 3" in err
    assert gpustate.load(node) == before


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_export_round_trip(make_host, config_file, tmp_path, fmt):
    source = make_host([("A100-40GB", 1), ("H100-80GB", 1)])
    assert migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], source, env={})[0] == 0
    rc, out, _err = migparted.run(["export", "-o", fmt], source, env={})
    assert rc == 0
    exported = tmp_path / f"exported.{fmt}"
    exported.write_text(out)
    assert (json.loads(out) if fmt == "json" else yaml.safe_load(out))["version"] == "v1"
    target = make_host([("A100-40GB", 1), ("H100-80GB", 1)])
    assert migparted.run(["apply", "-f", str(exported), "-c", "current"], target, env={})[0] == 0
    assert migparted.run(["assert", "-f", str(exported)], target, env={})[0] == 0
    assert migparted.export_config(target) == migparted.export_config(source)


def test_export_yaml_format(node, config_file):
    migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], node, env={})
    assert migparted.run(["export"], node, env={})[1] == (
        "version: v1\nmig-configs:\n  current:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n"
        "      1g.5gb: 2\n      2g.10gb: 1\n      3g.20gb: 1\n")
    assert migparted.run(["export", "-l", "saved"], node, env={"MIG_PARTED_OUTPUT_FORMAT": "json"})[1].startswith(
        '{\n  "version": "v1",\n  "mig-configs": {\n    "saved"')


def test_non_mig_gpu_handling(make_host):
    path = make_host([("A100-40GB", 1), ("A10", 1)])
    config = {"version": "v1", "mig-configs": {
        "all": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        "explicit": [{"devices": [1], "mig-enabled": True, "mig-devices": {}}]}}
    assert migparted.apply_config(path, config, "all") == (True, "MIG configuration applied successfully")
    ok, message = migparted.apply_config(path, config, "explicit")
    assert not ok and "cannot set MIG mode on non MIG-capable GPU" in message


def test_python_assert_api(node):
    assert migparted.assert_config(node, CONFIG, "all-disabled") == (True, "Selected MIG configuration currently applied")
    assert migparted.assert_config(node, CONFIG, "all-enabled", mode_only=True)[0] is False
    assert migparted.apply_config(node, CONFIG, "all-enabled", mode_only=True)[0]
    assert migparted.assert_config(node, CONFIG, "all-enabled", mode_only=True) == (
        True, "Selected MIG mode settings from configuration currently applied")


def test_hopper_reboot_needs_reapply(make_host, config_file):
    path = make_host([("H100-80GB", 1)])
    migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], path, env={})
    gpustate.reboot(path)
    assert migparted.run(["assert", "-f", config_file, "-c", "all-balanced"], path, env={})[0] == 1


def test_help_version_and_unknown_command(node):
    assert migparted.run(["--help"], node, env={})[1].startswith("NAME:\n   nvidia-mig-parted")
    assert migparted.run(["--version"], node, env={})[0] == 0
    rc, _out, err = migparted.run(["generate-config"], node, env={})
    assert rc == 1 and "unknown command: generate-config" in err
    rc, _out, err = migparted.run(["apply", "--bogus"], node, env={})
    assert rc == 1 and "flag provided but not defined: --bogus" in err


def test_debug_flag_logs_to_stderr(node, config_file):
    rc, out, err = migparted.run(["-d", "apply", "-f", config_file, "-c", "all-1g.5gb"], node, env={})
    assert rc == 0 and out == "MIG configuration applied successfully\n"
    assert "DEBU[0000] Parsing config file..." in err


def test_a_layout_change_between_two_mig_enabled_layouts_needs_no_mode_change_nor_reset(node):
    """issue 26 (2): inference-mixed -> all-1g.5gb on an A100 (the bench's change) leaves the mode
    alone, as nvidia-mig-parted v0.15.0 does: cmd/nvidia-mig-parted/apply/apply.go applies the mode
    only when AssertMigMode fails, and cmd/nvidia-mig-parted/assert/mode.go compares the current
    mode only; a reset follows only a mode change left pending (apply/mode.go). So no reset, no
    reboot, even with the operator's client pods still holding the GPU (docs/reference/specs.md §7.6)."""
    assert migparted.apply_config(node, CONFIG, "all-balanced")[0]
    with gpustate.locked(node) as state:
        state.gpu_client_pods = ["gpu-operator/nvidia-dcgm-exporter-x"]  # resets are refused from here on
        seen = len(state.events)
    ok, text = migparted.apply_config(node, CONFIG, "all-1g.5gb")
    assert ok, text
    state = gpustate.load(node)
    assert [e["action"] for e in state.events[seen:] if e["action"] in ("mig-mode", "gpu-reset")] == []
    assert all(gpu.mig_current and gpu.mig_pending and len(gpu.gpu_instances) == 7 for gpu in state.gpus)
    assert state.reboots == 0


def _stray_pending(node, layout):
    """GPU 0 in MIG mode with ``layout`` applied and a change to MIG off pending (as a `nvidia-smi -i 0 -mig 0`
    that a client kept from taking effect leaves it)."""
    assert migparted.apply_config(node, CONFIG, layout)[0]
    with gpustate.locked(node) as state:
        state.gpus[0].mig_pending = False
    state = gpustate.load(node)
    assert (state.gpus[0].mig_current, state.gpus[0].mig_pending) == (True, False)
    return state


def test_assert_and_apply_compare_the_current_mode_only(node, config_file):
    """nvidia-mig-parted v0.15.0 asserts the CURRENT mode only (cmd/nvidia-mig-parted/assert/mode.go:
    GetMigMode, pkg/mig/mode/nvml.go, returns NVML's current mode), and apply changes modes only when that
    assertion fails (cmd/nvidia-mig-parted/apply/apply.go): a GPU already in the wanted mode keeps a pending
    change away from it, no mode is set, nothing is reset, and both commands succeed."""
    seen = len(_stray_pending(node, "all-balanced").events)
    assert migparted.run(["assert", "-f", config_file, "-c", "all-balanced"], node, env={}) == (
        0, "Selected MIG configuration currently applied\n", "")
    assert migparted.run(["apply", "-f", config_file, "-c", "all-balanced"], node, env={})[0] == 0
    state = gpustate.load(node)
    assert [e["action"] for e in state.events[seen:] if e["actor"] == "nvidia-mig-parted"] == []
    assert (state.gpus[0].mig_current, state.gpus[0].mig_pending, len(state.gpus[0].gpu_instances)) == (True, False, 4)


def test_a_mode_change_sets_the_mode_of_every_selected_gpu(node):
    """When the assertion fails for one GPU, apply/mode.go (ApplyMigMode) walks every selected GPU: clears the
    MIG config of those not disabled and sets the wanted mode on each, so GPU 0's pending change is undone
    (its mode is set to enabled again) and its instances are created again; no reset flips it."""
    _stray_pending(node, "all-balanced")
    with gpustate.locked(node) as state:
        state.gpus[1].mig_current = state.gpus[1].mig_pending = False
        state.gpus[1].gpu_instances = []
    ok, text = migparted.apply_config(node, CONFIG, "all-balanced")
    assert ok, text
    state = gpustate.load(node)
    assert [(g.mig_current, g.mig_pending, len(g.gpu_instances)) for g in state.gpus] == [(True, True, 4)] * 2
    modes = [e["detail"]["gpu"] for e in state.events if e["actor"] == "nvidia-mig-parted" and e["action"] == "mig-mode"]
    assert modes[-2:] == [0, 1]
