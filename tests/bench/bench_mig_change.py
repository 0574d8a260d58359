"""Benchmark: the cost of a real change - a MIG layout change rolled over N lab hosts (issue 26 #2).

Usage: .venv/bin/python tests/bench/bench_mig_change.py [--sizes 5 50] [--json FILE] [--keep]

For each fleet size N: a lab (virtual cluster + N SSH hosts with one A100-40GB each, in the lab
inventory's a100_inference group, so its MIG selection, sharing config and serial batches
[1, "50%"]); converge once (layout ``inference-mixed``), then site.yml again through ansible-runner
with ``mig_config=all-1g.5gb``: every node is drained, its operands paused, the layout applied,
operands restored and restarted, the node verified (it advertises the plan, verification pods) and
uncordoned, batch by batch. From the job events, per host and per step: the seconds each step's
task took on that host (ansible-runner's ``duration``); per step the median and maximum over the
hosts; per batch its wall time. A ping over the same hosts (after an untimed one) is the baseline
of the run (the machine may be shared: compare ratios). After the change, the lab's floor for
each step (what the simulated tools and the API server need for it, measured alone on one node:
``step_floor.py``) is the "floor" column. Lab hosts on GPUFLEET_TEST_LAB_ADDRESS (default
127.0.23.2); ``--keep`` keeps the job artifacts. No timed assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
sys.path.insert(0, os.path.join(REPO, "tests", "lab", "tests"))
sys.path.insert(0, HERE)

import ansible_runner  # noqa: E402  pylint: disable=wrong-import-position
from gpulab import hosts, tools  # noqa: E402  pylint: disable=wrong-import-position
from gpulab.cluster import access  # noqa: E402  pylint: disable=wrong-import-position

import labtools  # noqa: E402  pylint: disable=wrong-import-position
from benchlib import failure_report  # noqa: E402  pylint: disable=wrong-import-position
from bench_site_noop import team_namespaces  # noqa: E402  pylint: disable=wrong-import-position
from step_floor import measure_floor  # noqa: E402  pylint: disable=wrong-import-position

# step -> the rollout's task names (playbooks/rollout.yml, or the rollout role) that make it
STEPS = [
    ("plan", ("Plan this node's MIG change (changes nothing)", "Record what the node needs")),
    ("drain", ("Drain the node (cordon, annotate, evict)",)),
    ("operand pause", ("Pause the node's GPU operands",)),
    ("apply", ("Apply the MIG layout on the host",)),
    ("restart", ("Restore the node's GPU operands (each deploy label to its previous value)",
                 "Restart the node's device plugin and feature discovery so they see the new devices")),
    ("advertise + verification pods", ("Verify the node advertises its plan",)),
    ("uncordon", ("Uncordon the node (the cordon is lifted before the annotation goes)",)),
    ("lock renewal", ("Renew the rollout lock for this batch",)),
]
# tasks of these roles not named above (the include's own task is a few ms; its work is in the role)
ROLE_STEPS = {"mig": "apply", "verify": "advertise + verification pods"}
NEW_LAYOUT = "all-1g.5gb"
OLD_LAYOUT = "inference-mixed"
# The floor alternates the node between the two layouts: mig-parted's default all-1g.5gb for the
# A100-40GB (config-default.yaml, v0.15.0), the lab inventory's inference-mixed.
FLOOR_CONFIGS = {NEW_LAYOUT: [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}


def floor_configs() -> Dict[str, Any]:
    with open(os.path.join(REPO, "inventories", "lab", "group_vars", "a100_inference.yml"), encoding="utf-8") as handle:
        return dict(FLOOR_CONFIGS, **yaml.safe_load(handle)["mig_configs"])


def fleet(size: int) -> List[str]:
    return ["a100-%02d=A100-40GB:1@a100_inference,gpu_hosts" % index for index in range(size)]


def job(private: str, info: Dict[str, Any], helm: str) -> None:
    for sub in ("project", "inventory", "env"):
        os.makedirs(os.path.join(private, sub), exist_ok=True)
    with open(os.path.join(private, "project", "site.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump([{"name": "site", "ansible.builtin.import_playbook": "gpufleet.sharing.site"}], handle)
    shutil.copy(info["inventory"], os.path.join(private, "inventory", "hosts.yml"))
    shutil.copytree(os.path.join(REPO, "inventories", "lab", "group_vars"), os.path.join(private, "inventory", "group_vars"))
    with open(os.path.join(private, "env", "envvars"), "w", encoding="utf-8") as handle:
        yaml.safe_dump({"ANSIBLE_COLLECTIONS_PATH": labtools.BUILD, "ANSIBLE_FORKS": "10"}, handle)


def run(private: str, ident: str, extravars: Dict[str, Any]) -> Any:
    with labtools.environ({"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}):
        start = time.perf_counter()
        result = ansible_runner.run(private_data_dir=private, playbook="site.yml", ident=ident, quiet=True,
                                    extravars=extravars)
        result.wall_s = time.perf_counter() - start
    if result.rc != 0:
        with open(os.path.join(result.config.artifact_dir, "stdout"), encoding="utf-8") as handle:
            raise SystemExit(failure_report("site.yml (%s)" % ident, handle.read(), returncode=result.rc))
    return result


def per_host_steps(result: Any) -> Dict[str, Dict[str, float]]:
    """host -> step -> seconds, from the runner's per-host task results."""
    step_of = {task: step for step, tasks in STEPS for task in tasks}
    found: Dict[str, Dict[str, float]] = {}
    for event in result.events:
        if event["event"] not in ("runner_on_ok", "runner_on_failed"):
            continue
        data = event["event_data"]
        step = step_of.get(data.get("task")) or ROLE_STEPS.get(str(data.get("role") or "").rsplit(".", maxsplit=1)[-1])
        if step is None or data.get("duration") is None:
            continue
        host = found.setdefault(data.get("host"), {})
        host[step] = host.get(step, 0.0) + float(data["duration"])
    return found


def ping_seconds(inventory: str) -> float:
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=labtools.BUILD, ANSIBLE_FORKS="10", ANSIBLE_NOCOLOR="1")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible"), "gpu_hosts", "-m", "ansible.builtin.ping", "-i", inventory]
    subprocess.run(argv, env=env, capture_output=True, check=False)  # untimed: the connections are open after it
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    return time.perf_counter() - start


def measure(size: int, helm: str, workdir: str) -> Dict[str, Any]:
    lab_dir = os.path.join(workdir, "lab-%d" % size)
    info = hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in fleet(size)], cluster=True,
                    first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.23.2"))
    try:
        access.create_namespaces(lab_dir, team_namespaces())  # the cluster admin's step (docs/quotas.md)
        private = os.path.join(workdir, "job-%d" % size)
        job(private, info, helm)
        base = {"gpufleet_kubeconfig": info["cluster"]["kubeconfig"], "gpu_operator_helm_binary": helm,
                "gpu_operator_chart_ref": os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin")}
        converge = run(private, "converge", base).wall_s
        ping = ping_seconds(info["inventory"])
        change = run(private, "change", dict(base, mig_config=NEW_LAYOUT))
        steps = per_host_steps(change)
        floor = measure_floor(info, "a100-00", [NEW_LAYOUT, OLD_LAYOUT], floor_configs())
    finally:
        hosts.down(lab_dir)
    summary = {}
    for step, _tasks in STEPS:
        values = [host[step] for host in steps.values() if step in host]
        if values:
            summary[step] = {"hosts": len(values), "median_s": statistics.median(values), "max_s": max(values),
                             "sum_s": sum(values), "floor_s": floor.get(step)}
    return {"hosts": size, "converge_s": converge, "ping_s": ping, "change_s": change.wall_s,
            "ratio_change_to_ping": change.wall_s / ping, "steps": summary, "per_host": steps,
            "load1": os.getloadavg()[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (job artifacts) and say where")
    args = parser.parse_args()
    helm = tools.ensure_helm(os.path.join(REPO, ".cache"))
    workdir = tempfile.mkdtemp(prefix="gpufleet-bench-change-")
    results = []
    try:
        for size in args.sizes:
            results.append(measure(size, helm, workdir))
            print("measured %d hosts: change %.1fs, ping %.1fs" % (size, results[-1]["change_s"], results[-1]["ping_s"]),
                  flush=True)
    except BaseException:
        print("kept for inspection: %s (job artifacts under job-N/artifacts)" % workdir, file=sys.stderr)
        raise
    if args.keep:
        print("kept: %s (job artifacts under job-N/artifacts)" % workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    for row in results:
        print("\n%d hosts: change %.1f s = %.1fx ping (%.1f s); converge %.1f s; load %.1f" % (
            row["hosts"], row["change_s"], row["ratio_change_to_ping"], row["ping_s"], row["converge_s"], row["load1"]))
        print("%-32s %6s %9s %9s %9s %9s" % ("step", "hosts", "median s", "max s", "sum s", "floor s"))
        for step, figures in row["steps"].items():
            floor = "-" if figures["floor_s"] is None else "%.2f" % figures["floor_s"]
            print("%-32s %6d %9.2f %9.2f %9.1f %9s" % (step, figures["hosts"], figures["median_s"], figures["max_s"],
                                                       figures["sum_s"], floor))
    print(json.dumps({"benchmark": "mig_change", "nproc": os.cpu_count(),
                      "results": [{k: v for k, v in r.items() if k != "per_host"} for r in results]}))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
