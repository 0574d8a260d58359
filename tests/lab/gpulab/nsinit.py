"""In-namespace setup of one lab host, then exec sshd (run by ``unshare``, never imported by it).

``gpulab.hosts`` starts, for every simulated host::

    unshare --mount --uts --pid --fork --mount-proc --propagation private -- \
        PYTHON -I -S nsinit.py HOST_DIR/nsinit.json

so this script runs as PID 1 of private mount, UTS and PID namespaces. It:

1. refuses to do anything unless it really is in a namespace other than the lab's (mounting in the
   machine's own namespace would change the real machine);
2. sets the host name, mounts a private tmpfs on /run (sshd's privilege-separation directory and
   systemd's "booted" canary live there; the real machine's /run/systemd sockets become invisible),
3. binds the real /usr (and /etc, ...) read-only under the lab directory, makes the rest of the
   machine read-only (except /tmp, /var/tmp, /root and the lab directory), then mounts a tmpfs
   over /usr/bin, /usr/sbin and /etc holding symlinks to the real entries, except the host's own
   launchers (bind-mounted files: nvidia-smi, reboot, systemctl ...) and own directories
   (/etc/nvidia-mig-manager ...), and binds the host's boot_id file over
   /proc/sys/kernel/random/boot_id;
4. FAILS CLOSED: every path that could reboot, shut down or stop services, and every NVIDIA tool
   path, must now be the host's own launcher (same inode, same content); no name in the command
   search path may reach the real systemctl binary. Any problem: write them to the status file,
   exit 3, never exec sshd;
5. when the lab asks for it (``lock_mounts``: the machine allows user namespaces), enters a user
   namespace with identity uid/gid maps and a new mount namespace, where the mounts above are
   locked; checks that they cannot be undone, and runs the checks of 4 again;
6. exec sshd in the foreground.

Only the standard library is used, and the script does not import gpulab: it starts with ``-S``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import os
import re
import sys
from typing import Any, Dict, List, Tuple

MNT_DETACH = 0x2
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
ID_MAP = "0 0 65536\n"  # identity: files keep their owners, root stays uid 0
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_RELATIME = 0x200000
MS_STRICTATIME = 0x1000000
_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                 "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
# Kernel and memory file systems keep their flags; every other (disk) file system becomes read-only.
_VIRTUAL_FS = {"proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "cgroup", "cgroup2", "mqueue", "debugfs",
               "tracefs", "securityfs", "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs",
               "binfmt_misc", "nsfs", "efivarfs", "ramfs", "rpc_pipefs"}

EXIT_REFUSED = 3

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class SetupError(Exception):
    """A mount or identity step failed; sshd is not started."""


def _mount(source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
    result = _LIBC.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                         ctypes.c_ulong(flags), data.encode() if data else None)
    if result != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"mount {source} on {target} ({fstype or 'bind'}) failed: {os.strerror(errno)}")


def bind(source: str, target: str, recursive: bool = False) -> None:
    _mount(source, target, "", MS_BIND | (MS_REC if recursive else 0))


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts() -> List[Tuple[str, str, str]]:
    """(mount point, per-mount options, file system type) of this namespace, in mount order."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            before, _separator, after = line.partition(" - ")
            fields = before.split()
            found.append((_unescape(fields[4]), fields[5], after.split()[0]))
    return found


def _within(path: str, roots: List[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def make_read_only(roots: List[str], keep_writable: List[str]) -> None:
    """Remount read-only (this namespace's copy of) every disk mount at or under one of roots,
    except those at or under keep_writable; per-mount flags (nosuid, noexec...) are kept."""
    for point, options, fstype in mounts():
        if fstype in _VIRTUAL_FS or not _within(point, roots) or _within(point, keep_writable):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in options.split(","):
            flags |= _OPTION_FLAGS.get(option, 0)
        _mount("none", point, "", flags)


def set_hostname(name: str) -> None:
    raw = name.encode()
    if _LIBC.sethostname(raw, ctypes.c_size_t(len(raw))) != 0:
        raise SetupError(f"sethostname({name}) failed: {os.strerror(ctypes.get_errno())}")


def file_digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _same_inode(path_a: str, path_b: str) -> bool:
    try:
        stat_a, stat_b = os.stat(path_a), os.stat(path_b)
    except OSError:
        return False
    return (stat_a.st_dev, stat_a.st_ino) == (stat_b.st_dev, stat_b.st_ino)


def check_namespace(config: Dict[str, Any]) -> List[str]:
    """The process must be in namespaces other than the lab process's own ones."""
    problems = []
    for kind in ("mnt", "uts", "pid"):
        own = os.readlink(f"/proc/self/ns/{kind}")
        if own == config["lab_namespaces"][kind]:
            problems.append(f"not in a private {kind} namespace ({own} is the lab's own): refusing to mount")
    if not problems and os.getpid() != 1:
        # unshare --pid --fork --mount-proc makes this process the namespace's init: a reboot(2)
        # issued inside then ends the namespace, not the machine.
        problems.append(f"expected to be PID 1 of the host's PID namespace, got PID {os.getpid()}")
    return problems


def build_view(view: Dict[str, Any], config: Dict[str, Any]) -> None:
    """A tmpfs over a real directory, holding the entries of its manifest (gpulab.hosts.view_manifests)."""
    target = view["target"]
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m")
    for rel, kind, data in view["entries"]:
        path = os.path.join(target, rel)
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
        elif kind == "link":
            os.symlink(data, path)
        elif kind == "launcher":
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755))
            bind(os.path.join(config["bin_dir"], data), path)
            _mount("none", path, "", MS_REMOUNT | MS_BIND | MS_RDONLY)  # the host cannot alter it
        elif kind == "own_dir":
            os.makedirs(path, exist_ok=True)
            bind(os.path.join(config["own_etc"], data), path)
        elif kind == "own_file":
            with open(path, "x", encoding="utf-8") as handle:
                handle.write(config["own_files"][data])
        else:
            raise SetupError(f"{target}/{rel}: unknown view entry kind {kind!r}")
    if view["read_only"]:
        _mount("none", target, "", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def setup(config: Dict[str, Any]) -> None:
    """Mounts, in order: writable places kept writable, private /run and /var/log, read-only real
    views (before anything hides them), the rest of the machine read-only, then the host's views."""
    set_hostname(config["hostname"])
    for path in config["writable"]:
        bind(path, path, recursive=True)  # a mount of its own: unaffected by the read-only remount
    for path in config["private_tmpfs"]:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    for directory, mode in config["run_dirs"]:
        os.makedirs(directory, exist_ok=True)
        os.chmod(directory, int(mode, 8))
    aliases = []
    for source, target in config["real_binds"]:
        bind(source, target, recursive=True)
        aliases.append(target)
    make_read_only(aliases, [])
    # The host may write only to its own places: the real machine's files are read-only to it.
    make_read_only(["/"], list(config["writable"]) + aliases)
    with open(config["views_file"], encoding="utf-8") as handle:
        views = json.load(handle)
    for view in views:
        build_view(view, config)
    bind(*config["boot_id"])


def verify(config: Dict[str, Any]) -> List[str]:
    """Every check that must pass before sshd may start; returns the problems (empty: all good)."""
    problems = []
    for shim in config["shims"]:
        path, launcher = shim["path"], shim["launcher"]
        if not os.path.exists(path):
            problems.append(f"{path}: missing (expected the host's launcher {launcher})")
            continue
        if not _same_inode(path, launcher):
            problems.append(f"{path}: resolves to {os.path.realpath(path)}, not to the host's launcher {launcher}")
            continue
        if file_digest(path) != shim["sha256"]:
            problems.append(f"{path}: content differs from the generated launcher {launcher}")
    for path, expected in config["same_paths"]:
        if not _same_inode(path, expected):
            problems.append(f"{path}: is not the host's own {expected}")
    forbidden = {(dev, ino): name for dev, ino, name in config["forbidden_inodes"]}
    for directory in config["search_dirs"]:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            try:
                info = os.stat(os.path.join(directory, name))
            except OSError:
                continue
            real = forbidden.get((info.st_dev, info.st_ino))
            if real is not None:
                problems.append(f"{directory}/{name}: reaches the real machine's {real}")
    for path in config["must_be_read_only"]:
        if os.access(path, os.W_OK):
            problems.append(f"{path}: the real machine's files are writable from the host")
    for path in config["must_not_exist"]:
        if os.path.lexists(path):
            problems.append(f"{path}: the real machine's file is visible")
    return problems


def enter_user_namespace() -> None:
    """unshare(CLONE_NEWUSER | CLONE_NEWNS) with identity uid/gid maps, written by a helper
    child that stays in the lab's user namespace (a process cannot map ids outside its own
    namespace). Mounts copied into a mount namespace owned by a less privileged user namespace
    are locked: the host's root can neither unmount the launchers nor remount the real machine's
    files writable, and has no capability over the machine itself (reboot(2) is refused)."""
    parent = os.getpid()
    ready_read, ready_write = os.pipe()
    helper = os.fork()
    if helper == 0:  # pragma: no cover - runs in the forked child
        os.close(ready_write)
        os.read(ready_read, 1)
        try:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{parent}/{name}", "w", encoding="ascii") as handle:
                    handle.write(ID_MAP)
        except OSError as exc:
            print(f"gpulab nsinit: writing {name} failed: {exc}", file=sys.stderr)
            os._exit(1)
        os._exit(0)
    os.close(ready_read)
    failed = _LIBC.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNS)) != 0
    errno = ctypes.get_errno()
    os.write(ready_write, b"x")
    os.close(ready_write)
    _pid, status = os.waitpid(helper, 0)
    if failed:
        raise SetupError(f"unshare(CLONE_NEWUSER|CLONE_NEWNS) failed: {os.strerror(errno)}")
    if status != 0:
        raise SetupError("the uid/gid maps of the host's user namespace could not be written")


def check_locked(config: Dict[str, Any]) -> List[str]:
    """In the host's own user namespace, the lab's mounts must be impossible to undo: the
    launchers cannot be unmounted, the real machine's files cannot be remounted writable."""
    problems = []
    if os.readlink("/proc/self/ns/user") == config["lab_namespaces"]["user"]:
        problems.append("not in a private user namespace")
    probe = config["shims"][0]["path"]
    if _LIBC.umount2(probe.encode(), MNT_DETACH) == 0:
        problems.append(f"{probe}: the host could unmount its launcher (mounts not locked)")
    try:
        _mount("none", "/", "", MS_REMOUNT | MS_BIND)
        problems.append("/: the host could remount the real machine's files writable")
    except SetupError:
        pass
    return problems


def _write_status(path: str, status: Dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(status, handle)
    os.replace(tmp, path)


def _refuse(config: Dict[str, Any], problems: List[str]) -> int:
    _write_status(config["status_file"], {"ok": False, "pid": os.getpid(), "problems": problems})
    for problem in problems:
        print(f"gpulab nsinit {config['hostname']}: {problem}", file=sys.stderr)
    return EXIT_REFUSED


def main(argv: List[str]) -> int:
    """``nsinit.py CONFIG``: set up, check, lock (when configured), check again, exec sshd."""
    with open(argv[0], encoding="utf-8") as handle:
        config = json.load(handle)
    problems = check_namespace(config)
    if not problems:
        try:
            setup(config)
        except (SetupError, OSError) as exc:
            problems.append(str(exc))
    if not problems:
        problems = verify(config)
    if not problems and config.get("lock_mounts"):
        try:
            enter_user_namespace()
        except (SetupError, OSError) as exc:
            problems.append(str(exc))
        if not problems:
            problems = check_locked(config) or verify(config)
    if problems:
        return _refuse(config, problems)
    _write_status(config["status_file"], {"ok": True, "pid": os.getpid(), "problems": [],
                                          "locked": bool(config.get("lock_mounts"))})
    sys.stderr.flush()
    # sshd_exec is a symlink named "systemd" to sshd: the kernel takes the process name (comm) from
    # the executed file name, so /proc/1/comm reads "systemd" as on a production GPU host (Ansible's
    # service-manager detection looks at it); argv[0] stays sshd's real path for its re-exec.
    os.execv(config["sshd_exec"], config["sshd_argv"])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
