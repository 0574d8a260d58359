"""Profile: where a no-op playbooks/site.yml spends its time (issue 14 #1; no timed assertions).

Usage: .venv/bin/python tests/bench/bench_site_profile.py [--hosts 6] [--top 25] [--json FILE]

A lab fleet (N SSH hosts, H100 and H200 alternating, plus the virtual cluster) is converged once;
then site.yml runs again through ansible-runner (the engine under AWX), and its job events give,
per task: the wall time from its start to the next task's start, how many hosts ran it, and how
many of those runs executed a module on the GPU host itself (an SSH round trip) or on the
controller (delegated / localhost: a local Python process). The lab's /lab/metrics gives the API
requests of the whole run. Printed: the top tasks by wall time, and per host the remote and local
module executions - the figures a no-op has to shed to come near the cost of a ping.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime
from typing import Any, Dict, List

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
sys.path.insert(0, os.path.join(REPO, "tests", "lab", "tests"))
sys.path.insert(0, HERE)

import ansible_runner  # noqa: E402  pylint: disable=wrong-import-position
from gpulab import hosts, tools  # noqa: E402  pylint: disable=wrong-import-position
from gpulab.cluster import access, server  # noqa: E402  pylint: disable=wrong-import-position

import labtools  # noqa: E402  pylint: disable=wrong-import-position
from bench_site_noop import team_namespaces  # noqa: E402  pylint: disable=wrong-import-position

# Tasks that are controller-side by nature (no module runs on the GPU host).
_LOCAL_ACTIONS = {"set_fact", "ansible.builtin.set_fact", "debug", "ansible.builtin.debug", "assert", "ansible.builtin.assert",
                  "include_role", "ansible.builtin.include_role", "include_tasks", "ansible.builtin.include_tasks",
                  "meta", "ansible.builtin.meta", "fail", "ansible.builtin.fail", "set_stats", "ansible.builtin.set_stats",
                  "validate_argument_spec", "ansible.builtin.validate_argument_spec", "group_by", "ansible.builtin.group_by"}


def fleet(size: int) -> List[str]:
    return [("h100-%02d=H100-80GB:2@h100_training,gpu_hosts" if i % 2 == 0 else "h200-%02d=H200:1@h200_shared,gpu_hosts") % i
            for i in range(size)]


def job(private: str, info: Dict[str, Any], helm: str) -> None:
    for sub in ("project", "inventory", "env"):
        os.makedirs(os.path.join(private, sub), exist_ok=True)
    with open(os.path.join(private, "project", "site.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump([{"name": "site", "ansible.builtin.import_playbook": "gpufleet.sharing.site"}], handle)
    shutil.copy(info["inventory"], os.path.join(private, "inventory", "hosts.yml"))
    shutil.copytree(os.path.join(REPO, "inventories", "lab", "group_vars"), os.path.join(private, "inventory", "group_vars"))
    with open(os.path.join(private, "env", "extravars"), "w", encoding="utf-8") as handle:
        yaml.safe_dump({"gpufleet_kubeconfig": info["cluster"]["kubeconfig"],
                        "gpu_operator_chart_ref": os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin"),
                        "gpu_operator_helm_binary": helm}, handle)
    with open(os.path.join(private, "env", "envvars"), "w", encoding="utf-8") as handle:
        yaml.safe_dump({"ANSIBLE_COLLECTIONS_PATH": labtools.BUILD, "ANSIBLE_FORKS": "10"}, handle)


def run(private: str, ident: str) -> Any:
    with labtools.environ({"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}):
        result = ansible_runner.run(private_data_dir=private, playbook="site.yml", ident=ident, quiet=True)
    if result.rc != 0:
        with open(os.path.join(result.config.artifact_dir, "stdout"), encoding="utf-8") as handle:
            raise SystemExit("site.yml failed (%s):\n%s" % (ident, handle.read()[-3000:]))
    return result


def profile(result: Any) -> Dict[str, Any]:
    events = sorted(result.events, key=lambda e: e["counter"])
    starts = [e for e in events if e["event"] in ("playbook_on_task_start", "playbook_on_stats")]
    tasks: List[Dict[str, Any]] = []
    for begin, end in zip(starts, starts[1:]):
        if begin["event"] != "playbook_on_task_start":
            continue
        data = begin["event_data"]
        runs = [e for e in events if e["event"] in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
                and e["event_data"].get("task_uuid") == data.get("task_uuid")]
        local = [e for e in runs if _is_local(e)]
        tasks.append({"task": data.get("task"), "action": data.get("task_action"), "play": data.get("play"),
                      "seconds": (datetime.fromisoformat(end["created"]) - datetime.fromisoformat(begin["created"])).total_seconds(),
                      "hosts": len(runs), "remote": len(runs) - len(local), "local": len(local)})
    return {"tasks": tasks, "wall": (datetime.fromisoformat(starts[-1]["created"]) - datetime.fromisoformat(events[0]["created"])).total_seconds()}


def _is_local(event: Dict[str, Any]) -> bool:
    data = event["event_data"]
    if data.get("task_action") in _LOCAL_ACTIONS or data.get("host") == "localhost":
        return True
    res = data.get("res") or {}
    items = [res] + [r for r in res.get("results") or [] if isinstance(r, dict)]  # a loop: per item
    return any(item.get("_ansible_delegated_vars") for item in items)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=6)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    helm = tools.ensure_helm(os.path.join(REPO, ".cache"))
    workdir = tempfile.mkdtemp(prefix="gpufleet-profile-")
    lab_dir = os.path.join(workdir, "lab")
    try:
        with labtools.environ(labtools.FAST_ENV):
            info = hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in fleet(args.hosts)], cluster=True,
                            first_address="127.0.15.2")
        access.create_namespaces(lab_dir, team_namespaces())
        private = os.path.join(workdir, "job")
        job(private, info, helm)
        run(private, "converge")
        server.metrics(os.path.dirname(info["cluster"]["kubeconfig"]), reset=True)
        result = profile(run(private, "noop"))
        api = server.metrics(os.path.dirname(info["cluster"]["kubeconfig"]))["total"]
    finally:
        hosts.down(lab_dir)
        shutil.rmtree(workdir, ignore_errors=True)
    tasks = result["tasks"]
    remote, local = sum(t["remote"] for t in tasks), sum(t["local"] for t in tasks)
    print("%-70s %8s %6s %7s %6s" % ("TASK (play)", "wall s", "hosts", "remote", "local"))
    for task in sorted(tasks, key=lambda t: -t["seconds"])[:args.top]:
        label = ("%s (%s)" % (task["task"], task["play"]))[:70]
        print("%-70s %8.2f %6d %7d %6d" % (label, task["seconds"], task["hosts"], task["remote"], task["local"]))
    figures = (result["wall"], len(tasks), remote / args.hosts, local / args.hosts, api, api / args.hosts)
    print("no-op site.yml: %.1f s wall, %d tasks; per host: %.1f module runs on the GPU host, %.1f on the controller; "
          "%d API requests (%.1f per host)" % figures)
    summary = {"benchmark": "site_noop_profile", "hosts": args.hosts, "wall_s": result["wall"], "tasks": len(tasks),
               "remote_per_host": remote / args.hosts, "local_per_host": local / args.hosts, "api_requests": api}
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(dict(summary, task_rows=tasks), handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
