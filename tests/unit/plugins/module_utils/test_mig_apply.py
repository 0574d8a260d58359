"""Unit tests for mig_config's pure side: the whole-host plan, commands, document, files, result, checks."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_apply as ma
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_parted as mp

from test_mig_parted import doc, gpu


# ------------------------------------------------------------------ host plan and commands


def test_needs_change_mode_pending_and_layout():
    want_balanced = mp.DesiredGpu(0, True, {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1})
    off = mp.current_layout(gpu(0))
    assert ma.needs_change(off, want_balanced) == {"mode": True, "layout": True}
    pending = mp.current_layout(gpu(0, current=False, pending=True))
    assert ma.needs_change(pending, want_balanced)["mode"] is True
    done = mp.current_layout(gpu(0, current=True, instances=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]))
    assert ma.needs_change(done, want_balanced) == {"mode": False, "layout": False}
    want_off = mp.DesiredGpu(0, False, {})
    assert ma.needs_change(off, want_off) == {"mode": False, "layout": False}
    assert ma.needs_change(done, want_off) == {"mode": True, "layout": True}
    want_empty = mp.DesiredGpu(0, True, {})
    assert ma.needs_change(done, want_empty) == {"mode": False, "layout": True}


def test_busy_problems_lists_index_uuid_and_pids():
    gpus = [gpu(0, processes=[{"pid": 42}, {"pid": 7}, {"pid": 42}]), gpu(1, processes=[{"pid": 9}]), gpu(2)]
    assert ma.busy_problems(gpus, [0, 2]) == ["GPU 0 (GPU-0000) has compute processes running: PIDs 7, 42"]
    assert ma.busy_problems(gpus, []) == []


def test_plan_host_validates_every_gpu_and_reports_all_problems():
    config = mp.parse_config(doc({"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}))
    gpus = [gpu(0, "0x20B010DE"), gpu(1, "0x233010DE", name="NVIDIA H100 80GB HBM3"), gpu(2, "0x233510DE", name="NVIDIA H200")]
    with pytest.raises(mp.MigPartedError) as err:
        ma.plan_host(config, "x", gpus)
    problems = err.value.problems
    assert not any(p.startswith("GPU 1 ") for p in problems)  # valid on the H100
    assert problems[0] == ("GPU 0 (NVIDIA A100-SXM4-40GB, model A100-40GB), config x: "
                           "7 x 1g.10gb requested but A100-40GB allows at most 4 1g.10gb instances")
    assert problems[-1].startswith("GPU 2 (NVIDIA H200, model H200), config x: profile '1g.10gb' is not a MIG profile of H200")
    assert "1g.18gb" in problems[-1]  # the valid profiles are named


def test_plan_host_unknown_model_is_an_error_only_when_enabling():
    config = mp.parse_config(doc({"on": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
                                  "off": [{"devices": "all", "mig-enabled": False}]}))
    odd = gpu(0, "0x999910DE", name="NVIDIA Future")
    with pytest.raises(mp.MigPartedError, match=r"GPU 0 \(NVIDIA Future\): unknown MIG-capable GPU model"):
        ma.plan_host(config, "on", [odd])
    plan = ma.plan_host(config, "off", [odd])
    assert plan.changes == ()


def test_plan_host_changes_and_commands():
    config = mp.parse_named_configs(mp.default_configs())
    balanced = gpu(0, current=True, instances=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
    off = gpu(1)
    untouched_by_filter = gpu(2, "0x233510DE", name="NVIDIA H200")
    plan = ma.plan_host(config, "all-1g.5gb", [balanced, off, untouched_by_filter])
    assert plan.config_name == "all-1g.5gb"
    assert [c.index for c in plan.changes] == [0, 1]
    first, second = plan.changes
    assert (first.mode_change, first.layout_change, first.had_instances) == (False, True, True)
    assert ma.clear_commands(first) == [["mig", "-i", "0", "-dci"], ["mig", "-i", "0", "-dgi"]]
    assert ma.create_command(first) == ["mig", "-i", "0", "-cgi", ",".join("1g.5gb:%d" % s for s in range(7)), "-C"]
    assert (second.mode_change, second.layout_change) == (True, True)
    assert ma.clear_commands(second) == []
    assert ma.mode_command(second) == ["-i", "1", "-mig", "1"]
    assert [layout["index"] for layout in plan.after] == [0, 1, 2]
    assert plan.after[2] == plan.before[2]
    disable = ma.plan_host(config, "all-disabled", [balanced])
    change = disable.changes[0]
    assert ma.mode_command(change) == ["-i", "0", "-mig", "0"] and ma.create_command(change) == []


def test_plan_host_enabled_without_devices_creates_nothing():
    config = mp.parse_named_configs(mp.default_configs())
    plan = ma.plan_host(config, "all-enabled", [gpu(0)])
    assert ma.create_command(plan.changes[0]) == []
    assert plan.after[0]["mig_enabled"] is True and plan.after[0]["mig_profiles"] == []


def test_mig_parted_commands():
    check, apply = ma.mig_parted_commands("/tmp/c.yaml", "all-balanced", None, True)
    assert check == ["assert", "-f", "/tmp/c.yaml", "-c", "all-balanced"]
    assert apply == ["apply", "-f", "/tmp/c.yaml", "-c", "all-balanced"]
    _check, apply = ma.mig_parted_commands("/tmp/c.yaml", "x", "/etc/hooks.yaml", False)
    assert apply == ["apply", "-f", "/tmp/c.yaml", "-c", "x", "-k", "/etc/hooks.yaml", "--skip-reset"]
    assert ma.reset_command(3) == ["--gpu-reset", "-i", "3"]


# ------------------------------------------------------------------ document and files


def test_document_with_defaults_keeps_own_names_version_and_unknown_keys():
    merged = ma.document_with_defaults({"version": "v2", "mig-configs": {"all-balanced": []}, "extra": 1}, "f.yaml")
    assert merged["version"] == "v2" and merged["extra"] == 1
    assert merged["mig-configs"]["all-balanced"] == [] and "all-disabled" in merged["mig-configs"]
    assert "all-disabled" in ma.document_with_defaults({"mig-configs": None}, "config")["mig-configs"]
    with pytest.raises(mp.DocumentError, match="f.yaml: expected a mapping with 'version' and 'mig-configs'"):
        ma.document_with_defaults(["x"], "f.yaml")
    with pytest.raises(mp.DocumentError, match="config: mig-configs must be a mapping"):
        ma.document_with_defaults({"mig-configs": ["x"]}, "config")


def test_files_wanted_and_their_state():
    assert ma.wanted_files(None, None, "x", "yaml") == []
    files = ma.wanted_files("/etc/c.yaml", "/etc/o.conf", "all-balanced", "version: v1\n")
    assert files[0] == ("/etc/c.yaml", "version: v1\n")
    assert files[1][1].endswith('Environment="MIG_PARTED_SELECTED_CONFIG=all-balanced"\n')
    assert not ma.file_state("p", "t", "t", 0o644).differs
    assert ma.file_state("p", "t", "t", 0o600).differs
    assert ma.file_state("p", "t", "old", 0o644).differs
    assert ma.file_state("p", "t", None, None).differs


# ------------------------------------------------------------------ result, diff and the checks after applying


def balanced_plan():
    config = mp.parse_named_configs(mp.default_configs())
    balanced = gpu(1, pci="0x20F110DE", current=True, instances=["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
    return ma.plan_host(config, "all-balanced", [gpu(0), balanced])


def test_plan_result_and_diff():
    plan = balanced_plan()
    files = [ma.file_state("/a", "new", "old", 0o644), ma.file_state("/b", "same", "same", 0o644)]
    result = ma.plan_result(plan, files, "yaml", False, "/a", "/b")
    assert result["changed"] and result["changed_gpus"] == [0] and result["backend"] == "none"
    assert result["files"] == [{"path": "/a", "changed": True}, {"path": "/b", "changed": False}]
    assert result["config_dest_changed"] and not result["selected_config_override_changed"]
    diff = ma.plan_diff(plan, result["changed_gpus"], files)
    assert [entry["before_header"] for entry in diff] == ["MIG state (selected config all-balanced)", "/a"]
    assert [g["index"] for g in diff[0]["after"]["gpus"]] == [0] and diff[0]["after"]["gpus"][0]["mig_enabled"]
    assert diff[1] == {"before": "old", "after": "new", "before_header": "/a", "after_header": "/a"}
    unchanged = ma.plan_result(ma.plan_host(mp.parse_named_configs(mp.default_configs()), "all-disabled", [gpu(0)]),
                               [], "yaml", True, None, None)
    assert not unchanged["changed"] and unchanged["check_mode"] and unchanged["files"] == []


def test_pending_and_mismatches_after_applying():
    plan = balanced_plan()
    as_planned = list(plan.after)
    assert ma.layout_mismatches(plan, as_planned, [0], []) == []
    assert ma.pending_gpus(as_planned, [0], []) == []
    left_off = [dict(as_planned[0], mig_enabled=False, mig_pending=True, mig_devices={})] + as_planned[1:]
    assert ma.pending_gpus(left_off, [0], [5]) == [0, 5]
    assert ma.layout_mismatches(plan, left_off, [0], [0]) == []
    assert ma.layout_mismatches(plan, left_off, [0], []) == [
        "GPU 0: expected MIG on {'1g.5gb': 2, '2g.10gb': 1, '3g.20gb': 1}, found MIG off {}"]
    assert ma.reset_failed_gpus(plan, [gpu(0, current=False, pending=True), gpu(1, current=False, pending=True)]) == [0]


def test_a_config_that_matches_no_gpu_of_the_host_is_refused():
    """Issue 21 (11): an H100 device-filter on an A100 host selected nothing and was reported as ok."""
    config = mp.parse_config(doc({"h100-only": [{"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True,
                                                 "mig-devices": {"1g.10gb": 7}}]}))
    with pytest.raises(mp.MigPartedError) as info:
        ma.plan_host(config, "h100-only", [gpu(0)])
    assert "config h100-only matches no GPU of this host" in str(info.value) and "0x20B010DE" in str(info.value)
    assert ma.plan_host(config, "h100-only", [gpu(0, capable=False)]).gpus == ()  # no MIG-capable GPU: nothing to say


def test_a_mode_change_pending_away_from_the_planned_mode():
    """nvidia-mig-parted v0.15.0 asserts the current mode only (assert/mode.go) and leaves a change pending on a GPU
    already in the wanted mode; a reset or reboot would make it effective. The plan names those GPUs (their mode is
    set again with nvidia-smi, which undoes it) and, after that, any on which it is still pending."""
    config = mp.parse_named_configs(mp.default_configs())
    layout = ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]
    stray = gpu(0, current=True, pending=False, instances=layout)
    toward = gpu(1, current=False, pending=True)  # pending toward the planned mode: a reset makes it effective
    done = gpu(2, current=True, instances=layout)
    plan = ma.plan_host(config, "all-balanced", [stray, toward, done])
    assert [c.index for c in plan.changes] == [0, 1]
    assert [c.index for c in ma.stray_pending_changes(plan)] == [0]
    assert ma.stray_pending_changes(ma.plan_host(config, "all-disabled", [gpu(0, current=True, pending=False)])) == []
    assert [c.index for c in ma.stray_pending_changes(ma.plan_host(config, "all-disabled", [
        gpu(0, current=False, pending=True), gpu(1, current=False)]))] == [0]
    after = list(plan.after)
    assert ma.stray_pending_problems(plan, after) == []
    still = [dict(after[0], mig_pending=False)] + after[1:]
    assert ma.stray_pending_problems(plan, still) == [
        "GPU 0: MIG is on as planned, but a change to MIG off is still pending after nvidia-smi -i 0 -mig 1 "
        "(a GPU reset or a reboot would turn MIG off)"]


# ------------------------------------------------------------------ management CDI spec (issue 26, item 2)


def test_cdi_refresh_commands_are_the_mig_managers_two():
    assert ma.cdi_refresh_commands("/opt/ctk") == [
        ["/opt/ctk", "system", "create-device-nodes", "--control-devices"],
        ["/opt/ctk", "cdi", "generate", "--mode=management", "--vendor=management.nvidia.com", "--class=gpu",
         "--output=/var/run/cdi/management.nvidia.com-gpu.yaml"]]


@pytest.mark.parametrize("mode, exists, refresh, warns, fails", [
    ("false", True, False, False, False),
    ("false", False, False, False, False),
    ("auto", True, True, False, False),
    ("auto", False, False, True, False),
    ("true", True, True, False, False),
    ("true", False, False, False, True),
])
def test_cdi_refresh_decision(mode, exists, refresh, warns, fails):
    decision = ma.cdi_refresh_decision(mode, "/opt/ctk", exists)
    assert decision.refresh is refresh
    assert bool(decision.warning) is warns and bool(decision.error) is fails
    if fails:
        assert decision.error.startswith("cdi_refresh=true but /opt/ctk (nvidia_ctk_binary) does not exist")
    if warns:
        assert decision.warning.startswith("/opt/ctk not found: the management CDI spec is not regenerated")


def test_cdi_command_lines_name_the_binary_as_the_commands_log_does():
    assert ma.cdi_command_lines(ma.cdi_refresh_commands("/opt/bin/nvidia-ctk"))[0] == (
        "nvidia-ctk system create-device-nodes --control-devices")
