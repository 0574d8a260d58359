"""Helpers shared by the tests and benchmarks that run collection modules against an in-process lab.

- run_module: run a module as Ansible does (``python -m``, an args file) and return its JSON result;
- serve_lab: the lab API server with its controllers in this process, with short simulated delays;
- one_gpu_node: serve_lab of one node with one GPU, its GPU advertised (a ClusterPolicy, single strategy);
- wait_until: poll a probe until it returns something truthy;
- wait_settled: poll a version of the lab's objects until the controllers stop changing them;
- ssh: run a command on a lab host over its real SSH;
- lab_hosts: SSH lab hosts of the given specs, up for the block and down after it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ansible.plugins.callback import CallbackBase

from gpulab import gpustate
from gpulab.cluster import server
from gpulab.hosts import down as hosts_down, parse_host_spec, up as hosts_up

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.path.join(REPO, ".build")
LINK = os.path.join(BUILD, "ansible_collections", "gpufleet", "sharing")
# Short simulated delays (defaults are realistic and slower).
FAST_ENV = {
    "GPULAB_RESYNC_SECONDS": "0.3", "GPULAB_OPERAND_START_DELAY": "0.1", "GPULAB_POD_START_DELAY": "0.05",
    "GPULAB_POD_STOP_DELAY": "0.05", "GPULAB_DEFAULT_RUNTIME": "0.1", "GPULAB_MIG_APPLY_DELAY": "0.05",
}


def ensure_collection_path() -> None:
    """.build/ansible_collections/gpufleet/sharing links to this checkout (``conftest`` puts .build on sys.path)."""
    if not os.path.lexists(LINK):
        os.makedirs(os.path.dirname(LINK), exist_ok=True)
        os.symlink(os.path.join("..", "..", ".."), LINK)


@contextlib.contextmanager
def environ(values: Dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set for the block (processes started in it inherit them), restored after."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_module(name: str, args: Dict[str, Any], tmp_dir: str, check_mode: bool = False, diff: bool = False,
               env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Run a collection module like Ansible does and return its JSON result (without ``invocation``)."""
    ensure_collection_path()
    payload = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff, _ansible_tmpdir=tmp_dir)
    path = os.path.join(tmp_dir, "%s-%d.json" % (name, time.monotonic_ns()))
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": payload}, handle)
    run_env = dict(os.environ, PYTHONPATH=BUILD, **(env or {}))
    try:
        proc = subprocess.run([sys.executable, "-m", "ansible_collections.gpufleet.sharing.plugins.modules." + name,
                               path], capture_output=True, text=True, env=run_env, timeout=600, check=False)
    finally:
        os.unlink(path)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module %s printed no JSON (rc=%d): %s %s" % (name, proc.returncode, proc.stdout, proc.stderr))
    result.pop("invocation", None)
    if "diff" in result:  # printed as the default callback prints it: a side it cannot print raises (issue 43 #7)
        CallbackBase()._get_diff(copy.deepcopy(result["diff"]))  # pylint: disable=protected-access
    return result


def serve_lab(lab_dir: str, hosts: List[Tuple[str, str, int]], fault_registry: Any = None) -> Tuple[Any, Dict[str, str]]:
    """Start the lab API server with controllers in this process; hosts are (name, model, gpus).

    Returns the server and each host's GPU state file.
    """
    state_files = {}
    entries = []
    for name, model, count in hosts:
        state = os.path.join(lab_dir, "%s.json" % name)
        gpustate.create(state, name, [(model, count)])
        state_files[name] = state
        entries.append({"name": name, "state_file": state})
    with environ(FAST_ENV):  # the controllers read their timings when they start
        running = server.serve_in_thread(lab_dir, entries, controllers=True, fault_registry=fault_registry)
    return running, state_files


def wait_until(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    """The first truthy value of probe(), polled every 0.1 s; AssertionError after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def wait_settled(what: str, version: Callable[[], Any], polls: int = 10, timeout: float = 30.0) -> Any:
    """Poll ``version()`` (wait_until's interval) until it has not changed for ``polls`` polls in a row,
    so that a later change is not the controllers'; returns the settled version."""
    seen: Dict[str, Any] = {"last": None, "stable": 0}

    def quiet() -> bool:
        now = version()
        seen["stable"] = seen["stable"] + 1 if now == seen["last"] else 0
        seen["last"] = now
        return seen["stable"] >= polls

    wait_until(what, quiet, timeout)
    return seen["last"]


@contextlib.contextmanager
def one_gpu_node(lab_dir: str, node: str, model: str, count: int = 1) -> Iterator[Any]:
    """The lab (serve_lab) with one node of ``count`` `model` GPUs, once the node advertises them as
    ``nvidia.com/gpu`` (the gpu-operator namespace and a ClusterPolicy with the single MIG strategy);
    stopped on exit. ``running.states[node]`` is the node's GPU state file."""
    running, states = serve_lab(lab_dir, [(node, model, count)])
    running.states = states
    store = running.store
    try:
        store.create("v1/namespaces", {"metadata": {"name": "gpu-operator"}})
        store.create("nvidia.com/v1/clusterpolicies", {
            "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"mig": {"strategy": "single"}}})
        wait_until("%s advertises its GPUs" % node, lambda: (store.get("v1/nodes", None, node).get("status") or {})
                   .get("allocatable", {}).get("nvidia.com/gpu") == str(count), timeout=60)
        yield running
    finally:
        running.stop()


def ssh(key: str, host: Dict[str, Any], *command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``command`` on a lab host (an entry of ``hosts.up(...)["hosts"]``) over SSH as root, with the lab's key."""
    argv = ["ssh", "-i", key, "-p", str(host["port"]), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"root@{host['address']}", *command]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)  # noqa: S603


@contextlib.contextmanager
def lab_hosts(lab_dir: str, specs: List[str]) -> Iterator[Dict[str, Any]]:
    """``hosts.up`` of ``specs`` (``NAME=MODEL:GPUS``) in lab_dir; what it returns, and down after the block."""
    info = hosts_up(lab_dir, [parse_host_spec(spec) for spec in specs])
    try:
        yield info
    finally:
        hosts_down(lab_dir)
