"""Unit tests for the mig_config module against a small scripted nvidia-smi double.

The double keeps a per-GPU state, prints the outputs the parsers read and applies the mutating
commands (mode, -dci/-dgi, -cgi with explicit starts, --gpu-reset). It is deliberately simple;
the real end-to-end behaviour is covered over SSH against the GPU lab (tests/lab/tests and the
molecule scenario extensions/molecule/mig).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import plan_layout
from ansible_collections.gpufleet.sharing.plugins.modules import mig_config

SMI = "/usr/bin/nvidia-smi"
MIG_PARTED = "/usr/bin/nvidia-mig-parted"
PROFILES = {  # model -> profile -> (memory slices, allowed starts)
    "H100": {"1g.10gb": (1, range(7)), "1g.20gb": (2, (0, 2, 4, 6)), "2g.20gb": (2, (0, 2, 4)),
             "3g.40gb": (4, (0, 4)), "4g.40gb": (4, (0,)), "7g.80gb": (8, (0,))},
    "A100": {"1g.5gb": (1, range(7)), "2g.10gb": (2, (0, 2, 4)), "3g.20gb": (4, (0, 4)), "7g.40gb": (8, (0,))},
}
NAMES = {"H100": ("NVIDIA H100 80GB HBM3", "0x233010DE"), "A100": ("NVIDIA A100-SXM4-40GB", "0x20B010DE")}


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


class FakeHost:
    def __init__(self, models, mig_parted=False, reset_supported=True):
        self.gpus = []
        for index, model in enumerate(models):
            self.gpus.append({"index": index, "model": model, "current": False, "pending": False,
                              "instances": [], "processes": []})
        self.mig_parted = mig_parted
        self.reset_supported = reset_supported
        self.calls = []
        self.mutations = []
        self.parted_assert_rc = 1
        self.parted_apply_failure = None

    # -- rendering
    @staticmethod
    def mode(enabled):
        return "Enabled" if enabled else "Disabled"

    def query(self, gpus):
        lines = []
        for gpu in gpus:
            name, pci = NAMES[gpu["model"]]
            lines.append("%d, %s, GPU-%04d, 00000000:%02X:00.0, %s, 81559, %s, %s, 580.1" % (
                gpu["index"], name, gpu["index"], 7 + gpu["index"], pci, self.mode(gpu["current"]), self.mode(gpu["pending"])))
        return "\n".join(lines) + "\n"

    def summary(self):
        lines = ["+---+", "| MIG devices: |", "| GPU  GI  CI  MIG |"]
        device = 0
        for gpu in self.gpus:
            for gi_id, (profile, start, size) in enumerate(gpu["instances"], 1):
                lines.append("|  %d  %d  0  %d  |  1MiB / 1MiB | 1 0 | 1 0 0 0 0 |" % (gpu["index"], gi_id, device))
                device += 1
        lines += ["", "| Processes: |", "|  GPU   GI   CI   PID   Type   Process name   GPU Memory |", "|====|"]
        for gpu in self.gpus:
            for pid in gpu["processes"]:
                gi = "1" if gpu["current"] else "N/A"
                lines.append("|  %d  %s  %s  %d  C  python3  100MiB |" % (gpu["index"], gi, gi if gi == "N/A" else "0", pid))
        return "\n".join(lines) + "\n"

    def list_gpus(self):
        lines = []
        for gpu in self.gpus:
            lines.append("GPU %d: %s (UUID: GPU-%04d)" % (gpu["index"], NAMES[gpu["model"]][0], gpu["index"]))
            for device, (profile, _s, _z) in enumerate(gpu["instances"]):
                lines.append("  MIG %s Device %d: (UUID: MIG-%d-%d)" % (profile, device, gpu["index"], device))
        return "\n".join(lines) + "\n"

    def lgi(self):
        rows = ["| GPU instances: |", "| GPU Name Profile Instance Placement |", "|====|"]
        for gpu in self.gpus:
            for gi_id, (profile, start, size) in enumerate(gpu["instances"], 1):
                rows.append("|  %d  MIG %s  9  %d  %d:%d |" % (gpu["index"], profile, gi_id, start, size))
        return "\n".join(rows) + "\n" if len(rows) > 3 else "No GPU instances found.\n"

    def lci(self):
        rows = ["| Compute instances: |", "|====|"]
        for gpu in self.gpus:
            for gi_id, (profile, start, size) in enumerate(gpu["instances"], 1):
                rows.append("|  %d  %d  MIG %s  0  0  0:%d |" % (gpu["index"], gi_id, profile, size))
        return "\n".join(rows) + "\n" if len(rows) > 2 else "No compute instances found.\n"

    # -- command dispatch
    def run_command(self, argv, **_kwargs):
        self.calls.append(list(argv))
        binary, args = argv[0], list(argv[1:])
        if binary == MIG_PARTED:
            return self.run_mig_parted(args)
        assert binary == SMI, argv
        if args and args[0].startswith("--query-gpu=index,name"):
            return 0, self.query(self.gpus), ""
        if args == []:
            return 0, self.summary(), ""
        if args == ["-L"]:
            return 0, self.list_gpus(), ""
        if args == ["mig", "-lgi"]:
            return 0, self.lgi(), ""
        if args == ["mig", "-lci"]:
            return 0, self.lci(), ""
        if len(args) >= 3 and args[0] == "-i" and args[2].startswith("--query-gpu=index,mig"):
            gpu = self.gpus[int(args[1])]
            return 0, "%d, %s, %s\n" % (gpu["index"], "Enabled" if gpu["current"] else "Disabled",
                                        "Enabled" if gpu["pending"] else "Disabled"), ""
        self.mutations.append(" ".join(args))
        if len(args) == 4 and args[0] == "-i" and args[2] == "-mig":
            gpu = self.gpus[int(args[1])]
            gpu["pending"] = args[3] == "1"
            if gpu["model"] == "H100" or not gpu["processes"]:
                gpu["current"] = gpu["pending"]
            return 0, "Enabled MIG Mode for GPU\nAll done.\n", ""
        if args[:1] == ["--gpu-reset"]:
            gpu = self.gpus[int(args[2])]
            if not self.reset_supported:
                return 3, "", "Resetting GPU is not supported."
            gpu["current"] = gpu["pending"]
            return 0, "GPU reset\n", ""
        if args[0] == "mig" and args[3] in ("-dci", "-dgi"):
            if args[3] == "-dgi":
                self.gpus[int(args[2])]["instances"] = []
            return 0, "", ""
        if args[0] == "mig" and args[3] == "-cgi":
            gpu = self.gpus[int(args[2])]
            assert args[5] == "-C"
            for entry in args[4].split(","):
                profile, start = entry.split(":")
                size, starts = PROFILES[gpu["model"]][profile]
                assert int(start) in starts
                gpu["instances"].append((profile, int(start), size))
            return 0, "Successfully created\n", ""
        raise AssertionError("unexpected nvidia-smi call %r" % argv)

    def run_mig_parted(self, args):
        if args[0] == "assert":
            return self.parted_assert_rc, "", "ERRO[0000] Assertion failure: selected configuration not currently applied"
        self.mutations.append("nvidia-mig-parted " + " ".join(args))
        if args[0] == "apply":
            with open(args[args.index("-f") + 1]) as handle:
                self.applied_config = handle.read()
            if self.parted_apply_failure == "reset":
                for gpu in self.gpus:
                    gpu["pending"] = True
                return 1, "The following GPUs could not be reset:\n", "FATA[0001] error resetting all GPUs: exit status 255"
            if self.parted_apply_failure == "hook":
                return 1, "", "FATA[0000] error running apply-start hook: exit status 1"
            return 0, "MIG configuration applied successfully\n", ""
        raise AssertionError(args)


@pytest.fixture
def run_module(monkeypatch, tmp_path):
    def exit_json(self, **kwargs):
        kwargs.setdefault("changed", False)
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)

    def runner(host, check_mode=False, diff=False, **params):
        monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
        monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: host.run_command(argv, **kw))
        monkeypatch.setattr(basic.AnsibleModule, "tmpdir", str(tmp_path), raising=False)

        def get_bin_path(self, name, required=False, opt_dirs=None):
            if name == "nvidia-smi":
                return SMI
            if name == "nvidia-mig-parted" and host.mig_parted:
                return MIG_PARTED
            if required:
                fail_json(self, msg="Failed to find required executable %s" % name)
            return None

        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
        args = dict(params)
        args["_ansible_check_mode"] = check_mode
        args["_ansible_diff"] = diff
        with patch_module_args(args):
            with pytest.raises((ExitJson, FailJson)) as outcome:
                mig_config.main()
        return outcome.type is ExitJson, outcome.value.args[0]

    return runner


def test_noop_runs_no_mutating_command(run_module):
    host = FakeHost(["H100"])
    ok, result = run_module(host, include_defaults=True, selected="all-disabled")
    assert ok and result["changed"] is False and host.mutations == []
    assert result["changed_gpus"] == [] and result["backend"] == "none"
    assert "all-balanced:" in result["config_yaml"]


def test_check_mode_reports_plan_and_diff_without_mutating(run_module):
    host = FakeHost(["H100", "A100"])
    ok, result = run_module(host, check_mode=True, diff=True, include_defaults=True, selected="all-balanced")
    assert ok and result["changed"] is True and host.mutations == []
    assert result["changed_gpus"] == [0, 1]
    assert result["after"][0]["mig_devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert result["after"][1]["mig_profiles"] == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    assert result["diff"][0]["before"]["gpus"][0]["mig_enabled"] is False
    assert result["diff"][0]["after"]["gpus"][0]["mig_enabled"] is True


def test_apply_with_nvidia_smi_uses_planner_order_and_is_idempotent(run_module):
    host = FakeHost(["H100"])
    ok, result = run_module(host, include_defaults=True, selected="all-balanced")
    assert ok and result["changed"] and result["backend"] == "nvidia-smi"
    order = plan_layout(resolve_model("H100-80GB"), {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}).creation_order
    assert host.mutations == ["-i 0 -mig 1", "mig -i 0 -cgi %s -C" % ",".join(order)]
    assert order[0] == "3g.40gb:4" or order[0].startswith("3g.40gb:")  # largest first
    assert result["commands"] == ["nvidia-smi " + m for m in host.mutations]
    assert result["after"][0]["mig_devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert result["reset_required"] is False and result["reboot_required"] is False
    host.mutations.clear()
    ok, again = run_module(host, include_defaults=True, selected="all-balanced")
    assert ok and again["changed"] is False and host.mutations == []


def test_layout_change_destroys_cis_then_gis_then_creates(run_module):
    host = FakeHost(["H100"])
    run_module(host, include_defaults=True, selected="all-balanced")
    host.mutations.clear()
    ok, result = run_module(host, include_defaults=True, selected="all-3g.40gb")
    assert ok and result["changed"]
    assert host.mutations == ["mig -i 0 -dci", "mig -i 0 -dgi", "mig -i 0 -cgi 3g.40gb:0,3g.40gb:4 -C"]
    host.mutations.clear()
    ok, result = run_module(host, include_defaults=True, selected="all-disabled")
    assert host.mutations == ["mig -i 0 -dci", "mig -i 0 -dgi", "-i 0 -mig 0"]
    assert result["after"][0] == dict(result["before"][0], mig_enabled=False, mig_pending=False, mig_devices={}, mig_profiles=[])


def test_invalid_profile_fails_before_any_change_naming_gpu_model_and_valid_profiles(run_module):
    host = FakeHost(["H100", "A100"])
    config = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}}
    ok, result = run_module(host, config=config, selected="x")
    assert not ok and host.mutations == []
    assert "GPU 0 (NVIDIA H100 80GB HBM3, model H100-80GB)" in result["msg"]
    assert "1g.5gb" in result["msg"] and "1g.10gb" in result["msg"]  # the valid ones are listed
    assert "GPU 1" not in result["msg"]  # valid on the A100-40GB


def test_over_capacity_fails_with_planner_reason(run_module):
    host = FakeHost(["A100"])
    item = {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2, "1g.5gb": 1}}
    config = {"version": "v1", "mig-configs": {"x": [item]}}
    ok, result = run_module(host, config=config, selected="x")
    assert not ok and host.mutations == []
    assert result["problems"] and result["problems"][0].startswith("GPU 0 (NVIDIA A100-SXM4-40GB, model A100-40GB), config x:")


def test_compute_instance_profile_fails_before_any_change_with_the_reason(run_module):
    host = FakeHost(["H100"])
    item = {"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 2}}
    ok, result = run_module(host, config={"version": "v1", "mig-configs": {"x": [item]}}, selected="x")
    assert not ok and host.mutations == []
    assert "'1c.3g.40gb' is a compute-instance profile" in result["msg"]
    assert "Use the GPU-instance profile (3g.40gb) instead" in result["msg"]


def test_schema_error_fails_with_mig_parted_message(run_module):
    host = FakeHost(["A100"])
    ok, result = run_module(host, config={"version": "v2", "mig-configs": {}}, selected="x")
    assert not ok and "unknown version: v2" in result["msg"] and host.calls == []


def test_unknown_selected_name_lists_available(run_module):
    host = FakeHost(["A100"])
    ok, result = run_module(host, include_defaults=True, selected="all-9g.1tb")
    assert not ok and "selected mig-config not present: all-9g.1tb" in result["msg"]


def test_busy_gpu_is_refused_with_pids_unless_allowed(run_module):
    host = FakeHost(["H100", "H100"])
    host.gpus[1]["processes"] = [4242, 4243]
    ok, result = run_module(host, include_defaults=True, selected="all-7g.80gb")
    assert not ok and host.mutations == []
    assert "GPU 1 (GPU-0001) has compute processes running: PIDs 4242, 4243" in result["msg"]
    assert "GPU 0" not in result["msg"]
    ok, result = run_module(host, include_defaults=True, selected="all-7g.80gb", allow_busy=True)
    assert ok and result["changed_gpus"] == [0, 1]


def test_busy_gpu_not_touched_by_the_config_is_fine(run_module):
    host = FakeHost(["H100", "H100"])
    host.gpus[1]["processes"] = [4242]
    config = {"version": "v1", "mig-configs": {"x": [{"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}}
    ok, result = run_module(host, config=config, selected="x")
    assert ok and result["changed_gpus"] == [0]


def test_pending_mode_without_reset_reports_reset_required(run_module):
    host = FakeHost(["A100"])
    host.gpus[0]["processes"] = [99]  # keeps the Ampere mode change pending
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", allow_busy=True, gpu_reset=False)
    assert ok and result["reset_required"] and not result["reboot_required"]
    assert result["pending_gpus"] == [0]
    assert not any("-cgi" in m for m in host.mutations)


def test_pending_mode_with_failed_reset_reports_reboot_required(run_module):
    host = FakeHost(["A100"], reset_supported=False)
    host.gpus[0]["processes"] = [99]
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", allow_busy=True)
    assert ok and result["reset_required"] and result["reboot_required"]
    assert "--gpu-reset -i 0" in host.mutations


def test_pending_mode_reset_then_create(run_module):
    host = FakeHost(["A100"])
    host.gpus[0]["processes"] = [99]
    ok, result = run_module(host, include_defaults=True, selected="all-7g.40gb", allow_busy=True)
    assert ok and not result["reset_required"]
    assert host.mutations == ["-i 0 -mig 1", "--gpu-reset -i 0", "mig -i 0 -cgi 7g.40gb:0 -C"]


def test_mig_parted_backend_asserts_then_applies_rendered_config(run_module):
    host = FakeHost(["H100"], mig_parted=True)
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", hooks_file="/etc/hooks.yaml")
    # The double does not change the GPUs on apply, so the module must notice the mismatch.
    assert not ok and "MIG layout not as requested after applying" in result["msg"]
    assert host.mutations[0].startswith("nvidia-mig-parted apply -f ")
    assert host.mutations[0].endswith("-c all-balanced -k /etc/hooks.yaml")
    assert "all-balanced:" in host.applied_config


def test_mig_parted_assert_success_skips_apply(run_module):
    host = FakeHost(["H100"], mig_parted=True)
    host.parted_assert_rc = 0
    ok, result = run_module(host, include_defaults=True, selected="all-disabled")
    assert ok and host.mutations == []
    host.gpus[0]["current"] = host.gpus[0]["pending"] = True
    ok, result = run_module(host, include_defaults=True, selected="all-disabled")
    assert not ok  # mig-parted claims success, the GPU disagrees: reported, not hidden
    assert host.mutations == []


def test_mig_parted_leaves_a_change_pending_away_from_the_wanted_mode_which_is_undone(run_module):
    """nvidia-mig-parted v0.15.0 asserts the current mode only: on a GPU in MIG mode with a change to MIG off
    pending its assert succeeds and it changes nothing (the lab's migparted/plan.py does the same). The module
    sets the mode again with nvidia-smi, which undoes the pending change without a reset, and reports no
    pending GPU (a reset or reboot would have turned MIG off)."""
    host = FakeHost(["A100"], mig_parted=True)
    host.parted_assert_rc = 0
    host.gpus[0].update(current=True, pending=False)
    host.reset_supported = False  # no reset helps here: only undoing the change does
    ok, result = run_module(host, include_defaults=True, selected="all-enabled")
    assert ok, result
    assert result["changed"] and result["changed_gpus"] == [0]
    assert (result["pending_gpus"], result["reset_required"], result["reboot_required"]) == ([], False, False)
    assert host.mutations == ["-i 0 -mig 1"]
    assert (result["pending_gpus"], result["reset_required"], result["reboot_required"]) == ([], False, False)
    assert (host.gpus[0]["current"], host.gpus[0]["pending"]) == (True, True)
    ok, result = run_module(host, include_defaults=True, selected="all-enabled")
    assert ok and not result["changed"] and host.mutations == ["-i 0 -mig 1"]


def test_config_file_yaml_and_json(run_module, tmp_path):
    host = FakeHost(["H100"])
    path = tmp_path / "config.yaml"
    path.write_text("version: v1\nmig-configs:\n  mine:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n      7g.80gb: 1\n")
    ok, result = run_module(host, config_file=str(path), check_mode=True)
    assert ok and result["selected"] == "mine" and result["changed"]
    path.write_text(json.dumps({"version": "v1", "mig-configs": {"mine": [{"devices": "all", "mig-enabled": False}]}}))
    ok, result = run_module(host, config_file=str(path))
    assert ok and not result["changed"]
    ok, result = run_module(host, config_file=str(tmp_path / "missing.yaml"))
    assert not ok and "cannot read config_file" in result["msg"]


def test_config_dest_and_override_written_after_apply_and_idempotent(run_module, tmp_path):
    host = FakeHost(["H100"])
    dest = tmp_path / "etc" / "nvidia-mig-manager" / "config.yaml"
    override = tmp_path / "etc" / "override.d" / "override.conf"
    params = dict(include_defaults=True, selected="all-balanced", config_dest=str(dest), selected_config_override=str(override))
    ok, result = run_module(host, check_mode=True, diff=True, **params)
    assert ok and result["changed"] and not dest.exists() and not override.exists()
    assert [f["changed"] for f in result["files"]] == [True, True]
    assert result["diff"][2]["after"].endswith('Environment="MIG_PARTED_SELECTED_CONFIG=all-balanced"\n')
    ok, result = run_module(host, **params)
    assert ok and result["changed"] and dest.read_text() == result["config_yaml"]
    assert 'MIG_PARTED_SELECTED_CONFIG=all-balanced"' in override.read_text()
    assert oct(dest.stat().st_mode & 0o777) == "0o644"
    host.mutations.clear()
    ok, result = run_module(host, **params)
    assert ok and not result["changed"] and [f["changed"] for f in result["files"]] == [False, False]
    # Only the selection changes: the files are rewritten, no GPU command runs.
    override.write_text("tampered\n")
    ok, result = run_module(host, **params)
    assert ok and result["changed"] and result["changed_gpus"] == [] and host.mutations == []
    assert [f["changed"] for f in result["files"]] == [False, True]
    assert result["selected_config_override_changed"] and not result["config_dest_changed"]
    assert "MIG_PARTED_SELECTED_CONFIG=all-balanced" in override.read_text()


def test_files_not_written_when_refused(run_module, tmp_path):
    host = FakeHost(["H100"])
    host.gpus[0]["processes"] = [7]
    dest = tmp_path / "config.yaml"
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", config_dest=str(dest))
    assert not ok and not dest.exists()


def test_module_documentation_renders_with_ansible_doc():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(repo, ".build"), ANSIBLE_NOCOLOR="1")
    rendered = subprocess.run([ansible_doc, "-t", "module", "gpufleet.sharing.mig_config"], capture_output=True,
                              text=True, check=False, env=env, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    assert "gpufleet.sharing.mig_config" in rendered.stdout and "allow_busy" in rendered.stdout
    as_json = subprocess.run([ansible_doc, "--json", "-t", "module", "gpufleet.sharing.mig_config"], capture_output=True,
                             text=True, check=False, env=env, timeout=120)
    doc = json.loads(as_json.stdout)["gpufleet.sharing.mig_config"]
    spec = set(doc["doc"]["options"])
    assert spec == {"config", "config_file", "selected", "include_defaults", "allow_busy", "backend", "gpu_reset",
                    "hooks_file", "config_dest", "selected_config_override", "plan", "cdi_refresh", "nvidia_ctk_binary",
                    "cdi_refresh_due"}
    assert set(doc["doc"]["attributes"]) == {"check_mode", "diff_mode", "platform"}
    assert {"before", "after", "reset_required", "reboot_required", "changed_gpus", "cdi_refreshed", "cdi_commands",
            "cdi_refresh_due"} <= set(doc["return"])


def test_mig_parted_reset_failure_is_a_required_reboot(run_module):
    host = FakeHost(["A100"], mig_parted=True)
    host.parted_apply_failure = "reset"
    ok, result = run_module(host, include_defaults=True, selected="all-balanced")
    assert ok and result["reboot_required"] and result["reset_required"] and result["pending_gpus"] == [0]
    assert result["backend"] == "nvidia-mig-parted"


def test_mig_parted_other_failure_fails_with_its_message(run_module):
    host = FakeHost(["A100"], mig_parted=True)
    host.parted_apply_failure = "hook"
    ok, result = run_module(host, include_defaults=True, selected="all-balanced")
    assert not ok and "error running apply-start hook: exit status 1" in result["msg"]
    assert result["msg"].startswith("nvidia-mig-parted apply -f ")
    assert result["after"][0]["mig_enabled"] is False


@pytest.mark.skipif(shutil.which("nvidia-mig-parted") is not None, reason="nvidia-mig-parted is installed here")
def test_required_mig_parted_missing_fails_before_anything_runs(run_module):
    host = FakeHost(["H100"])
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", backend="nvidia-mig-parted")
    assert not ok and result["msg"].startswith('Failed to find required executable "nvidia-mig-parted"')
    assert host.mutations == []
