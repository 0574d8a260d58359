"""The mig role refusing bad input and failing safely, over real SSH on GPU lab hosts.

Each case runs ansible-playbook with the gpufleet.sharing.mig role against lab hosts, expects a
failed run with a clear message, and compares every host's simulated GPU state file byte for byte
before and after: a refused or failed run must not change anything.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from typing import Dict, Optional

import pytest
import yaml


from gpulab import gpustate, hosts, workload
from gpulab.hosts import ctk

LAB_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(os.path.dirname(LAB_ROOT))

pytestmark = pytest.mark.lab_hosts

SPECS = ["mig-a100=A100-40GB:1", "mig-h100=H100-80GB:2"]


def _collections_path() -> str:
    """ansible-playbook finds the collection through .build (a symlink to this tree, as `make collection`)."""
    build = os.path.join(REPO_ROOT, ".build")
    link = os.path.join(build, "ansible_collections", "gpufleet", "sharing")
    if not os.path.lexists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.join("..", "..", ".."), link)
    return build


def _ansible_playbook() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return beside if os.path.exists(beside) else (shutil.which("ansible-playbook") or "ansible-playbook")


class Lab:
    def __init__(self, lab_dir: str, info: dict):
        self.dir = lab_dir
        self.inventory = info["inventory"]
        self.state_files = {h["name"]: h["state_file"] for h in info["hosts"]}

    def snapshot(self) -> Dict[str, bytes]:
        result = {}
        for name, path in self.state_files.items():
            with open(path, "rb") as handle:
                result[name] = handle.read()
        return result

    def play(self, tmp_path, role_vars: dict, limit: Optional[str] = None, extra_inventory: Optional[str] = None,
             any_errors_fatal: bool = False, check: bool = False, verbosity: int = 0) -> subprocess.CompletedProcess:
        playbook = tmp_path / "play.yml"
        playbook.write_text(textwrap.dedent("""\
            - name: MIG role under test
              hosts: all
              gather_facts: false
              any_errors_fatal: {fatal}
              roles:
                - role: gpufleet.sharing.mig
            """).format(fatal="true" if any_errors_fatal else "false"))
        extra_vars = tmp_path / "vars.yml"
        extra_vars.write_text(yaml.safe_dump(role_vars))
        argv = [_ansible_playbook(), "-i", self.inventory, str(playbook), "-e", "@" + str(extra_vars)]
        if extra_inventory:
            argv += ["-i", extra_inventory]
        if limit:
            argv += ["--limit", limit]
        if check:
            argv += ["--check", "--diff"]
        if verbosity:
            argv.append("-" + "v" * verbosity)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=_collections_path(), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="yaml",
                   ANSIBLE_DISPLAY_FAILED_STDERR="1")
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=300)  # noqa: S603


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("miglab"))
    info = hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in SPECS],
                    first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.0.2"))
    try:
        yield Lab(lab_dir, info)
    finally:
        hosts.down(lab_dir)


def _flat(text: str) -> str:
    """Output with YAML line folding undone, so messages can be matched as one line."""
    return re.sub(r"\s+", " ", text)


def _assert_failed(result: subprocess.CompletedProcess, *fragments: str) -> str:
    output = _flat(result.stdout + result.stderr)
    assert result.returncode != 0, output[-3000:]
    for fragment in fragments:
        assert fragment in output, "%r not in output:\n%s" % (fragment, output[-4000:])
    return output


def test_profile_not_valid_for_the_model(lab, tmp_path):
    before = lab.snapshot()
    result = lab.play(tmp_path, {
        "mig_config": "wrong-model",
        "mig_configs": {"wrong-model": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}]},
    })
    output = _assert_failed(
        result,
        "GPU 0 (NVIDIA A100-SXM4-40GB, model A100-40GB), config wrong-model: profile '1g.18gb' is not a MIG profile of A100-40GB",
        "valid profiles: 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb",
        "GPU 1 (NVIDIA H100 80GB HBM3, model H100-80GB), config wrong-model: profile '1g.18gb'",
        "fatal: [mig-a100]", "fatal: [mig-h100]",
    )
    assert "Stop the GPU client services" not in output  # refused at the plan step
    assert lab.snapshot() == before


def test_layout_over_capacity(lab, tmp_path):
    before = lab.snapshot()
    result = lab.play(tmp_path, {
        "mig_config": "too-big",
        "mig_configs": {"too-big": [
            {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True,
             "mig-devices": {"3g.20gb": 2, "1g.5gb": 1}},
            {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True,
             "mig-devices": {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}},
        ]},
    })
    _assert_failed(
        result,
        "GPU 0 (NVIDIA A100-SXM4-40GB, model A100-40GB), config too-big:",
        "GPU 0 (NVIDIA H100 80GB HBM3, model H100-80GB), config too-big: the layout needs 8 compute slices but H100-80GB has 7",
    )
    assert lab.snapshot() == before


def test_busy_gpu_is_refused_with_pids(lab, tmp_path):
    state_file = lab.state_files["mig-h100"]
    pid = workload.start(state_file, 1, "train.py", 2048)
    try:
        before = lab.snapshot()
        result = lab.play(tmp_path, {"mig_config": "all-balanced"}, limit="mig-h100")
        output = _assert_failed(
            result,
            "refusing to reconfigure busy GPUs (set allow_busy=true to override)",
            "has compute processes running: PIDs %d" % pid,
        )
        gpu_uuid = gpustate.load(state_file).gpu(1).uuid
        assert "GPU 1 (%s)" % gpu_uuid in output
        assert "GPU 0 (" not in output.split("refusing to reconfigure busy GPUs")[1].split("\n")[0]
        assert lab.snapshot() == before
    finally:
        workload.stop(state_file, pid)


def test_mig_parted_apply_failure_changes_nothing(lab, tmp_path):
    hooks = tmp_path / "hooks.yaml"
    hooks.write_text("version: v1\nhooks:\n  apply-start:\n  - command: /bin/false\n    args: []\n")
    before = lab.snapshot()
    result = lab.play(tmp_path, {
        "mig_config": "all-balanced",
        "mig_parted_hooks_file": str(hooks),
        # Stopping/starting GPU clients is recorded in the state's audit log; keep this case to the GPUs.
        "mig_gpu_clients": [],
    }, limit="mig-a100")
    _assert_failed(
        result,
        "nvidia-mig-parted apply -f",
        "failed (rc=1)",
        "error running apply-start hook: exit status 1",
    )
    assert lab.snapshot() == before


def test_gpu_client_names_that_are_no_systemd_units_are_refused_first(lab, tmp_path):
    """mig_gpu_clients reach systemctl's argv: '--now' was read as an option (and dropped), so kubelet alone
    was stopped and the layout applied; now the role refuses the name before anything changes."""
    before = lab.snapshot()
    result = lab.play(tmp_path, {"mig_config": "all-balanced", "mig_gpu_clients": ["kubelet", "--now", "a b"]},
                      limit="mig-a100")
    output = _assert_failed(
        result,
        "mig_gpu_clients[1] '--now' is not a systemd unit name",
        "mig_gpu_clients[2] 'a b' is not a systemd unit name",
        "nothing was changed",
    )
    assert "Read which GPU client services are running" not in output.split("fatal: [mig-a100]")[0]
    assert lab.snapshot() == before


def test_unreachable_host_stops_the_rollout(lab, tmp_path):
    unreachable = tmp_path / "unreachable.yml"
    unreachable.write_text(yaml.safe_dump({"all": {"children": {"lab_gpu_hosts": {"hosts": {"mig-gone": {
        "ansible_host": "127.0.0.254", "ansible_port": 9, "ansible_connection": "ssh",
        "ansible_ssh_common_args": "-o ConnectTimeout=3 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
    }}}}}}))
    before = lab.snapshot()
    result = lab.play(tmp_path, {"mig_config": "all-balanced"}, extra_inventory=str(unreachable),
                      any_errors_fatal=True)
    output = _assert_failed(result, "mig-gone", "UNREACHABLE")
    assert re.search(r"mig-gone\s*:.*unreachable=1", output)
    assert lab.snapshot() == before


def test_check_mode_reports_the_plan_and_leaves_state_byte_identical(lab, tmp_path):
    before = lab.snapshot()
    result = lab.play(tmp_path, {"mig_config": "all-balanced"}, check=True)
    output = _flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-3000:]
    assert re.search(r"mig-a100\s*:.*changed=[1-9]", output)
    assert "changed: [mig-h100]" in output
    assert lab.snapshot() == before


def test_pending_mode_needs_a_reboot_only_when_allowed(lab, tmp_path):
    """Ampere with a client attached: enabling MIG stays pending and the reset is refused (docs/reference/specs.md §5).

    Without mig_reboot_allowed the role stops with a message saying so; with it, the role reboots
    the host (the lab's reboot shim), applies the layout and checks it.
    """
    state_file = lab.state_files["mig-a100"]
    pid = workload.start(state_file, 0, "inference.py", 1024)
    reboots = gpustate.load(state_file).reboots
    try:
        refused = lab.play(tmp_path, {"mig_config": "all-7g.40gb", "mig_allow_busy": True,
                                      "mig_gpu_clients": []}, limit="mig-a100")
        _assert_failed(refused, "GPU(s) 0 of mig-a100 have a pending MIG mode change that needs a reboot",
                       "Set mig_reboot_allowed=true")
        state = gpustate.load(state_file)
        assert state.reboots == reboots and state.gpu(0).mig_pending is True and state.gpu(0).mig_current is False
    finally:
        workload.stop(state_file, pid)
    workload.start(state_file, 0, "inference.py", 1024)  # still attached when the role runs again
    seen = len(gpustate.load(state_file).events)
    rebooted = lab.play(tmp_path, {"mig_config": "all-7g.40gb", "mig_allow_busy": True,
                                   "mig_gpu_clients": ["kubelet", "gpufleet-not-installed"],
                                   "mig_reboot_allowed": True, "mig_reboot_timeout": 120}, limit="mig-a100")
    output = _flat(rebooted.stdout + rebooted.stderr)
    assert rebooted.returncode == 0, output[-4000:]
    state = gpustate.load(state_file)
    assert state.reboots == reboots + 1
    assert state.services["kubelet"] == "active"  # stopped for the change, started again after the reboot
    gpu = state.gpu(0)
    assert gpu.mig_current and gpu.mig_pending and [gi.profile for gi in gpu.gpu_instances] == ["7g.40gb"]
    # The management CDI spec is regenerated once, by the apply after the reboot (the first one left the change
    # pending and the refresh due): it lists the instances that exist now.
    assert [e["action"] for e in state.events[seen:] if e["action"] in ("reboot", "create-device-nodes", "cdi-generate")] == [
        "reboot", "create-device-nodes", "cdi-generate"]
    assert ctk.spec_device_nodes(ctk.read_spec(state_file)) == ctk.device_nodes(state)
    # Leave the host as the other cases expect it: MIG off.
    restored = lab.play(tmp_path, {"mig_config": "all-disabled", "mig_gpu_clients": []}, limit="mig-a100")
    assert restored.returncode == 0, _flat(restored.stdout)[-3000:]


def test_a_mode_change_pending_away_from_the_wanted_mode_is_undone_without_a_reset(lab, tmp_path):
    """GPU 0 has the requested layout in MIG mode, with a change to MIG off pending. nvidia-mig-parted v0.15.0
    asserts the current mode only (the lab's too) and leaves that change pending; a reset or a reboot would turn
    MIG off. The role sets the mode again (nvidia-smi -mig 1), which undoes it: no reset, no reboot, and the
    next run has nothing to do."""
    state_file = lab.state_files["mig-a100"]
    applied = lab.play(tmp_path, {"mig_config": "all-balanced", "mig_gpu_clients": []}, limit="mig-a100")
    assert applied.returncode == 0, _flat(applied.stdout)[-3000:]
    with gpustate.locked(state_file) as state:
        state.gpu(0).mig_pending = False
        reboots, seen = state.reboots, len(state.events)
    try:
        result = lab.play(tmp_path, {"mig_config": "all-balanced", "mig_gpu_clients": []}, limit="mig-a100")
        output = _flat(result.stdout + result.stderr)
        assert result.returncode == 0, output[-4000:]
        state = gpustate.load(state_file)
        gpu = state.gpu(0)
        assert (gpu.mig_current, gpu.mig_pending, len(gpu.gpu_instances)) == (True, True, 4)
        assert state.reboots == reboots
        assert [e["action"] for e in state.events[seen:] if e["action"] in ("gpu-reset", "reboot")] == []
        again = lab.play(tmp_path, {"mig_config": "all-balanced", "mig_gpu_clients": []}, limit="mig-a100")
        assert re.search(r"mig-a100\s*:.*changed=0", _flat(again.stdout)), _flat(again.stdout)[-3000:]
    finally:
        restored = lab.play(tmp_path, {"mig_config": "all-disabled", "mig_gpu_clients": []}, limit="mig-a100")
        assert restored.returncode == 0, _flat(restored.stdout)[-3000:]
