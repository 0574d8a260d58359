"""Lab hosts: one real sshd per simulated GPU host, each in its own mount/UTS/PID namespaces.

A lab directory (DIR) holds everything a lab writes (nothing outside it is written)::

    DIR/lab.json               what was started (hosts, addresses, port); read by ``status``
    DIR/pids.json              the processes started, with their namespaces; ``down`` kills only these
    DIR/inventory.yml          Ansible inventory (group lab_gpu_hosts + the groups given per host)
    DIR/ssh/                   client key (id_ed25519), host key, authorized_keys
    DIR/.ns/real/{usr,etc}     empty mount points: inside a host they show the real dirs read-only
    DIR/.ns/views.json         what a host's /usr/bin, /usr/sbin and /etc contain (view_manifests)
    DIR/hosts/NAME/state.json  the host's GPU state (gpulab.gpustate); state.json.boot_id is
                               bind-mounted over /proc/sys/kernel/random/boot_id
    DIR/hosts/NAME/bin/        launchers (gpulab.launchers), bind-mounted at the real tool paths
    DIR/hosts/NAME/etc/nvidia-mig-manager/, etc/systemd/system/nvidia-mig-manager.service.d/
                               the host's own directories (bind-mounted at the same /etc paths)
    DIR/hosts/NAME/sshd_config, sshd.log, nsinit.json, nsinit-status.json

Nothing is ever created in the real /usr/bin or /etc: the kernel here has no overlayfs, and a bind
mount needs an existing target, so inside its private mount namespace each host gets a tmpfs over
/usr/bin, /usr/sbin and /etc holding symlinks to the real entries plus its own files (built by
``gpulab.nsinit``, which also refuses to start sshd unless every shim path is the host's
launcher). The rest of the real machine is read-only inside a host, except /tmp, /var/tmp, /root
and DIR; /run and /var/log are per-host tmpfs; the PID namespace keeps the host's processes (and
its `kill`s, and a reboot(2) call) away from the real machine's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from gpulab import gpustate, launchers
from gpulab.models import available_models

SSHD = "/usr/sbin/sshd"
UNSHARE = "unshare"
SSH_KEYGEN = "ssh-keygen"
NSINIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nsinit.py")

GROUP = "lab_gpu_hosts"
MAX_HOSTS = 253  # 127.0.0.2 ... 127.0.0.254
MAX_GPUS = 16

# Real paths that must be the host's launcher inside its namespace (merged-/usr Debian resolves
# /sbin and /bin to /usr/sbin and /usr/bin; older layouts get their own views).
SHIM_PATHS = {
    "/usr/bin/nvidia-smi": "nvidia-smi",
    "/usr/bin/nvidia-mig-parted": "nvidia-mig-parted",
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
    "systemd", "loginctl", "busybox", "nvidia-smi", "nvidia-mig-parted",
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

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_GROUP_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_HOST_SPEC = re.compile(r"^(?P<name>[^=]+)=(?P<model>[^:]+):(?P<gpus>[^@]+)(?:@(?P<groups>.+))?$")

# Popen objects of hosts started by this process (so that ``down`` in the same process reaps them).
_CHILDREN: Dict[int, subprocess.Popen] = {}


class LabError(Exception):
    """The lab could not do what was asked; the message says what and where."""


@dataclasses.dataclass(frozen=True)
class HostSpec:
    name: str
    model: str
    gpus: int
    groups: Tuple[str, ...] = ()


def parse_host_spec(text: str) -> HostSpec:
    """``NAME=MODEL:GPUS[@group[,group...]]``, e.g. ``gpu-a=H100-80GB:8@h100_training``."""
    match = _HOST_SPEC.match(text.strip())
    if not match:
        raise LabError(f"--host {text!r}: expected NAME=MODEL:GPUS[@group[,group]], e.g. gpu-a=H100-80GB:8")
    name, model, gpus_text = match.group("name"), match.group("model"), match.group("gpus")
    if not _NAME.match(name):
        raise LabError(f"--host {text!r}: host name {name!r} must be lower-case letters, digits and '-' "
                       "(a DNS label, as Kubernetes node names are)")
    models = available_models()
    if model not in models:
        raise LabError(f"--host {text!r}: unknown GPU model {model!r}; known: {', '.join(models)}")
    if not gpus_text.isdigit() or not 1 <= int(gpus_text) <= MAX_GPUS:
        raise LabError(f"--host {text!r}: GPU count {gpus_text!r} must be an integer from 1 to {MAX_GPUS}")
    groups = tuple(g for g in (match.group("groups") or "").split(",") if g)
    for group in groups:
        if not _GROUP_NAME.match(group) or group == GROUP:
            raise LabError(f"--host {text!r}: group {group!r} must match [a-z_][a-z0-9_]* "
                           f"(and every host is already in {GROUP})")
    return HostSpec(name=name, model=model, gpus=int(gpus_text), groups=groups)


def validate_specs(specs: Sequence[HostSpec]) -> None:
    if not specs:
        raise LabError("no hosts: give at least one --host NAME=MODEL:GPUS")
    if len(specs) > MAX_HOSTS:
        raise LabError(f"{len(specs)} hosts: the lab has addresses for at most {MAX_HOSTS}")
    seen: Set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise LabError(f"host {spec.name!r} is given twice")
        seen.add(spec.name)
    groups = {g for spec in specs for g in spec.groups}
    clash = groups & seen
    if clash:
        raise LabError(f"group names equal to host names confuse Ansible: {', '.join(sorted(clash))}")


# --------------------------------------------------------------------------- paths of a lab dir

@dataclasses.dataclass(frozen=True)
class LabPaths:
    root: str

    @property
    def lab_json(self) -> str:
        return os.path.join(self.root, "lab.json")

    @property
    def pids_json(self) -> str:
        return os.path.join(self.root, "pids.json")

    @property
    def inventory(self) -> str:
        return os.path.join(self.root, "inventory.yml")

    @property
    def ssh_dir(self) -> str:
        return os.path.join(self.root, "ssh")

    @property
    def client_key(self) -> str:
        return os.path.join(self.ssh_dir, "id_ed25519")

    @property
    def host_key(self) -> str:
        return os.path.join(self.ssh_dir, "ssh_host_ed25519_key")

    @property
    def authorized_keys(self) -> str:
        return os.path.join(self.ssh_dir, "authorized_keys")

    def real_mount_point(self, top: str) -> str:
        """Where the real /usr (top="usr") or /etc is visible, read-only, inside every host."""
        return os.path.join(self.root, ".ns", "real", top.strip("/"))

    def host_dir(self, name: str) -> str:
        return os.path.join(self.root, "hosts", name)

    def state_file(self, name: str) -> str:
        return os.path.join(self.host_dir(name), "state.json")

    def boot_id_file(self, name: str) -> str:
        """gpustate keeps it next to the state file and rewrites it (in place) on every reboot."""
        return gpustate.boot_id_path(self.state_file(name))

    def bin_dir(self, name: str) -> str:
        return os.path.join(self.host_dir(name), "bin")

    def view_dir(self, name: str, real_dir: str) -> str:
        return os.path.join(self.host_dir(name), real_dir.strip("/"))


# --------------------------------------------------------------------------- host views

def _stat_key(path: str) -> Optional[Tuple[int, int]]:
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
        key = _stat_key(path)
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


def _top(path: str) -> str:
    return "/" + path.strip("/").split("/")[0]


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
        entries.append(_Entry(name=name, link=link, key=_stat_key(path)))
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
        alias = paths.real_mount_point(_top(real_dir)) + real_dir[len(_top(real_dir)):]
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


# --------------------------------------------------------------------------- prerequisites

def _which(program: str) -> Optional[str]:
    return shutil.which(program, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


def prerequisites_problem() -> Optional[str]:
    """Why lab hosts cannot run on this machine (None when they can)."""
    if os.geteuid() != 0:
        return "lab hosts need root (mount namespaces, bind mounts, sshd)"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is missing: install Debian's openssh-server (make system-deps)"
    for program in (UNSHARE, SSH_KEYGEN, "ssh"):
        if _which(program) is None:
            return f"{program} is missing (util-linux / openssh-client)"
    probe = subprocess.run(  # noqa: S603 - argv list
        [_which(UNSHARE) or UNSHARE, "--mount", "--uts", "--pid", "--fork", "--mount-proc",
         "--propagation", "private", "--", "/bin/true"],
        capture_output=True, text=True, check=False, timeout=20,
    )
    if probe.returncode != 0:
        return f"unshare cannot create mount/UTS/PID namespaces here: {probe.stderr.strip()}"
    return None


def can_lock_mounts() -> bool:
    """Whether this machine allows a user namespace (used to lock the mounts inside hosts)."""
    probe = subprocess.run(  # noqa: S603 - argv list
        [_which(UNSHARE) or UNSHARE, "--user", "--map-root-user", "--mount", "--", "/bin/true"],
        capture_output=True, check=False, timeout=20,
    )
    return probe.returncode == 0


def python_for_hosts() -> str:
    """The interpreter Ansible uses on lab hosts: the system python3 when usable, else the lab's."""
    candidate = "/usr/bin/python3"
    if os.access(candidate, os.X_OK):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info >= (3, 8))"],  # noqa: S603
                               capture_output=True, text=True, check=False, timeout=20)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return sys.executable


def _sshd_version() -> Tuple[int, int]:
    probe = subprocess.run([SSHD, "-V"], capture_output=True, text=True, check=False, timeout=20)  # noqa: S603
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", probe.stderr + probe.stdout)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def ensure_keys(paths: LabPaths) -> None:
    os.makedirs(paths.ssh_dir, mode=0o700, exist_ok=True)
    for key, comment in ((paths.client_key, "gpulab-client"), (paths.host_key, "gpulab-host")):
        if not os.path.exists(key):
            subprocess.run([_which(SSH_KEYGEN) or SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment,  # noqa: S603
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
        f"PidFile {os.path.join(paths.host_dir(name), 'sshd.pid')}",
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


def choose_port(addresses: Sequence[str], attempts: int = 50) -> int:
    """A TCP port free on every address (each lab gets its own, so labs can run side by side)."""
    for _attempt in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((addresses[0], 0))
            port = probe.getsockname()[1]
        if all(_port_free(address, port) for address in addresses):
            return port
    raise LabError(f"no TCP port free on all of {addresses[0]}..{addresses[-1]}")


def _port_free(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def host_address(first: str, offset: int) -> str:
    parts = [int(p) for p in first.split(".")]
    if len(parts) != 4 or parts[0] != 127:
        raise LabError(f"--first-address {first}: lab hosts use loopback addresses only (127.x.y.z)")
    value = (parts[1] << 16 | parts[2] << 8 | parts[3]) + offset
    if value > 0xFFFFFE:
        raise LabError(f"--first-address {first}: not enough loopback addresses")
    return f"127.{value >> 16 & 255}.{value >> 8 & 255}.{value & 255}"


def ssh_banner(address: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(64).startswith(b"SSH-")
    except OSError:
        return False


# --------------------------------------------------------------------------- pids.json

def _read_json(path: str, default: Any) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default


def _write_json(path: str, data: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def _own_namespaces() -> Dict[str, str]:
    return {kind: os.readlink(f"/proc/self/ns/{kind}") for kind in ("mnt", "uts", "pid", "user")}


def _proc_ns(pid: int) -> Optional[str]:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:  # gone, zombie or not ours to see
        return None


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _mounts_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children(pid: int) -> List[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def _tree_namespaces(pid: int) -> List[str]:
    """Mount namespaces of a process and its descendants (unshare -> sshd -> sessions)."""
    found: List[str] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        namespace = _proc_ns(current)
        if namespace is not None and namespace not in found:
            found.append(namespace)
        pending += _children(current)
    return found


def _host_processes(record: Dict[str, Any]) -> Dict[int, Callable[[int], bool]]:
    """The processes of one host, each with the check that it still is one of them: in one of
    the host's mount namespaces AND seeing this lab's marker mount. Before the namespaces were
    recorded (a half-started host), those of the recorded PID (identified by its command line)
    and its descendants. Never a process in the lab's own mount namespace, never this process."""
    own = os.readlink("/proc/self/ns/mnt")
    namespaces = set(record.get("mnt_ns") or [])
    starting: Dict[int, Callable[[int], bool]] = {}
    if not namespaces:
        pid = int(record["pid"])

        def is_starting(candidate: int) -> bool:
            return record["marker_arg"] in _cmdline(candidate)
        if _is_zombie(pid) or not is_starting(pid):
            return {}
        namespaces = set(_tree_namespaces(pid))
        starting[pid] = is_starting  # may not have unshared yet
    namespaces.discard(own)
    marker = f" {record['marker_mount']} "

    def in_host(candidate: int) -> bool:
        return _proc_ns(candidate) in namespaces and marker in _mounts_of(candidate)
    victims = dict(starting)
    if not namespaces:
        return victims
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        if _proc_ns(pid) in namespaces and not _is_zombie(pid) and in_host(pid):
            victims[pid] = in_host
    return victims


def _reap(pid: int, keep: bool = False) -> None:
    """Collect the exit status of a process this process started (no zombie is left behind)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=0.05)
        if child.returncode is not None and not keep:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError):  # a child of this process started elsewhere (cluster)
        os.waitpid(pid, os.WNOHANG)


def _stop_processes(pids: Dict[int, Callable[[int], bool]], grace: float = 5.0) -> List[int]:
    """SIGTERM, wait, SIGKILL what is left; returns the PIDs that survived (should be none).

    ``pids`` maps each PID to a check that it is still the process we mean: it is asked again
    before every signal, so a PID reused by another process meanwhile is never signalled."""
    def running() -> List[int]:
        return [p for p in pids if not _is_zombie(p)]

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 3.0)):
        for pid in running():
            if pids[pid](pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + wait
        remaining = running()
        while remaining and time.monotonic() < deadline:
            time.sleep(0.05)
            for pid in remaining:
                _reap(pid, keep=True)
            remaining = running()
        if not remaining:
            break
    for pid in pids:
        _reap(pid)
    return [p for p in running() if pids[p](p)]


def _cluster_check(paths: LabPaths) -> Callable[[int], bool]:
    return lambda pid: "gpulab.cluster" in _cmdline(pid) and paths.root in _cmdline(pid)


def _stop_cluster(paths: LabPaths, record: Dict[str, Any]) -> List[int]:
    return _stop_processes({int(record["pid"]): _cluster_check(paths)})


# --------------------------------------------------------------------------- up / down / status

@dataclasses.dataclass
class Host:
    spec: HostSpec
    address: str
    port: int
    state_file: str
    host_dir: str

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.spec.name, "model": self.spec.model, "gpus": self.spec.gpus,
                "groups": list(self.spec.groups), "address": self.address, "port": self.port,
                "state_file": self.state_file, "host_dir": self.host_dir}


def _prepare_host(paths: LabPaths, spec: HostSpec, address: str, port: int, shared: Dict[str, Any]) -> Dict[str, Any]:
    """Write everything one host needs and return its nsinit config."""
    name = spec.name
    host_dir = paths.host_dir(name)
    if os.path.lexists(host_dir):
        if os.path.ismount(host_dir):
            raise LabError(f"{host_dir} is a mount point: refusing to delete it")
        shutil.rmtree(host_dir)
    os.makedirs(host_dir)
    state = gpustate.create(paths.state_file(name), name, [(spec.model, spec.gpus)])
    launchers.write_boot_id(paths.boot_id_file(name), state.boot_id)
    bin_dir = paths.bin_dir(name)
    digests = launchers.write_launchers(bin_dir, name, paths.state_file(name), paths.boot_id_file(name))
    for own in HOST_ETC_DIRS:
        os.makedirs(os.path.join(paths.view_dir(name, "/etc"), own))
    init_link = os.path.join(host_dir, "init", "systemd")
    os.makedirs(os.path.dirname(init_link))
    os.symlink(SSHD, init_link)
    config_path = os.path.join(host_dir, "sshd_config")
    with open(config_path, "w", encoding="ascii") as handle:
        handle.write(sshd_config(paths, name, address, port, shared["sshd_version"]))
    shims = [{"path": p, "launcher": os.path.join(bin_dir, tool), "sha256": digests[tool]}
             for p, tool in SHIM_PATHS.items()]
    same_paths = [[os.path.join("/etc", d), os.path.join(paths.view_dir(name, "/etc"), d)] for d in HOST_ETC_DIRS]
    same_paths.append(["/proc/sys/kernel/random/boot_id", paths.boot_id_file(name)])
    return {
        "hostname": name,
        "status_file": os.path.join(host_dir, "nsinit-status.json"),
        "lab_namespaces": shared["namespaces"],
        "writable": [p for p in WRITABLE if os.path.isdir(p)] + [paths.root],
        "private_tmpfs": [p for p in PRIVATE_TMPFS if os.path.isdir(p)],
        "must_be_read_only": [p for p in MUST_BE_READ_ONLY if os.path.isdir(p)],
        "run_dirs": [list(item) for item in RUN_DIRS],
        "real_binds": shared["real_binds"],
        "views_file": shared["views_file"],
        "bin_dir": bin_dir,
        "own_etc": paths.view_dir(name, "/etc"),
        "own_files": {"hostname": name + "\n", "machine-id": uuid.uuid4().hex + "\n"},
        "boot_id": [paths.boot_id_file(name), "/proc/sys/kernel/random/boot_id"],
        "shims": shims,
        "same_paths": same_paths,
        "forbidden_inodes": [[dev, ino, label] for (dev, ino), label in shared["forbidden"].items()],
        "search_dirs": list(SEARCH_DIRS),
        "must_not_exist": list(MUST_NOT_EXIST),
        "lock_mounts": shared["lock_mounts"],
        "sshd_exec": init_link,
        "sshd_argv": [SSHD, "-D", "-e", "-f", config_path],
    }


def _spawn(paths: LabPaths, name: str, config: Dict[str, Any]) -> subprocess.Popen:
    host_dir = paths.host_dir(name)
    config_file = os.path.join(host_dir, "nsinit.json")
    _write_json(config_file, config)
    argv = [_which(UNSHARE) or UNSHARE, "--mount", "--uts", "--pid", "--fork", "--kill-child=SIGTERM",
            "--mount-proc", "--propagation", "private", "--",
            sys.executable, "-I", "-S", NSINIT, config_file]
    with open(os.path.join(host_dir, "sshd.log"), "ab") as log:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,  # noqa: S603
                                 start_new_session=True, close_fds=True, cwd="/")
    _CHILDREN[child.pid] = child
    return child


def _host_failure(paths: LabPaths, name: str) -> str:
    status = _read_json(os.path.join(paths.host_dir(name), "nsinit-status.json"), {})
    if status.get("problems"):
        return "; ".join(status["problems"])
    try:
        with open(os.path.join(paths.host_dir(name), "sshd.log"), encoding="utf-8", errors="replace") as handle:
            tail = handle.read()[-600:].strip()
    except OSError:
        tail = ""
    return tail or "exited without a message"


def running_hosts(lab_dir: str) -> List[str]:
    paths = LabPaths(os.path.abspath(lab_dir))
    pids = _read_json(paths.pids_json, {})
    return sorted(name for name, record in pids.get("hosts", {}).items() if _host_processes(record))


def up(lab_dir: str, specs: Sequence[HostSpec], *, port: Optional[int] = None,
       first_address: str = "127.0.0.2", timeout: Optional[float] = None, cluster: bool = False,
       _mutate_config: Optional[Callable[[str, Dict[str, Any]], None]] = None) -> Dict[str, Any]:
    """Start every host (in parallel) and wait until each answers SSH; write the inventory.

    On any failure everything started is stopped again and LabError says which host and why.
    ``_mutate_config`` is for the lab's own tests (to prove that a wrong mount is refused).
    """
    validate_specs(specs)
    problem = prerequisites_problem()
    if problem:
        raise LabError(problem)
    paths = LabPaths(os.path.abspath(lab_dir))
    if not re.match(r"^/[A-Za-z0-9._/+-]+$", paths.root):
        raise LabError(f"lab directory {paths.root!r}: use only letters, digits and ._+-/ in its path "
                       "(it appears in mount tables and sshd configuration)")
    os.makedirs(paths.root, exist_ok=True)
    running = running_hosts(paths.root)
    if running:
        raise LabError(f"a lab is already running in {paths.root} (hosts: {', '.join(running)}); "
                       f"run `python -m gpulab down --dir {paths.root}` first")
    addresses = [host_address(first_address, i) for i in range(len(specs))]
    if port is None:
        port = choose_port(addresses)
    else:
        busy = [a for a in addresses if not _port_free(a, port)]
        if busy:
            raise LabError(f"port {port} is already in use on {', '.join(busy)}")
    ensure_keys(paths)
    for top in sorted({_top(d) for d in viewed_dirs()} | {"/etc"}):
        os.makedirs(paths.real_mount_point(top), exist_ok=True)
    shared = {
        "namespaces": _own_namespaces(),
        "lock_mounts": can_lock_mounts(),
        "forbidden": dangerous_inodes(),
        "sshd_version": _sshd_version(),
        "real_binds": [[top, paths.real_mount_point(top)] for top in sorted({_top(d) for d in viewed_dirs()} | {"/etc"})],
    }
    shared["views_file"] = os.path.join(paths.root, ".ns", "views.json")
    _write_json(shared["views_file"], view_manifests(paths))
    hosts = [Host(spec, address, port, paths.state_file(spec.name), paths.host_dir(spec.name))
             for spec, address in zip(specs, addresses)]
    _write_json(paths.lab_json, {"version": 1, "dir": paths.root, "port": port,
                                 "hosts": [h.as_dict() for h in hosts]})
    pids: Dict[str, Any] = {"version": 1, "dir": paths.root, "hosts": {}}
    _write_json(paths.pids_json, pids)
    children: Dict[str, subprocess.Popen] = {}
    try:
        for host in hosts:
            config = _prepare_host(paths, host.spec, host.address, port, shared)
            if _mutate_config is not None:
                _mutate_config(host.spec.name, config)
            child = _spawn(paths, host.spec.name, config)
            children[host.spec.name] = child
            pids["hosts"][host.spec.name] = {
                "pid": child.pid, "address": host.address, "port": port, "mnt_ns": None,
                "marker_arg": os.path.join(host.host_dir, "nsinit.json"),
                "marker_mount": paths.real_mount_point("/etc"),
            }
            _write_json(paths.pids_json, pids)  # recorded at once: `down` can stop a half-started lab
        _wait_ready(paths, hosts, children, pids, timeout or 15.0 + 0.5 * len(hosts))
        kubeconfig = None
        if cluster:
            pids["cluster"] = _start_cluster(paths, hosts)
            _write_json(paths.pids_json, pids)
            kubeconfig = pids["cluster"]["kubeconfig"]
        write_inventory(paths, hosts, python_for_hosts(), kubeconfig)
    except BaseException:
        with contextlib.suppress(LabError):
            down(paths.root)
        raise
    return {"dir": paths.root, "inventory": paths.inventory, "port": port,
            "hosts": [h.as_dict() for h in hosts], "cluster": pids.get("cluster")}


def _wait_ready(paths: LabPaths, hosts: Sequence[Host], children: Dict[str, subprocess.Popen],
                pids: Dict[str, Any], timeout: float) -> None:
    pending = {h.spec.name: h for h in hosts}
    deadline = time.monotonic() + timeout
    failures = []
    while pending and time.monotonic() < deadline:
        for name, host in list(pending.items()):
            child = children[name]
            if child.poll() is not None:
                failures.append(f"{name}: sshd not started: {_host_failure(paths, name)}")
                del pending[name]
            elif ssh_banner(host.address, host.port, timeout=0.2):
                own = os.readlink("/proc/self/ns/mnt")
                pids["hosts"][name]["mnt_ns"] = [ns for ns in _tree_namespaces(child.pid) if ns != own]
                del pending[name]
        if pending:
            time.sleep(0.05)
    _write_json(paths.pids_json, pids)
    failures += [f"{name}: no SSH answer on {h.address}:{h.port} within {timeout:.0f}s "
                 f"({_host_failure(paths, name)})" for name, h in pending.items()]
    if failures:
        raise LabError("lab hosts failed to start:\n  " + "\n  ".join(failures))


def _start_cluster(paths: LabPaths, hosts: Sequence[Host]) -> Dict[str, Any]:
    """Start the virtual Kubernetes API server (gpulab.cluster.server) for these hosts."""
    try:
        from gpulab.cluster import server  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise LabError(f"cluster not available: gpulab.cluster.server cannot be imported ({exc})") from None
    try:
        pid, url = server.start(paths.root, [h.as_dict() for h in hosts])
    except RuntimeError as exc:
        raise LabError(f"cluster did not start: {exc}") from None
    return {"pid": int(pid), "url": url, "kubeconfig": os.path.join(paths.root, "kubeconfig")}


def down(lab_dir: str) -> List[str]:
    """Stop exactly what ``up`` started in lab_dir (by recorded PID and namespace). Idempotent.
    Returns what was stopped (host names, "cluster")."""
    paths = LabPaths(os.path.abspath(lab_dir))
    pids = _read_json(paths.pids_json, None)
    if not pids:
        return []
    stopped: List[str] = []
    survivors: List[str] = []
    if pids.get("cluster"):
        if _stop_cluster(paths, pids["cluster"]):
            survivors.append("cluster")
        else:
            stopped.append("cluster")
            del pids["cluster"]
            _write_json(paths.pids_json, pids)
    victims = {name: _host_processes(record) for name, record in pids.get("hosts", {}).items()}
    everything: Dict[int, Callable[[int], bool]] = {}
    for host_victims in victims.values():
        everything.update(host_victims)
    left = set(_stop_processes(everything))
    for name in sorted(victims):
        _reap(int(pids["hosts"][name]["pid"]))
        host_left = sorted(set(victims[name]) & left)
        if host_left:
            survivors.append(f"{name} (PIDs {', '.join(map(str, host_left))})")
            continue
        stopped.append(name)
        del pids["hosts"][name]
    _write_json(paths.pids_json, pids)
    if survivors:
        raise LabError(f"could not stop: {', '.join(survivors)}")
    return stopped


def status(lab_dir: str) -> List[Dict[str, Any]]:
    paths = LabPaths(os.path.abspath(lab_dir))
    lab = _read_json(paths.lab_json, {"hosts": []})
    pids = _read_json(paths.pids_json, {}).get("hosts", {})
    report = []
    for host in lab.get("hosts", []):
        record = pids.get(host["name"])
        running = bool(record) and bool(_host_processes(record))
        started = _read_json(os.path.join(paths.host_dir(host["name"]), "nsinit-status.json"), {})
        report.append({**host, "running": running,
                       "answers": running and ssh_banner(host["address"], host["port"]),
                       "locked": running and bool(started.get("locked"))})
    return report


def cluster_status(lab_dir: str) -> Optional[Dict[str, Any]]:
    """The virtual cluster started with ``up --cluster`` (None when there is none recorded)."""
    paths = LabPaths(os.path.abspath(lab_dir))
    record = _read_json(paths.pids_json, {}).get("cluster")
    if not record:
        return None
    pid = int(record["pid"])
    return {**record, "running": not _is_zombie(pid) and _cluster_check(paths)(pid)}


# --------------------------------------------------------------------------- inventory

def inventory_data(paths: LabPaths, hosts: Sequence[Host], python: str,
                   kubeconfig: Optional[str] = None) -> Dict[str, Any]:
    group_hosts: Dict[str, Any] = {}
    children: Dict[str, Any] = {}
    for host in hosts:
        group_hosts[host.spec.name] = {
            "ansible_host": host.address,
            "ansible_port": host.port,
            "gpulab_state_file": host.state_file,
            "gpulab_model": host.spec.model,
            "gpulab_gpu_count": host.spec.gpus,
            "gpulab_host_dir": host.host_dir,
        }
        for group in host.spec.groups:
            children.setdefault(group, {"hosts": {}})["hosts"][host.spec.name] = None
    group: Dict[str, Any] = {
        "hosts": group_hosts,
        "vars": {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": paths.client_key,
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                                       "-o LogLevel=ERROR",
            "ansible_ssh_args": "-o ControlMaster=auto -o ControlPersist=120s",
            "ansible_ssh_pipelining": True,
            "ansible_python_interpreter": python,
            "gpulab_lab_dir": paths.root,
        },
    }
    if kubeconfig:
        group["vars"]["gpulab_kubeconfig"] = kubeconfig
    if children:
        group["children"] = children
    return {"all": {"children": {GROUP: group}}}


def write_inventory(paths: LabPaths, hosts: Sequence[Host], python: str,
                    kubeconfig: Optional[str] = None) -> None:
    import yaml  # pylint: disable=import-outside-toplevel

    text = "# gpulab lab inventory (generated by `python -m gpulab up`; rewritten on every up)\n"
    text += yaml.safe_dump(inventory_data(paths, hosts, python, kubeconfig), sort_keys=False, default_flow_style=False)
    with open(paths.inventory, "w", encoding="utf-8") as handle:
        handle.write(text)
