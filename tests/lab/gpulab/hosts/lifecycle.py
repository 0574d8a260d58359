"""Lifecycle of a lab: ``up`` (prepare and start every host, wait for SSH, write the inventory),
``down`` (stop exactly what ``up`` started), ``status`` and ``cluster_status``."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from gpulab import gpustate, launchers, toolserver
from gpulab.cluster import server
from gpulab.hosts import ctk, processes, sandbox, sshd
from gpulab.hosts.inventory import python_for_hosts, write_inventory
from gpulab.hosts.layout import LabPaths, read_json, write_json
from gpulab.hosts.specs import Host, HostSpec, LabError, host_address, validate_specs
from gpulab.hosts.system import UNSHARE, prerequisites_problem, which

NSINIT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nsinit.py")

MutateConfig = Callable[[str, Dict[str, Any]], None]


def _prepare_host(paths: LabPaths, host: Host, shared: Dict[str, Any]) -> Dict[str, Any]:
    """Write everything one host needs and return its nsinit config."""
    name = host.spec.name
    host_dir = paths.host_dir(name)
    if os.path.lexists(host_dir):
        if os.path.ismount(host_dir):
            raise LabError(f"{host_dir} is a mount point: refusing to delete it")
        shutil.rmtree(host_dir)
    os.makedirs(host_dir)
    state = gpustate.create(paths.state_file(name), name, [(host.spec.model, host.spec.gpus)])
    launchers.write_boot_id(paths.boot_id_file(name), state.boot_id)
    ctk.write_spec(paths.state_file(name))  # the management CDI spec the toolkit writes at install (§7.7)
    digests = launchers.write_launchers(paths.bin_dir(name), name, paths.state_file(name), paths.boot_id_file(name),
                                        tool_socket=toolserver.socket_name(paths.root))
    sandbox.make_own_etc_dirs(paths, name)
    files = sshd.write_host_sshd(paths, name, host.address, host.port, shared["sshd_version"])
    return sandbox.nsinit_config(paths, name, digests, files, shared)


def _spawn(paths: LabPaths, name: str, config: Dict[str, Any]) -> subprocess.Popen:
    config_file = paths.host_file(name, "nsinit.json")
    write_json(config_file, config)
    argv = [which(UNSHARE), "--mount", "--uts", "--pid", "--fork", "--kill-child=SIGTERM",
            "--mount-proc", "--propagation", "private", "--",
            sys.executable, "-I", "-S", NSINIT, config_file]
    with open(paths.host_file(name, "sshd.log"), "ab") as log:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,  # noqa: S603
                                 start_new_session=True, close_fds=True, cwd="/")
    processes.adopt(child)
    return child


def _host_failure(paths: LabPaths, name: str) -> str:
    status_record = read_json(paths.host_file(name, "nsinit-status.json"), {})
    if status_record.get("problems"):
        return "; ".join(status_record["problems"])
    try:
        with open(paths.host_file(name, "sshd.log"), encoding="utf-8", errors="replace") as handle:
            tail = handle.read()[-600:].strip()
    except OSError:
        tail = ""
    return tail or "exited without a message"


def running_hosts(lab_dir: str) -> List[str]:
    paths = LabPaths(os.path.abspath(lab_dir))
    pids = read_json(paths.pids_json, {})
    return sorted(name for name, record in pids.get("hosts", {}).items() if processes.host_processes(record))


def _check_target(paths: LabPaths, count: int, first_address: str, port: Optional[int]) -> Tuple[List[str], int]:
    """The hosts' addresses and the lab's port, once the lab directory is known to be usable."""
    if not re.match(r"^/[A-Za-z0-9._/+-]+$", paths.root):
        raise LabError(f"lab directory {paths.root!r}: use only letters, digits and ._+-/ in its path "
                       "(it appears in mount tables and sshd configuration)")
    os.makedirs(paths.root, exist_ok=True)
    running = running_hosts(paths.root)
    if running:
        raise LabError(f"a lab is already running in {paths.root} (hosts: {', '.join(running)}); "
                       f"run `python -m gpulab down --dir {paths.root}` first")
    addresses = [host_address(first_address, i) for i in range(count)]
    if port is None:
        return addresses, sshd.choose_port(addresses)
    busy = [a for a in addresses if not sshd.port_free(a, port)]
    if busy:
        raise LabError(f"port {port} is already in use on {', '.join(busy)}")
    return addresses, port


def up(lab_dir: str, specs: Sequence[HostSpec], *, port: Optional[int] = None,
       first_address: str = "127.0.0.2", timeout: Optional[float] = None, cluster: bool = False,
       _mutate_config: Optional[MutateConfig] = None) -> Dict[str, Any]:
    """Start every host (in parallel) and wait until each answers SSH; write the inventory.

    On any failure everything started is stopped again and LabError says which host and why.
    ``_mutate_config`` is for the lab's own tests (to prove that a wrong mount is refused).
    """
    validate_specs(specs)
    problem = prerequisites_problem()
    if problem:
        raise LabError(problem)
    paths = LabPaths(os.path.abspath(lab_dir))
    addresses, port = _check_target(paths, len(specs), first_address, port)
    sshd.ensure_keys(paths)
    shared = sandbox.prepare_lab(paths)
    shared["sshd_version"] = sshd.sshd_version()
    hosts = [Host(spec, address, port, paths.state_file(spec.name), paths.host_dir(spec.name))
             for spec, address in zip(specs, addresses)]
    write_json(paths.lab_json, {"version": 1, "dir": paths.root, "port": port,
                                "hosts": [h.as_dict() for h in hosts]})
    pids: Dict[str, Any] = {"version": 1, "dir": paths.root, "hosts": {}}
    write_json(paths.pids_json, pids)
    try:
        pids["tools"] = _start_tools(paths)
        write_json(paths.pids_json, pids)
        children = _start_hosts(paths, hosts, shared, pids, _mutate_config)
        _wait_ready(paths, hosts, children, pids, timeout or 15.0 + 0.5 * len(hosts))
        kubeconfig = None
        if cluster:
            pids["cluster"] = _start_cluster(paths, hosts)
            write_json(paths.pids_json, pids)
            kubeconfig = pids["cluster"]["kubeconfig"]
        write_inventory(paths, hosts, python_for_hosts(), kubeconfig)
    except BaseException:
        with contextlib.suppress(LabError):
            down(paths.root)
        raise
    return {"dir": paths.root, "inventory": paths.inventory, "port": port,
            "hosts": [h.as_dict() for h in hosts], "cluster": pids.get("cluster")}


def _start_hosts(paths: LabPaths, hosts: Sequence[Host], shared: Dict[str, Any], pids: Dict[str, Any],
                 mutate_config: Optional[MutateConfig]) -> Dict[str, subprocess.Popen]:
    """Prepare and spawn each host, recording its PID in pids.json at once (so that ``down`` can
    stop a half-started lab)."""
    children: Dict[str, subprocess.Popen] = {}
    for host in hosts:
        config = _prepare_host(paths, host, shared)
        if mutate_config is not None:
            mutate_config(host.spec.name, config)
        child = _spawn(paths, host.spec.name, config)
        children[host.spec.name] = child
        pids["hosts"][host.spec.name] = {
            "pid": child.pid, "address": host.address, "port": host.port, "mnt_ns": None,
            "marker_arg": paths.host_file(host.spec.name, "nsinit.json"),
            "marker_mount": paths.real_mount_point("/etc"),
        }
        write_json(paths.pids_json, pids)
    return children


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
            elif sshd.ssh_banner(host.address, host.port, timeout=0.2):
                own = processes.own_mount_namespace()
                pids["hosts"][name]["mnt_ns"] = [ns for ns in processes.tree_namespaces(child.pid) if ns != own]
                del pending[name]
        if pending:
            time.sleep(0.05)
    write_json(paths.pids_json, pids)
    failures += [f"{name}: no SSH answer on {h.address}:{h.port} within {timeout:.0f}s "
                 f"({_host_failure(paths, name)})" for name, h in pending.items()]
    if failures:
        raise LabError("lab hosts failed to start:\n  " + "\n  ".join(failures))


def _start_cluster(paths: LabPaths, hosts: Sequence[Host]) -> Dict[str, Any]:
    """Start the virtual Kubernetes API server (gpulab.cluster.server) for these hosts."""
    try:
        pid, url = server.start(paths.root, [h.as_dict() for h in hosts])
    except RuntimeError as exc:
        raise LabError(f"cluster did not start: {exc}") from None
    return {"pid": int(pid), "url": url, "kubeconfig": os.path.join(paths.root, "kubeconfig")}


def _start_tools(paths: LabPaths) -> Dict[str, Any]:
    """Start the lab's tool server (gpulab.toolserver: the hosts' nvidia-smi runs there)."""
    try:
        return {"pid": toolserver.start(paths.root)}
    except RuntimeError as exc:
        raise LabError(f"tool server did not start: {exc}") from None


def down(lab_dir: str) -> List[str]:
    """Stop exactly what ``up`` started in lab_dir (by recorded PID and namespace). Idempotent.
    Returns what was stopped ("cluster", "tools", host names)."""
    paths = LabPaths(os.path.abspath(lab_dir))
    pids = read_json(paths.pids_json, None)
    if not pids:
        return []
    stopped: List[str] = []
    survivors: List[str] = []
    for key, check in (("cluster", processes.cluster_check), ("tools", processes.tools_check)):
        if not pids.get(key):
            continue
        if processes.stop_processes({int(pids[key]["pid"]): check(paths.root)}):
            survivors.append(key)
        else:
            stopped.append(key)
            del pids[key]
            write_json(paths.pids_json, pids)
    victims = {name: processes.host_processes(record) for name, record in pids.get("hosts", {}).items()}
    everything: Dict[int, Callable[[int], bool]] = {}
    for host_victims in victims.values():
        everything.update(host_victims)
    left = set(processes.stop_processes(everything))
    for name in sorted(victims):
        processes.reap(int(pids["hosts"][name]["pid"]))
        host_left = sorted(set(victims[name]) & left)
        if host_left:
            survivors.append(f"{name} (PIDs {', '.join(map(str, host_left))})")
            continue
        stopped.append(name)
        del pids["hosts"][name]
    write_json(paths.pids_json, pids)
    if survivors:
        raise LabError(f"could not stop: {', '.join(survivors)}")
    return stopped


def status(lab_dir: str) -> List[Dict[str, Any]]:
    paths = LabPaths(os.path.abspath(lab_dir))
    lab = read_json(paths.lab_json, {"hosts": []})
    pids = read_json(paths.pids_json, {}).get("hosts", {})
    report = []
    for host in lab.get("hosts", []):
        record = pids.get(host["name"])
        running = bool(record) and bool(processes.host_processes(record))
        started = read_json(paths.host_file(host["name"], "nsinit-status.json"), {})
        report.append({**host, "running": running,
                       "answers": running and sshd.ssh_banner(host["address"], host["port"]),
                       "locked": running and bool(started.get("locked"))})
    return report


def _server_status(lab_dir: str, key: str, check: Callable[[str], Callable[[int], bool]]) -> Optional[Dict[str, Any]]:
    paths = LabPaths(os.path.abspath(lab_dir))
    record = read_json(paths.pids_json, {}).get(key)
    if not record:
        return None
    pid = int(record["pid"])
    return {**record, "running": not processes.is_zombie(pid) and check(paths.root)(pid)}


def tools_status(lab_dir: str) -> Optional[Dict[str, Any]]:
    """The lab's tool server (None when there is none recorded)."""
    return _server_status(lab_dir, "tools", processes.tools_check)


def cluster_status(lab_dir: str) -> Optional[Dict[str, Any]]:
    """The virtual cluster started with ``up --cluster`` (None when there is none recorded)."""
    return _server_status(lab_dir, "cluster", processes.cluster_check)
