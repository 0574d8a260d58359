"""The sandbox of a lab host: what it sees of the real machine and what ``gpulab.nsinit`` must check.

Nothing is ever created in the real /usr/bin or /etc: the kernel here has no overlayfs, and a bind
mount needs an existing target, so inside its private mount namespace each host gets a tmpfs over
/usr/bin, /usr/sbin and /etc holding symlinks to the real entries plus its own files (the "views"
below, built by ``gpulab.nsinit``, which also refuses to start sshd unless every shim path is the
host's launcher: same inode, same SHA-256). The rest of the real machine is read-only inside a
host, except /tmp, /var/tmp, /root and DIR; /run and /var/log are per-host tmpfs.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from typing import Any, Dict, List, Optional, Tuple

from gpulab import launchers
from gpulab.hosts.layout import LabPaths, write_json
from gpulab.hosts.system import SSHD, can_lock_mounts

# Real paths that must be the host's launcher inside its namespace (merged-/usr Debian resolves
# /sbin and /bin to /usr/sbin and /usr/bin; older layouts get their own views).
SHIM_PATHS = {
    "/usr/bin/nvidia-smi": "nvidia-smi",
    "/usr/bin/nvidia-mig-parted": "nvidia-mig-parted",
    "/usr/bin/nvidia-ctk": "nvidia-ctk",
    "/sbin/reboot": "reboot", "/usr/sbin/reboot": "reboot",
    "/sbin/shutdown": "shutdown", "/usr/sbin/shutdown": "shutdown",
    "/sbin/halt": "halt", "/usr/sbin/halt": "halt",
    "/sbin/poweroff": "poweroff", "/usr/sbin/poweroff": "poweroff",
    "/bin/systemctl": "systemctl", "/usr/bin/systemctl": "systemctl",
}
# Names whose real binaries must never be reachable from a lab host's command search path: they
# can stop, reboot or reconfigure the real machine (or its GPUs). In a host's view they become the
# host's launcher (above) or the "refused" launcher.
DANGEROUS_NAMES = (
    "systemctl", "reboot", "shutdown", "halt", "poweroff", "telinit", "init", "runlevel", "kexec",
    "systemd", "loginctl", "busybox", "nvidia-smi", "nvidia-mig-parted", "nvidia-ctk",
)
SEARCH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
EXTRA_DANGEROUS_PATHS = ("/lib/systemd/systemd", "/usr/lib/systemd/systemd", "/sbin/init")
# /etc subdirectories a host owns (its own directories, not views of the real ones).
HOST_ETC_DIRS = ("nvidia-mig-manager", "systemd/system/nvidia-mig-manager.service.d")
# Directories created in the host's private /run (mode): sshd's privilege separation directory and
# systemd's "booted" canary (so Ansible sees a systemd host, as production GPU hosts are).
RUN_DIRS = (("/run/sshd", "0755"), ("/run/lock", "1777"), ("/run/systemd/system", "0755"),
            ("/run/user", "0755"))
# The real machine's service-manager and bus sockets must be invisible inside a host.
MUST_NOT_EXIST = ("/run/systemd/private", "/run/dbus/system_bus_socket")
# Per-host memory file systems (a host's own /run and logs).
PRIVATE_TMPFS = ("/run", "/var/log")
# Real places a host may write to (besides the lab directory and its private tmpfs): scratch space
# and root's home (Ansible's remote_tmp). Every other file of the real machine is read-only there.
WRITABLE = ("/tmp", "/var/tmp", "/root")
# Checked from inside a host: must be read-only there.
MUST_BE_READ_ONLY = ("/usr", "/usr/lib", "/var/lib", "/boot", "/opt")
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def stat_key(path: str) -> Optional[Tuple[int, int]]:
    """(st_dev, st_ino) of what ``path`` names (links followed); None when it does not exist."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def dangerous_inodes() -> Dict[Tuple[int, int], str]:
    """(st_dev, st_ino) of the real binaries no lab host may reach -> a path naming it."""
    found: Dict[Tuple[int, int], str] = {}
    candidates = [os.path.join(d, n) for d in SEARCH_DIRS for n in DANGEROUS_NAMES]
    for path in list(candidates) + list(EXTRA_DANGEROUS_PATHS):
        key = stat_key(path)
        if key is not None and key not in found:
            found[key] = f"{os.path.realpath(path)} (as {path})"
    return found


def viewed_dirs() -> List[str]:
    """Real directories replaced by a per-host view: those holding a shim path, resolved."""
    dirs: List[str] = []
    for path in SHIM_PATHS:
        real = os.path.realpath(os.path.dirname(path))
        if real not in dirs:
            dirs.append(real)
    return dirs


def top_dir(path: str) -> str:
    return "/" + path.strip("/").split("/")[0]


def real_tops() -> List[str]:
    """Top-level real directories shown read-only inside every host (under DIR/.ns/real)."""
    return sorted({top_dir(d) for d in viewed_dirs()} | {"/etc"})


@dataclasses.dataclass
class _Entry:
    name: str
    link: Optional[str]  # symlink text (copied verbatim) or None
    key: Optional[Tuple[int, int]]  # stat (followed) of the real entry


def snapshot_dir(real_dir: str) -> List[_Entry]:
    entries = []
    try:
        names = sorted(os.listdir(real_dir))
    except FileNotFoundError:
        return []
    for name in names:
        path = os.path.join(real_dir, name)
        link = os.readlink(path) if os.path.islink(path) else None
        entries.append(_Entry(name=name, link=link, key=stat_key(path)))
    return entries


def view_manifests(paths: LabPaths) -> List[Dict[str, Any]]:
    """What each host's /usr/bin, /usr/sbin (...) and /etc contain; computed once per lab and
    built by gpulab.nsinit in a tmpfs inside each host's namespace.

    Entries are ``[relative path, kind, data]`` in creation order (parents first): ``dir``;
    ``link`` (symlink text: real symlinks copied verbatim, real files and directories reached
    through the read-only view of the real directory under DIR/.ns/real); ``launcher`` (an
    empty file on which the host's launcher named ``data`` is bind-mounted; dangerous real
    binaries get the ``refused`` one); ``own_dir`` (the host's directory DIR/hosts/NAME/etc/<data>
    bind-mounted); ``own_file`` (written from the host's config).
    """
    forbidden = dangerous_inodes()
    views: List[Dict[str, Any]] = []
    for real_dir in viewed_dirs():
        alias = paths.real_mount_point(top_dir(real_dir)) + real_dir[len(top_dir(real_dir)):]
        own = {os.path.basename(p): tool for p, tool in SHIM_PATHS.items()
               if os.path.realpath(os.path.dirname(p)) == real_dir}
        entries: List[List[str]] = []
        for entry in snapshot_dir(real_dir):
            if entry.name in own:
                continue
            if entry.key is not None and entry.key in forbidden:
                entries.append([entry.name, "launcher", launchers.REFUSED])
            elif entry.link is not None:
                entries.append([entry.name, "link", entry.link])
            else:
                entries.append([entry.name, "link", os.path.join(alias, entry.name)])
        entries += [[name, "launcher", tool] for name, tool in sorted(own.items())]
        views.append({"target": real_dir, "read_only": True, "entries": entries})
    views.append({"target": "/etc", "read_only": False, "entries": _etc_entries(paths)})
    return views


def _etc_entries(paths: LabPaths) -> List[List[str]]:
    alias = paths.real_mount_point("etc")
    own_files = ("hostname", "machine-id")
    entries: List[List[str]] = []
    for real_dir, dir_names, file_names in os.walk("/etc"):
        rel = os.path.relpath(real_dir, "/etc")
        rel = "" if rel == "." else rel
        dir_names[:] = sorted(d for d in dir_names if os.path.join(rel, d) not in HOST_ETC_DIRS)
        for name in sorted(dir_names + file_names):
            rel_path = os.path.join(rel, name)
            real = os.path.join(real_dir, name)
            if rel_path in own_files:
                continue
            if os.path.islink(real):
                entries.append([rel_path, "link", os.readlink(real)])
                if name in dir_names:
                    dir_names.remove(name)  # os.walk does not follow it anyway
            elif name in dir_names:
                entries.append([rel_path, "dir", ""])
            else:
                entries.append([rel_path, "link", os.path.join(alias, rel_path)])
    for own in HOST_ETC_DIRS:
        parts = own.split("/")
        entries += [["/".join(parts[:depth]), "dir", ""] for depth in range(1, len(parts))]
        entries.append([own, "own_dir", own])
    entries += [[name, "own_file", name] for name in own_files]
    return entries


def own_namespaces() -> Dict[str, str]:
    """The lab's own namespaces (a host must run in others)."""
    return {kind: os.readlink(f"/proc/self/ns/{kind}") for kind in ("mnt", "uts", "pid", "user")}


def prepare_lab(paths: LabPaths) -> Dict[str, Any]:
    """What every host of the lab shares: the read-only mount points of the real directories, the
    views file, the lab's namespaces, the forbidden inodes and whether mounts can be locked."""
    for top in real_tops():
        os.makedirs(paths.real_mount_point(top), exist_ok=True)
    shared = {
        "namespaces": own_namespaces(),
        "lock_mounts": can_lock_mounts(),
        "forbidden": dangerous_inodes(),
        "real_binds": [[top, paths.real_mount_point(top)] for top in real_tops()],
        "views_file": paths.views_json,
    }
    write_json(paths.views_json, view_manifests(paths))
    return shared


def make_own_etc_dirs(paths: LabPaths, name: str) -> None:
    for own in HOST_ETC_DIRS:
        os.makedirs(os.path.join(paths.view_dir(name, "/etc"), own))


def nsinit_config(paths: LabPaths, name: str, digests: Dict[str, str], sshd: Tuple[str, str],
                  shared: Dict[str, Any]) -> Dict[str, Any]:
    """The configuration ``gpulab.nsinit`` mounts and checks for host ``name`` before it execs sshd
    (``sshd``: the host's sshd_config and the link it execs; ``digests``: SHA-256 per launcher)."""
    config_path, init_link = sshd
    bin_dir = paths.bin_dir(name)
    own_etc = paths.view_dir(name, "/etc")
    shims = [{"path": p, "launcher": os.path.join(bin_dir, tool), "sha256": digests[tool]}
             for p, tool in SHIM_PATHS.items()]
    same_paths = [[os.path.join("/etc", d), os.path.join(own_etc, d)] for d in HOST_ETC_DIRS]
    same_paths.append([BOOT_ID, paths.boot_id_file(name)])
    return {
        "hostname": name,
        "status_file": paths.host_file(name, "nsinit-status.json"),
        "lab_namespaces": shared["namespaces"],
        "writable": [p for p in WRITABLE if os.path.isdir(p)] + [paths.root],
        "private_tmpfs": [p for p in PRIVATE_TMPFS if os.path.isdir(p)],
        "must_be_read_only": [p for p in MUST_BE_READ_ONLY if os.path.isdir(p)],
        "run_dirs": [list(item) for item in RUN_DIRS],
        "real_binds": shared["real_binds"],
        "views_file": shared["views_file"],
        "bin_dir": bin_dir,
        "own_etc": own_etc,
        "own_files": {"hostname": name + "\n", "machine-id": uuid.uuid4().hex + "\n"},
        "boot_id": [paths.boot_id_file(name), BOOT_ID],
        "shims": shims,
        "same_paths": same_paths,
        "forbidden_inodes": [[dev, ino, label] for (dev, ino), label in shared["forbidden"].items()],
        "search_dirs": list(SEARCH_DIRS),
        "must_not_exist": list(MUST_NOT_EXIST),
        "lock_mounts": shared["lock_mounts"],
        "sshd_exec": init_link,
        "sshd_argv": [SSHD, "-D", "-e", "-f", config_path],
    }
