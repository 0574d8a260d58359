"""Lab hosts over real SSH: nvidia-smi, reboot, systemctl act on the host's simulated state only.

These start real sshd processes in private namespaces (root, Debian openssh-server: `make
system-deps`). They are skipped only when this machine cannot run sshd/unshare at all, with the
reason printed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from typing import List

import pytest
from prerequisites import missing_prerequisite


import labtools
from gpulab import gpustate, hosts

LAB_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.lab_hosts

SPECS = ["gpu-h100=H100-80GB:2@h100_training", "gpu-a100=A100-40GB:1@a100_inference", "gpu-h200=H200:1"]


def _ansible(name: str) -> str:
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.exists(beside) else (shutil.which(name) or name)


def _own_boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
        return handle.read().strip()


class Lab:
    def __init__(self, lab_dir: str, info: dict):
        self.dir = lab_dir
        self.info = info
        self.hosts = {h["name"]: h for h in info["hosts"]}
        self.key = hosts.LabPaths(lab_dir).client_key

    def ssh(self, host: str, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        result = labtools.ssh(self.key, self.hosts[host], *command)
        if check and result.returncode != 0:
            raise AssertionError(f"{command} on {host} failed ({result.returncode}): {result.stderr}")
        return result

    def state(self, host: str) -> gpustate.HostState:
        return gpustate.load(self.hosts[host]["state_file"])


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("lab"))
    with labtools.lab_hosts(lab_dir, SPECS) as info:
        yield Lab(lab_dir, info)


def test_each_host_answers_nvidia_smi_from_its_own_state(lab):
    for name in lab.hosts:
        expected = [f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})" for gpu in lab.state(name).gpus]
        assert lab.ssh(name, "nvidia-smi", "-L").stdout.splitlines() == expected
        assert lab.ssh(name, "hostname").stdout.strip() == name


def test_shim_paths_are_the_hosts_launchers(lab):
    bin_dir = hosts.LabPaths(lab.dir).bin_dir("gpu-a100")
    paths = sorted(hosts.SHIM_PATHS)
    listed = lab.ssh("gpu-a100", "stat", "-L", "-c", "%d:%i", *paths).stdout.split()
    for path, seen in zip(paths, listed):
        launcher = os.stat(os.path.join(bin_dir, hosts.SHIM_PATHS[path]))
        assert seen == f"{launcher.st_dev}:{launcher.st_ino}", path
    for directory in ("/etc/nvidia-mig-manager", "/etc/systemd/system/nvidia-mig-manager.service.d"):
        assert lab.ssh("gpu-a100", "test", "-d", directory, "-a", "!", "-L", directory).returncode == 0


def test_tools_without_simulation_are_refused(lab):
    result = lab.ssh("gpu-h100", "telinit", "0", check=False)
    assert result.returncode == 1
    assert "not simulated on lab hosts" in result.stderr


def test_root_on_a_host_cannot_undo_the_lab_mounts(lab):
    if not hosts.can_lock_mounts():
        missing_prerequisite("no user namespaces here: mounts are not locked")
    with open(os.path.join(hosts.LabPaths(lab.dir).host_dir("gpu-a100"), "nsinit-status.json"),
              encoding="utf-8") as handle:
        assert json.load(handle)["locked"] is True
    assert lab.ssh("gpu-a100", "umount /usr/sbin/reboot", check=False).returncode != 0
    assert lab.ssh("gpu-a100", "umount /usr/bin", check=False).returncode != 0
    assert lab.ssh("gpu-a100", "mount -o remount,rw /", check=False).returncode != 0
    assert lab.ssh("gpu-a100", "touch /usr/lib/.gpulab-probe", check=False).returncode != 0
    assert not os.path.exists("/usr/lib/.gpulab-probe")
    assert lab.ssh("gpu-a100", "nvidia-smi -L").returncode == 0


def test_etc_writes_stay_in_the_host(lab):
    lab.ssh("gpu-h100", "echo layout > /etc/nvidia-mig-manager/config.yaml")  # one remote shell line
    own = os.path.join(hosts.LabPaths(lab.dir).host_dir("gpu-h100"), "etc", "nvidia-mig-manager", "config.yaml")
    with open(own, encoding="ascii") as handle:
        assert handle.read() == "layout\n"
    assert not os.path.exists("/etc/nvidia-mig-manager/config.yaml")
    assert lab.ssh("gpu-a100", "test", "-e", "/etc/nvidia-mig-manager/config.yaml", check=False).returncode == 1
    # The real machine's files are visible read-only.
    result = lab.ssh("gpu-h100", "echo x >> /etc/os-release", check=False)
    assert result.returncode != 0 and "Read-only file system" in result.stderr


def test_reboot_over_ssh_reboots_only_the_simulated_host(lab):
    real_boot_id = _own_boot_id()
    before = lab.state("gpu-h100")
    other_before = lab.state("gpu-a100")
    seen_before = lab.ssh("gpu-h100", "cat", "/proc/sys/kernel/random/boot_id").stdout.strip()
    assert seen_before == before.boot_id != real_boot_id
    lab.ssh("gpu-h100", "reboot")
    after = lab.state("gpu-h100")
    assert after.reboots == before.reboots + 1
    assert after.boot_id != before.boot_id
    assert lab.ssh("gpu-h100", "cat", "/proc/sys/kernel/random/boot_id").stdout.strip() == after.boot_id
    assert any(event["action"] == "reboot" for event in after.events[len(before.events):])
    assert lab.state("gpu-a100").boot_id == other_before.boot_id  # another host is untouched
    assert _own_boot_id() == real_boot_id  # the real machine did not reboot
    # What ran was the host's launcher (same inode), never the real binary.
    launcher = os.stat(os.path.join(hosts.LabPaths(lab.dir).bin_dir("gpu-h100"), "reboot"))
    real = os.stat("/sbin/reboot")
    seen = lab.ssh("gpu-h100", "stat", "-L", "-c", "%d:%i", "/sbin/reboot").stdout.strip()
    assert seen == f"{launcher.st_dev}:{launcher.st_ino}" != f"{real.st_dev}:{real.st_ino}"


def test_systemctl_over_ssh_acts_on_the_state(lab):
    assert lab.state("gpu-a100").services["kubelet"] == "active"
    lab.ssh("gpu-a100", "systemctl", "stop", "kubelet")
    assert lab.state("gpu-a100").services["kubelet"] == "inactive"
    assert lab.state("gpu-h200").services["kubelet"] == "active"
    lab.ssh("gpu-a100", "systemctl", "start", "kubelet")
    assert lab.state("gpu-a100").services["kubelet"] == "active"


def test_ansible_ping_and_groups_over_the_inventory(lab):
    inventory = os.path.join(lab.dir, "inventory.yml")
    result = subprocess.run(  # noqa: S603
        [_ansible("ansible"), "-i", inventory, "lab_gpu_hosts", "-m", "ansible.builtin.ping", "-o"],
        capture_output=True, text=True, check=False, timeout=180,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(line.split()[0] for line in result.stdout.splitlines() if "SUCCESS" in line) == sorted(lab.hosts)
    listed = subprocess.run(  # noqa: S603
        [_ansible("ansible-inventory"), "-i", inventory, "--list"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    data = json.loads(listed.stdout)
    assert data["h100_training"]["hosts"] == ["gpu-h100"]
    assert data["a100_inference"]["hosts"] == ["gpu-a100"]


def test_ansible_reboot_module_sees_a_new_boot_id(lab):
    before = lab.state("gpu-h200")
    inventory = os.path.join(lab.dir, "inventory.yml")
    result = subprocess.run(  # noqa: S603
        [_ansible("ansible"), "-i", inventory, "gpu-h200", "-m", "ansible.builtin.reboot",
         "-a", "reboot_timeout=60", "-o"],
        capture_output=True, text=True, check=False, timeout=180, env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"rebooted": true' in result.stdout
    assert lab.state("gpu-h200").reboots == before.reboots + 1


def test_status_lists_answering_hosts(lab):
    report = {h["name"]: h for h in hosts.status(lab.dir)}
    assert set(report) == set(lab.hosts)
    assert all(h["running"] and h["answers"] for h in report.values())
    assert all(h["locked"] is hosts.can_lock_mounts() for h in report.values())


# --------------------------------------------------------------------------- lifecycle

def _listening(address: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((address, port)) == 0


def _pids_with(marker: str) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_down_stops_everything_and_is_idempotent(tmp_path):
    lab_dir = str(tmp_path / "lab")
    info = hosts.up(lab_dir, [hosts.parse_host_spec("solo=A30:1")])
    entry = info["hosts"][0]
    assert _listening(entry["address"], entry["port"])
    with open(os.path.join(lab_dir, "pids.json"), encoding="utf-8") as handle:
        recorded = json.load(handle)["hosts"]["solo"]
    assert recorded["mnt_ns"] != os.readlink("/proc/self/ns/mnt")
    assert _pids_with(lab_dir)
    with pytest.raises(hosts.LabError, match="already running"):
        hosts.up(lab_dir, [hosts.parse_host_spec("solo=A30:1")])
    assert hosts.down(lab_dir) == ["tools", "solo"]
    assert not _pids_with(lab_dir)
    assert not os.path.exists(f"/proc/{recorded['pid']}")
    assert not _listening(entry["address"], entry["port"])
    with open(os.path.join(lab_dir, "pids.json"), encoding="utf-8") as handle:
        assert json.load(handle)["hosts"] == {}
    assert hosts.down(lab_dir) == []
    assert [h["running"] for h in hosts.status(lab_dir)] == [False]


def _break_views(change):
    """A config hook giving the host its own copy of the view manifests, changed by ``change``."""
    def mutate(name, config):
        with open(config["views_file"], encoding="utf-8") as handle:
            views = json.load(handle)
        change(views, config)
        config["views_file"] = os.path.join(os.path.dirname(config["status_file"]), f"views-{name}.json")
        with open(config["views_file"], "w", encoding="utf-8") as handle:
            json.dump(views, handle)
    return mutate


def _drop_view(target):
    def change(views, _config):
        views[:] = [v for v in views if v["target"] != target]
    return change


def _reboot_is_the_real_one(views, _config):
    for view in views:
        if view["target"] == "/usr/sbin":
            view["entries"] = [e for e in view["entries"] if e[0] != "reboot"] + [["reboot", "link", "/bin/systemctl"]]
            view["entries"] = [e for e in view["entries"] if e[0] != "systemctl"]


def _wrong_boot_id(_views, config):
    config["boot_id"][0] = config["status_file"] + ".other"
    with open(config["boot_id"][0], "w", encoding="ascii") as handle:
        handle.write("00000000-0000-0000-0000-000000000000\n")


@pytest.mark.parametrize("change, wrong_path", [
    (_drop_view("/usr/sbin"), "/usr/sbin/reboot"),
    (_drop_view("/usr/bin"), "/usr/bin/nvidia-smi"),
    (_drop_view("/etc"), "/etc/nvidia-mig-manager"),
    (_reboot_is_the_real_one, "/usr/sbin/reboot: resolves to"),
    (_wrong_boot_id, "/proc/sys/kernel/random/boot_id: is not the host's own"),
], ids=["no-usr-sbin", "no-usr-bin", "no-etc", "real-reboot", "foreign-boot-id"])
def test_a_wrong_mount_keeps_sshd_from_starting(tmp_path, change, wrong_path):
    lab_dir = str(tmp_path / "lab")
    with pytest.raises(hosts.LabError) as error:
        hosts.up(lab_dir, [hosts.parse_host_spec("broken=A30:1")], _mutate_config=_break_views(change))
    message = str(error.value)
    assert "broken: sshd not started" in message
    assert wrong_path in message
    assert not _pids_with(lab_dir)
    with open(os.path.join(lab_dir, "lab.json"), encoding="utf-8") as handle:
        entry = json.load(handle)["hosts"][0]
    assert not _listening(entry["address"], entry["port"])


def test_an_altered_launcher_keeps_sshd_from_starting(tmp_path):
    def mutate(_name, config):
        for shim in config["shims"]:
            if shim["path"] == "/usr/sbin/shutdown":
                shim["sha256"] = "0" * 64
    with pytest.raises(hosts.LabError, match="/usr/sbin/shutdown: content differs"):
        hosts.up(str(tmp_path / "lab"), [hosts.parse_host_spec("altered=A30:1")], _mutate_config=mutate)
    assert not _pids_with(str(tmp_path / "lab"))


def test_cluster_starts_with_the_hosts_and_stops_with_down(tmp_path):
    kubernetes = pytest.importorskip("kubernetes")
    lab_dir = str(tmp_path / "lab")
    info = hosts.up(lab_dir, [hosts.parse_host_spec("node-a=A100-80GB:1"), hosts.parse_host_spec("node-b=A30:1")],
                    cluster=True)
    try:
        cluster = info["cluster"]
        assert hosts.cluster_status(lab_dir)["running"]
        api = kubernetes.config.new_client_from_config(cluster["kubeconfig"])
        names = sorted(n.metadata.name for n in kubernetes.client.CoreV1Api(api).list_node().items)
        assert names == ["node-a", "node-b"]
        with open(os.path.join(lab_dir, "inventory.yml"), encoding="utf-8") as handle:
            assert f"gpulab_kubeconfig: {cluster['kubeconfig']}" in handle.read()
    finally:
        stopped = hosts.down(lab_dir)
    assert stopped == ["cluster", "tools", "node-a", "node-b"]
    assert not os.path.exists(f"/proc/{cluster['pid']}")
    assert hosts.cluster_status(lab_dir) is None
