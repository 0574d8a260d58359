"""Benchmark: a no-op re-run of the mig role over a GPU lab fleet, against an ansible.builtin.ping play.

Usage (from the repository root, as root, after `make venv system-deps collection`):

    .venv/bin/python tests/bench/bench_mig_noop.py [--hosts 6] [--repeats 3] [--json FILE]

Starts a lab fleet (real sshd per host, models cycling A100-40GB, H100-80GB, H200, one GPU each),
converges every host to `all-balanced` once (not timed), then times, in the same run and
interleaved, N runs of

  ping  - a play with gather_facts: false and one ansible.builtin.ping task over all hosts
  mig   - the same hosts with the gpufleet.sharing.mig role and the same mig_config (a no-op)

and reports the median wall time of each and the ratio mig / ping (goal: at most 3x). Every mig
run must report changed=0 on every host, or the benchmark says so. --mig-verify always adds the
role's optional final gpu_facts read to every no-op run. It prints a table and a JSON
document; nothing is asserted on timings.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LAB_ROOT = os.path.join(REPO, "tests", "lab")
sys.path.insert(0, LAB_ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpulab import hosts  # noqa: E402  pylint: disable=wrong-import-position
from benchlib import failure_report  # noqa: E402  pylint: disable=wrong-import-position

MODELS = ("A100-40GB", "H100-80GB", "H200")
PING_PLAY = """- name: Ping every lab host
  hosts: lab_gpu_hosts
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""
MIG_PLAY = """- name: MIG role (no-op re-run)
  hosts: lab_gpu_hosts
  gather_facts: false
  roles:
    - role: gpufleet.sharing.mig
      vars:
        mig_config: all-balanced
        mig_verify: {verify}
"""
COMMAND = ".venv/bin/python tests/bench/bench_mig_noop.py"


def ansible_playbook():
    beside = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return beside if os.path.exists(beside) else (shutil.which("ansible-playbook") or "ansible-playbook")


def collections_path():
    build = os.path.join(REPO, ".build")
    link = os.path.join(build, "ansible_collections", "gpufleet", "sharing")
    if not os.path.lexists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.join("..", "..", ".."), link)
    return build


def run_play(inventory, playbook, forks):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORKS=str(forks), ANSIBLE_STDOUT_CALLBACK="default")
    start = time.perf_counter()
    result = subprocess.run([ansible_playbook(), "-i", inventory, playbook], capture_output=True, text=True,
                            check=False, env=env)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(failure_report("ansible-playbook %s" % playbook, result.stdout, result.stderr, result.returncode))
    recap = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", result.stdout, re.M))
    return elapsed, recap


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=6, help="lab hosts (at least 6 for the issue's figure)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each play")
    parser.add_argument("--json", help="also write the JSON report to this file")
    parser.add_argument("--mig-verify", default="changed", choices=["changed", "always", "never"],
                        help="the role's mig_verify (default: the role default, changed)")
    args = parser.parse_args()
    problem = hosts.prerequisites_problem()
    if problem:
        raise SystemExit("lab hosts cannot run here: %s" % problem)

    work = tempfile.mkdtemp(prefix="bench-mig-noop-")
    lab_dir = os.path.join(work, "lab")
    specs = ["bench%d=%s:1" % (i, MODELS[i % len(MODELS)]) for i in range(args.hosts)]
    ping_play = os.path.join(work, "ping.yml")
    mig_play = os.path.join(work, "mig.yml")
    with open(ping_play, "w") as handle:
        handle.write(PING_PLAY)
    with open(mig_play, "w") as handle:
        handle.write(MIG_PLAY.format(verify=args.mig_verify))
    timings = {"ping": [], "mig": []}
    changed_runs = []
    try:
        info = hosts.up(lab_dir, [hosts.parse_host_spec(s) for s in specs])
        inventory = info["inventory"]
        forks = max(args.hosts, 5)
        run_play(inventory, mig_play, forks)  # converge once: MIG off -> all-balanced (not timed)
        run_play(inventory, ping_play, forks)  # warm SSH control masters for both
        for _round in range(args.repeats):
            elapsed, _recap = run_play(inventory, ping_play, forks)
            timings["ping"].append(elapsed)
            elapsed, recap = run_play(inventory, mig_play, forks)
            timings["mig"].append(elapsed)
            changed_runs.append(dict((host, count) for host, count in recap.items() if count))
    finally:
        hosts.down(lab_dir)
        shutil.rmtree(work, ignore_errors=True)

    ping = statistics.median(timings["ping"])
    mig = statistics.median(timings["mig"])
    report = {
        "benchmark": "mig role no-op re-run vs ansible.builtin.ping play",
        "hosts": args.hosts,
        "models": [s.split("=")[1] for s in specs],
        "repeats": args.repeats,
        "mig_verify": args.mig_verify,
        "ping_seconds": [round(t, 3) for t in timings["ping"]],
        "mig_noop_seconds": [round(t, 3) for t in timings["mig"]],
        "ping_median_seconds": round(ping, 3),
        "mig_noop_median_seconds": round(mig, 3),
        "ratio": round(mig / ping, 2),
        "goal_ratio_at_most": 3.0,
        "mig_noop_changed_hosts": changed_runs,
        "load_average": list(os.getloadavg()),
        "command": "%s --hosts %d --repeats %d --mig-verify %s" % (COMMAND, args.hosts, args.repeats, args.mig_verify),
    }
    print("")
    print("%-28s %10s %10s %10s" % ("play (%d hosts)" % args.hosts, "median s", "min s", "max s"))
    for label, key in (("ansible.builtin.ping", "ping"), ("mig role, no-op re-run", "mig")):
        values = timings[key]
        print("%-28s %10.2f %10.2f %10.2f" % (label, statistics.median(values), min(values), max(values)))
    print("ratio mig / ping: %.2fx (goal <= 3x)%s" % (
        report["ratio"], "" if not any(changed_runs) else "  WARNING: a no-op run reported changes: %s" % changed_runs))
    print("reproduce: %s" % report["command"])
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
