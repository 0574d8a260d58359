"""The processes a lab started, found by recorded PID and mount namespace, and how they are stopped.

Only processes that are in a recorded host namespace *and* see the lab's marker mount (or a host
still starting, by its command line) are ever signalled, re-checked before every signal; never a
process in the lab's own mount namespace, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any, Callable, Dict, List, Optional

# Popen objects of hosts started by this process (so that ``down`` in the same process reaps them).
_CHILDREN: Dict[int, subprocess.Popen] = {}


def adopt(child: subprocess.Popen) -> None:
    """Remember a host process started here, to collect its exit status when it is stopped."""
    _CHILDREN[child.pid] = child


def own_mount_namespace() -> str:
    return os.readlink("/proc/self/ns/mnt")


def _proc_ns(pid: int) -> Optional[str]:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:  # gone, zombie or not ours to see
        return None


def is_zombie(pid: int) -> bool:
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


def cmdline(pid: int) -> str:
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


def tree_namespaces(pid: int) -> List[str]:
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


def host_processes(record: Dict[str, Any]) -> Dict[int, Callable[[int], bool]]:
    """The processes of one host, each with the check that it still is one of them: in one of
    the host's mount namespaces AND seeing this lab's marker mount. Before the namespaces were
    recorded (a half-started host), those of the recorded PID (identified by its command line)
    and its descendants. Never a process in the lab's own mount namespace, never this process."""
    own = own_mount_namespace()
    namespaces = set(record.get("mnt_ns") or [])
    starting: Dict[int, Callable[[int], bool]] = {}
    if not namespaces:
        pid = int(record["pid"])

        def is_starting(candidate: int) -> bool:
            return record["marker_arg"] in cmdline(candidate)
        if is_zombie(pid) or not is_starting(pid):
            return {}
        namespaces = set(tree_namespaces(pid))
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
        if _proc_ns(pid) in namespaces and not is_zombie(pid) and in_host(pid):
            victims[pid] = in_host
    return victims


def reap(pid: int, keep: bool = False) -> None:
    """Collect the exit status of a process this process started (no zombie is left behind)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=0.05)
        if child.returncode is not None and not keep:
            del _CHILDREN[pid]
        return
    # A child of this process started elsewhere (the cluster server). Its command line reads empty
    # while it exits, before it is a zombie, so wait (bounded) until it can be collected.
    deadline = time.monotonic() + (0.0 if keep else 3.0)
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # not our child, or already collected
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def stop_processes(pids: Dict[int, Callable[[int], bool]], grace: float = 5.0) -> List[int]:
    """SIGTERM, wait, SIGKILL what is left; returns the PIDs that survived (should be none).

    ``pids`` maps each PID to a check that it is still the process we mean: it is asked again
    before every signal, so a PID reused by another process meanwhile is never signalled."""
    def running() -> List[int]:
        return [p for p in pids if not is_zombie(p)]

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
                reap(pid, keep=True)
            remaining = running()
        if not remaining:
            break
    for pid in pids:
        reap(pid)
    return [p for p in running() if pids[p](p)]


def _command_line_check(module: str, root: str) -> Callable[[int], bool]:
    """Whether a PID still is ``python -m <module> ... <root>`` (by its command line, read once per ask)."""
    def check(pid: int) -> bool:
        line = cmdline(pid)
        return module in line and root in line
    return check


def cluster_check(root: str) -> Callable[[int], bool]:
    """Whether a PID still is this lab's cluster server (by its command line)."""
    return _command_line_check("gpulab.cluster", root)


def tools_check(root: str) -> Callable[[int], bool]:
    """Whether a PID still is this lab's tool server (by its command line)."""
    return _command_line_check("gpulab.toolserver", root)
