"""Benchmark: the floor of a no-op site.yml - what a playbook of its shape costs with no cluster work at all.

Usage (from the repository root, after `make venv system-deps collection`):

    .venv/bin/python tests/bench/bench_playbook_floor.py [--hosts 5] [--tasks 85] [--repeats 3] [--json FILE]

A no-op `site.yml` must read every GPU host once (gpu_facts) and then runs a fixed number of task
entries on the controller (`--tasks`: what `bench_site_profile.py` counts for a no-op run, most of
them run once or skipped). This starts N lab hosts (no cluster) and times, interleaved, the median of
`--repeats` runs of

  ping      - one ansible.builtin.ping task over the hosts (the baseline of every no-op benchmark)
  skeleton  - the same number of task entries as the no-op, each a trivial set_fact run once
  floor     - the one gpu_facts read per host, then the skeleton's other task entries

and prints each as a ratio to the ping. `floor / ping` is what a no-op of that many tasks costs
before any cluster module runs: the part of issue 26's targets that the playbook's shape decides.
No timed assertions: a table and a JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
sys.path.insert(0, HERE)

from gpulab import hosts  # noqa: E402  pylint: disable=wrong-import-position
from bench_mig_noop import run_play  # noqa: E402  pylint: disable=wrong-import-position

COMMAND = ".venv/bin/python tests/bench/bench_playbook_floor.py"
READ_TASK = """    - name: Read the host's GPUs
      gpufleet.sharing.gpu_facts:
        gather_profiles: false
        gather_processes: false
"""


def play(name: str, tasks: str) -> str:
    return "- name: %s\n  hosts: lab_gpu_hosts\n  gather_facts: false\n  tasks:\n%s" % (name, tasks)


def trivial(count: int) -> str:
    return "".join("    - name: Task %d\n      ansible.builtin.set_fact:\n        floor_%d: \"{{ ansible_play_hosts_all | length }}\"\n"
                   "      run_once: true\n" % (i, i) for i in range(count))


def plays(tasks: int) -> dict:
    return {"ping": play("Ping", "    - name: Ping\n      ansible.builtin.ping:\n"),
            "skeleton": play("Skeleton", trivial(tasks)),
            "floor": play("Floor", READ_TASK + trivial(tasks - 1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=85, help="task entries of the no-op run (bench_site_profile.py)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the JSON report to this file")
    args = parser.parse_args()
    problem = hosts.prerequisites_problem()
    if problem:
        raise SystemExit("lab hosts cannot run here: %s" % problem)
    work = tempfile.mkdtemp(prefix="bench-floor-")
    lab_dir = os.path.join(work, "lab")
    files = {}
    for name, text in plays(args.tasks).items():
        files[name] = os.path.join(work, name + ".yml")
        with open(files[name], "w", encoding="utf-8") as handle:
            handle.write(text)
    timings = {name: [] for name in files}
    try:
        models = ("H100-80GB:2", "H200:1")
        info = hosts.up(lab_dir, [hosts.parse_host_spec("floor%d=%s" % (i, models[i % 2])) for i in range(args.hosts)])
        forks = 10
        for name in files:  # warm: SSH control masters, the module payload cache
            run_play(info["inventory"], files[name], forks)
        for _round in range(args.repeats):
            for name in files:
                timings[name].append(run_play(info["inventory"], files[name], forks)[0])
    finally:
        hosts.down(lab_dir)
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print("%d hosts, %d task entries, median of %d (%s)" % (args.hosts, args.tasks, args.repeats, COMMAND))
    print("%-10s %8s %8s" % ("play", "s", "x ping"))
    for name, seconds in medians.items():
        print("%-10s %8.2f %8.2f" % (name, seconds, seconds / medians["ping"]))
    report = {"benchmark": "playbook_floor", "hosts": args.hosts, "tasks": args.tasks, "repeats": args.repeats,
              "median_s": medians, "ratio_to_ping": {name: s / medians["ping"] for name, s in medians.items()},
              "runs_s": timings, "load1": os.getloadavg()[0]}
    print(json.dumps(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
