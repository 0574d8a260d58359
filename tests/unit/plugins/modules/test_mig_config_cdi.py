"""mig_config regenerating the management CDI spec after a GPU change (issue 26, item 2).

What NVIDIA's MIG manager does after a change when CDI is enabled (docs/reference/specs.md §7.7):
``nvidia-ctk system create-device-nodes --control-devices``, then ``nvidia-ctk cdi generate
--mode=management``. The mig role ran them as tasks of their own (a stat before, a loop after: three
module runs on the host); the module does it in its own run, with the role's semantics.
"""

from __future__ import annotations

import pytest

from ansible.module_utils import basic

from test_mig_config import FakeHost, run_module  # noqa: F401  pylint: disable=unused-import

SPEC = "--output=/var/run/cdi/management.nvidia.com-gpu.yaml"
CTK_COMMANDS = ["nvidia-ctk system create-device-nodes --control-devices",
                "nvidia-ctk cdi generate --mode=management --vendor=management.nvidia.com --class=gpu " + SPEC]


class CtkHost(FakeHost):
    """FakeHost with an nvidia-ctk at ``ctk`` (a real file, as the module looks for it)."""

    def __init__(self, models, ctk, fail_generate=False, **kwargs):
        super().__init__(models, **kwargs)
        self.ctk = ctk
        self.fail_generate = fail_generate
        self.ctk_calls = []

    def run_command(self, argv, **kwargs):
        if argv[0] != self.ctk:
            return super().run_command(argv, **kwargs)
        self.calls.append(list(argv))
        self.ctk_calls.append(list(argv[1:]))
        self.mutations.append("nvidia-ctk " + " ".join(argv[1:]))
        if self.fail_generate and argv[1:3] == ["cdi", "generate"]:
            return 1, "", 'level=error msg="failed to generate CDI spec: no NVIDIA devices"'
        return 0, "", ""


@pytest.fixture
def ctk(tmp_path):
    path = tmp_path / "nvidia-ctk"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def warnings(monkeypatch):
    """The module's warnings (AnsibleModule.warn), this test's only."""
    said = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: said.append(msg))
    return said


@pytest.fixture
def missing(tmp_path):
    return str(tmp_path / "nowhere" / "nvidia-ctk")


@pytest.mark.parametrize("mode", ["true", "auto", True])
def test_after_a_gpu_change_the_two_nvidia_ctk_commands_run_last(run_module, ctk, mode):
    host = CtkHost(["H100"], ctk)
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", cdi_refresh=mode, nvidia_ctk_binary=ctk)
    assert ok and result["changed"] and result["cdi_refreshed"] is True
    assert host.ctk_calls == [["system", "create-device-nodes", "--control-devices"],
                              ["cdi", "generate", "--mode=management", "--vendor=management.nvidia.com", "--class=gpu", SPEC]]
    assert host.mutations[-2:] == CTK_COMMANDS  # after the GPUs changed
    assert result["cdi_commands"] == CTK_COMMANDS
    assert result["commands"][-2:] == CTK_COMMANDS and len(result["commands"]) == 4
    assert result["cdi_refresh_due"] is False


def test_by_default_and_with_false_nvidia_ctk_is_neither_looked_for_nor_run(run_module, missing, warnings):
    for extra in ({}, {"cdi_refresh": "false", "nvidia_ctk_binary": missing}):
        host = CtkHost(["H100"], missing)
        ok, result = run_module(host, include_defaults=True, selected="all-balanced", **extra)
        assert ok and result["changed"] and host.ctk_calls == []
        assert result["cdi_refreshed"] is False and result["cdi_commands"] == []
        assert warnings == []


def test_a_required_nvidia_ctk_that_is_missing_fails_before_any_change(run_module, missing):
    host = CtkHost(["H100"], missing)
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", cdi_refresh="true",
                            nvidia_ctk_binary=missing)
    assert not ok and host.mutations == []
    assert "cdi_refresh=true but %s (nvidia_ctk_binary) does not exist" % missing in result["msg"]
    assert "nothing was changed" in result["msg"]


def test_a_missing_nvidia_ctk_in_auto_mode_is_skipped_with_a_warning(run_module, missing, warnings):
    host = CtkHost(["H100"], missing)
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", cdi_refresh="auto",
                            nvidia_ctk_binary=missing)
    assert ok and result["changed"] and host.ctk_calls == []
    assert result["cdi_refreshed"] is False and result["cdi_commands"] == []
    assert result["after"][0]["mig_devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("%s not found: the management CDI spec is not regenerated" % missing)
    assert "(cdi_refresh=auto)" in warnings[0]


def test_no_gpu_change_no_refresh_and_no_look_for_nvidia_ctk(run_module, ctk, missing):
    host = CtkHost(["H100"], ctk)
    run_module(host, include_defaults=True, selected="all-balanced")
    host.mutations.clear()
    for binary in (ctk, missing):
        ok, result = run_module(host, include_defaults=True, selected="all-balanced", cdi_refresh="true",
                                nvidia_ctk_binary=binary)
        assert ok and result["changed"] is False and host.mutations == [] and result["cdi_refreshed"] is False


def test_check_mode_runs_nothing_and_says_what_would_run(run_module, ctk):
    host = CtkHost(["H100"], ctk)
    ok, result = run_module(host, check_mode=True, include_defaults=True, selected="all-balanced", cdi_refresh="auto",
                            nvidia_ctk_binary=ctk)
    assert ok and result["changed"] and host.mutations == [] and host.ctk_calls == []
    assert result["cdi_refreshed"] is True and result["cdi_commands"] == CTK_COMMANDS and result["commands"] == []


def test_check_mode_still_refuses_a_required_nvidia_ctk_that_is_missing(run_module, missing):
    host = CtkHost(["H100"], missing)
    ok, result = run_module(host, check_mode=True, include_defaults=True, selected="all-balanced", cdi_refresh="true",
                            nvidia_ctk_binary=missing)
    assert not ok and "(nvidia_ctk_binary) does not exist" in result["msg"] and host.mutations == []


def test_a_failing_nvidia_ctk_command_fails_the_task_with_its_output(run_module, ctk):
    host = CtkHost(["H100"], ctk, fail_generate=True)
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", cdi_refresh="auto", nvidia_ctk_binary=ctk)
    assert not ok
    assert "nvidia-ctk cdi generate --mode=management" in result["msg"] and "failed (rc=1)" in result["msg"]
    assert "failed to generate CDI spec: no NVIDIA devices" in result["msg"]
    assert result["rc"] == 1 and "no NVIDIA devices" in result["stderr"]
    assert result["commands"][-2:] == CTK_COMMANDS  # what ran, the GPU change included
    assert result["after"][0]["mig_devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def test_a_pending_mode_change_defers_the_refresh_to_the_run_after_the_reboot(run_module, ctk):
    """The role's reboot path: the first run leaves the mode change pending (no refresh, cdi_refresh_due), the
    host reboots, the second run finds nothing left to change and regenerates the spec because it is due."""
    host = CtkHost(["A100"], ctk)
    host.gpus[0]["processes"] = [4242]  # Ampere with a client: the mode change stays pending (specs.md §5)
    options = dict(include_defaults=True, selected="all-enabled", allow_busy=True, gpu_reset=False,
                   cdi_refresh="auto", nvidia_ctk_binary=ctk)
    ok, first = run_module(host, **options)
    assert ok and first["reset_required"] and host.ctk_calls == []
    assert first["cdi_refreshed"] is False and first["cdi_refresh_due"] is True
    gpu = host.gpus[0]  # the reboot: the pending mode becomes effective, the client is gone
    gpu["current"], gpu["processes"] = gpu["pending"], []
    host.mutations.clear()
    ok, plain = run_module(host, **options)
    assert ok and plain["changed"] is False and host.ctk_calls == []  # nothing changes: not due without the option
    ok, second = run_module(host, cdi_refresh_due=True, **options)
    assert ok and second["changed"] is True and second["changed_gpus"] == []
    assert host.mutations == CTK_COMMANDS and second["cdi_refreshed"] is True and second["commands"] == CTK_COMMANDS


def test_a_due_refresh_is_not_run_while_a_mode_change_is_still_pending(run_module, ctk):
    host = CtkHost(["A100"], ctk)
    host.gpus[0]["processes"] = [4242]
    options = dict(include_defaults=True, selected="all-enabled", allow_busy=True, gpu_reset=False,
                   cdi_refresh="auto", nvidia_ctk_binary=ctk, cdi_refresh_due=True)
    ok, result = run_module(host, **options)
    assert ok and result["reset_required"] and host.ctk_calls == [] and result["cdi_refresh_due"] is True


def test_a_due_refresh_with_false_runs_nothing(run_module, ctk):
    host = CtkHost(["H100"], ctk)
    ok, result = run_module(host, include_defaults=True, selected="all-disabled", cdi_refresh="false",
                            nvidia_ctk_binary=ctk, cdi_refresh_due=True)
    assert ok and result["changed"] is False and host.ctk_calls == [] and result["cdi_refresh_due"] is False
