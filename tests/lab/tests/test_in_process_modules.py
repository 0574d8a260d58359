"""Cluster modules run in the controller's worker process (plugins/plugin_utils/_in_process.py, issue 26).

The same tasks run twice against the lab cluster through ansible-playbook: once with the controller's
own Python (the action plugin runs the module in the worker process Ansible forked for the task) and
once with ``ansible_python_interpreter`` set to a wrapper of that Python (the module runs as a module
process, as without the plugin). Both must give the same results, failures and messages, honour check
mode, ``environment:`` and ``no_log`` the same way, and say in -vvv which way each task ran.

On an ansible-core the in-process path was not proven on (``_core_internals.PROVEN``), the first way
falls back to module processes and says so at -v: the same results, both ways, on every version that
the matrix runs this file with (tests/tools/matrix_leg.sh).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys

import pytest

from ansible.release import __version__ as CORE_VERSION

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._core_internals import PROVEN, minor_version, proven_on, surface
from labtools import BUILD
# The harness of the cluster module tests: the lab cluster (gpu-a, gpu-b) in this process.
from test_cluster_modules_operator import lab  # noqa: F401 pylint: disable=unused-import

IN_PROCESS = "runs in the controller's worker process"
AS_MODULE = "runs as a module"
SECRET = "planted-secret-6c1f0e2a"
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
# This ansible-core's way when nothing else stands in the way: in the worker where proven, else as modules.
PROVEN_HERE = proven_on(CORE_VERSION) is not None
FALLBACK = "cluster modules run as ordinary module processes: ansible-core %s is not among" % CORE_VERSION


def wrapper_python(tmp_path) -> str:
    """The controller's Python behind another path: Ansible runs the module as a process with it."""
    path = tmp_path / "other-python"
    path.write_text("#!/bin/sh\nexec %s \"$@\"\n" % sys.executable)
    path.chmod(0o755)
    return str(path)


def play(lab, tmp_path, name, tasks, interpreter=None, check=False, defaults=True, python_flags=()):  # noqa: F811
    """Run ``tasks`` on localhost (-c local) with -vvv; return (process, {register name: result})."""
    out = tmp_path / ("%s-results" % name)
    out.mkdir()
    saved = [{"name": "Save %s" % task["register"], "ansible.builtin.copy": {
        "content": "{{ %s | to_json }}" % task["register"], "dest": str(out / task["register"])},
        "check_mode": False, "diff": False} for task in tasks if "register" in task]
    playbook = tmp_path / ("%s.yml" % name)
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False,
                                     "module_defaults": {"group/gpufleet.sharing.k8s": {"kubeconfig": lab.kubeconfig}}
                                     if defaults else {},
                                     "tasks": tasks + saved}]))
    argv = [sys.executable, *python_flags, os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-vvv", "-i", "localhost,", "-c", "local",
            "-e", "ansible_python_interpreter=%s" % (interpreter or sys.executable), str(playbook)]
    if check:
        argv.append("--check")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_NOCOLOR="1"))
    results = {entry.name: json.loads(entry.read_text()) for entry in out.iterdir()}
    return proc, results


def comparable(result):
    """What a task's result says, without what differs between two runs by nature: the invocation, and
    the temporary directory of a module process in a traceback (ansible-core 2.16-2.18 add one at -vvv)."""
    kept = {key: value for key, value in result.items() if key not in ("invocation", "_ansible_no_log")}
    if isinstance(kept.get("exception"), str):
        kept["exception"] = re.sub(r"/tmp/ansible_[^/]*_payload_[^/]*/", "/tmp/PAYLOAD/", kept["exception"])
    return kept


TAINT_TASKS = [
    {"name": "Taint", "gpufleet.sharing.node_taints": {"nodes": [{"node": "gpu-a", "taints": [TAINT]}]},
     "register": "tainted"},
    {"name": "Taint again", "gpufleet.sharing.node_taints": {"nodes": [{"node": "gpu-a", "taints": [TAINT]}]},
     "register": "again"},
    {"name": "Bad input", "gpufleet.sharing.node_taints": {"nodes": [{"node": "gpu-a", "taints": [
        dict(TAINT, effect="Sometimes")]}, {"node": "gpu-z", "taints": [TAINT]}]},
     "register": "refused", "ignore_errors": True},
    {"name": "Unknown option", "gpufleet.sharing.node_taints": {"nodes": [], "colour": "red"},
     "register": "unknown", "ignore_errors": True},
    {"name": "Untaint", "gpufleet.sharing.node_taints": {"nodes": [{"node": "gpu-a", "taints": []}]},
     "register": "untainted"},
]


def test_a_cluster_module_gives_the_same_results_in_the_worker_and_as_a_module(lab, tmp_path):  # noqa: F811
    seen = {}
    for way, interpreter in (("in_process", None), ("as_module", wrapper_python(tmp_path))):
        proc, results = play(lab, tmp_path, way, TAINT_TASKS, interpreter)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        said = proc.stdout.count(IN_PROCESS), proc.stdout.count(AS_MODULE)
        assert said == ((5, 0) if way == "in_process" and PROVEN_HERE else (0, 5)), said
        assert (FALLBACK in proc.stdout) is not PROVEN_HERE, proc.stdout[:3000]
        assert results["tainted"]["changed"] and results["tainted"]["nodes"] == {"gpu-a": [TAINT]}
        assert not results["again"]["changed"]
        assert results["refused"]["failed"]
        assert "node gpu-a: taint 1 (dedicated): invalid effect 'Sometimes'" in results["refused"]["msg"]
        assert "node gpu-z: not found" in results["refused"]["msg"]
        assert results["unknown"]["failed"] and "colour" in results["unknown"]["msg"]
        assert results["untainted"]["changed"] and results["untainted"]["nodes"] == {"gpu-a": []}
        assert not lab.store.get("v1/nodes", None, "gpu-a")["spec"].get("taints")
        seen[way] = {name: comparable(result) for name, result in results.items()}
    assert seen["in_process"] == seen["as_module"], json.dumps(seen, sort_keys=True, indent=1)


def test_gpufleet_in_process_false_runs_the_modules_as_modules(lab, tmp_path):  # noqa: F811
    tasks = [{"name": "Lock read", "gpufleet.sharing.rollout_lock": {"state": "checked", "holder": "test"},
              "vars": {"gpufleet_in_process": False}, "register": "checked"}]
    proc, results = play(lab, tmp_path, "switched-off", tasks)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "runs as a module: gpufleet_in_process is false" in proc.stdout and IN_PROCESS not in proc.stdout
    assert results["checked"]["message"] == "free", results["checked"]


def test_the_worker_run_keeps_check_mode_and_the_task_environment(lab, tmp_path):  # noqa: F811
    before = lab.rv()
    tasks = [{"name": "Taint in check mode", "gpufleet.sharing.node_taints": {
        "nodes": [{"node": "gpu-b", "taints": [TAINT]}]}, "register": "planned"}]
    proc, results = play(lab, tmp_path, "check", tasks, check=True)
    assert proc.returncode == 0 and (IN_PROCESS in proc.stdout) is PROVEN_HERE, proc.stdout[-3000:]
    assert results["planned"]["changed"] and lab.rv() == before  # planned, not written
    # The kubeconfig from the task's environment (K8S_AUTH_KUBECONFIG), as a module process gets it.
    env_tasks = [{"name": "Lock read with the kubeconfig from the environment",
                  "gpufleet.sharing.rollout_lock": {"state": "checked", "holder": "test"},
                  "environment": {"K8S_AUTH_KUBECONFIG": lab.kubeconfig}, "register": "checked"}]
    proc, results = play(lab, tmp_path, "environment", env_tasks, defaults=False)
    assert proc.returncode == 0 and (IN_PROCESS in proc.stdout) is PROVEN_HERE, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert results["checked"]["message"] == "free", results["checked"]
    assert "K8S_AUTH_KUBECONFIG" not in os.environ or os.environ["K8S_AUTH_KUBECONFIG"] != lab.kubeconfig


@pytest.mark.parametrize("way", ["in_process", "as_module"])
def test_a_no_log_option_stays_out_of_the_output_either_way(lab, tmp_path, way):  # noqa: F811
    interpreter = wrapper_python(tmp_path) if way == "as_module" else None
    tasks = [{"name": "A token the lab refuses", "gpufleet.sharing.rollout_lock": {
        "state": "checked", "holder": "test", "api_key": SECRET, "host": "https://127.0.0.1:9", "request_timeout": 2},
        "register": "refused", "ignore_errors": True}]
    proc, results = play(lab, tmp_path, "secret-" + way, tasks, interpreter, defaults=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert results["refused"]["failed"]
    # The module got the token (and said so, masked), then failed to connect. ansible-core 2.21 no longer
    # shows a failed module's invocation, either way.
    masked = '"api_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"' in proc.stdout
    assert masked is (tuple(int(part) for part in minor_version(CORE_VERSION).split(".")) < (2, 21)), proc.stdout[-3000:]
    everything = proc.stdout + proc.stderr + json.dumps(results)
    for form in (SECRET, base64.b64encode(SECRET.encode()).decode()):
        assert form not in everything


def test_a_run_loads_the_collections_code_once_in_the_main_process(lab, tmp_path):  # noqa: F811
    """Ansible forks a worker per task and host; a worker that looks up one of our filters imports every
    filter file of the collection, compiled from source, and an in-process module imported its code in
    its worker (plugin_utils/_preload.py). Loaded with the first gpufleet action plugin, in the main
    process, each module of the collection is imported once per run, whatever the number of tasks."""
    filters = [{"name": "Filter %d" % n, "ansible.builtin.debug": {
        "msg": "{{ ['nvidia-dcgm.service'] | gpufleet.sharing.unit_name_problems('mig_gpu_clients') }}"}}
        for n in range(3)]
    tasks = ([{"name": "A host module first (no nvidia-smi here)",
               "gpufleet.sharing.gpu_facts": {"nvidia_smi_path": "/bin/true"}, "register": "read"}]
             + filters
             + [dict(task, name="%s (%d)" % (task["name"], n)) for n in range(2) for task in TAINT_TASKS[:2]])
    proc, results = play(lab, tmp_path, "imports", tasks, python_flags=("-X", "importtime"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert not results["read"].get("failed"), results["read"]
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    ours = [name for name in imported if name.startswith("ansible_collections.gpufleet.sharing.")]
    again = sorted({name for name in ours if ours.count(name) > 1})
    assert not again, "imported by more than one process of the run: %s" % again
    # What the workers used was imported (-X importtime names what import statements import: the code
    # of the filter and of the module, not the files Ansible and the action plugin load through importlib).
    assert "ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs" in ours
    assert "ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints" in ours


def test_the_proven_versions_are_the_only_ones_the_worker_path_takes():
    """The fallback decision itself, for versions this venv is not: an unproven minor version, however
    close, gets a reason naming it and the proven ones; a proven one gets none."""
    for version in ("2.16.19", "2.18.19", "2.22.0", "3.0.0"):
        found, why = surface(version)
        assert found is None and ("ansible-core %s is not among" % version) in why and "2.19, 2.20, 2.21" in why
    assert set(PROVEN) == {"2.19", "2.20", "2.21"}
    if PROVEN_HERE:
        found, why = surface(CORE_VERSION)
        assert found is not None and not why, why
