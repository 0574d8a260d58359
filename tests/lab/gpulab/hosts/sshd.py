"""sshd of the lab hosts: keys, per-host configuration, the shared port, and the "answers SSH" probe."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from typing import Sequence, Tuple

from gpulab.hosts.layout import LabPaths
from gpulab.hosts.specs import LabError
from gpulab.hosts.system import SSH_KEYGEN, SSHD, which


def sshd_version() -> Tuple[int, int]:
    probe = subprocess.run([SSHD, "-V"], capture_output=True, text=True, check=False, timeout=20)  # noqa: S603
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", probe.stderr + probe.stdout)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def ensure_keys(paths: LabPaths) -> None:
    """The lab's client and host keys (made once per lab dir) and root's authorized_keys."""
    os.makedirs(paths.ssh_dir, mode=0o700, exist_ok=True)
    for key, comment in ((paths.client_key, "gpulab-client"), (paths.host_key, "gpulab-host")):
        if not os.path.exists(key):
            subprocess.run([which(SSH_KEYGEN), "-q", "-t", "ed25519", "-N", "", "-C", comment,  # noqa: S603
                            "-f", key], check=True, capture_output=True, timeout=30)
        os.chmod(key, 0o600)
    with open(paths.client_key + ".pub", encoding="ascii") as handle:
        public = handle.read()
    with open(paths.authorized_keys, "w", encoding="ascii") as handle:
        handle.write(public)
    os.chmod(paths.authorized_keys, 0o600)


def sshd_config(paths: LabPaths, name: str, address: str, port: int, version: Tuple[int, int]) -> str:
    lines = [
        f"# gpulab host {name} (generated)",
        f"ListenAddress {address}:{port}",
        f"HostKey {paths.host_key}",
        f"PidFile {paths.host_file(name, 'sshd.pid')}",
        f"AuthorizedKeysFile {paths.authorized_keys}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "MaxStartups 200:30:400",
        "MaxSessions 200",
        "LogLevel INFO",
        "Subsystem sftp internal-sftp",
    ]
    if version >= (9, 8):
        lines.append("PerSourcePenalties no")  # loopback clients share one source address
    return "\n".join(lines) + "\n"


def write_host_sshd(paths: LabPaths, name: str, address: str, port: int, version: Tuple[int, int]) -> Tuple[str, str]:
    """Write the host's sshd_config and the ``init/systemd`` link to sshd that nsinit execs (so that
    /proc/1/comm reads ``systemd`` inside the host); returns (config path, link path)."""
    init_link = paths.host_file(name, os.path.join("init", "systemd"))
    os.makedirs(os.path.dirname(init_link))
    os.symlink(SSHD, init_link)
    config_path = paths.host_file(name, "sshd_config")
    with open(config_path, "w", encoding="ascii") as handle:
        handle.write(sshd_config(paths, name, address, port, version))
    return config_path, init_link


def choose_port(addresses: Sequence[str], attempts: int = 50) -> int:
    """A TCP port free on every address (each lab gets its own, so labs can run side by side)."""
    for _attempt in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((addresses[0], 0))
            port = probe.getsockname()[1]
        if all(port_free(address, port) for address in addresses):
            return port
    raise LabError(f"no TCP port free on all of {addresses[0]}..{addresses[-1]}")


def port_free(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def ssh_banner(address: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(64).startswith(b"SSH-")
    except OSError:
        return False
