"""Benchmark: GPU capacity lost to one GPU's MIG change on an eight-GPU node, per drain scope (issue 38).

Usage: GPUFLEET_TEST_LAB_ADDRESS=127.0.x.y .venv/bin/python tests/bench/bench_disruption.py [--json FILE]

One lab host with eight H100s (an HGX H100 board), eight whole GPUs, each held by a running pod of a
ReplicaSet (the lab's kubelet gives each its own GPU). The inventory then changes GPU 7 only (to
seven 1g.10gb; GPUs 0-6 stay whole), once with `gpufleet_mig_drain_scope: gpu` and once with `node`,
each from the same starting state (the other scope's run is undone first, not measured).

Reported per scope: the pods evicted, the rollout's wall time, and the GPU-minutes of capacity lost,
counted as pods evicted x the rollout's wall time (each evicted pod's GPU is taken from it at the drain
and offered again at the uncordon, both inside the run: an upper bound per pod). Expected: the `gpu`
scope costs about 1/8 of the `node` scope. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, ".build"))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
sys.path.insert(0, os.path.join(REPO, "tests", "lab", "tests"))

from gpulab import hosts  # noqa: E402  pylint: disable=wrong-import-position
from labtools import FAST_ENV, environ  # noqa: E402  pylint: disable=wrong-import-position
from rollout_lab import WORK_NS, RolloutLab, flat  # noqa: E402  pylint: disable=wrong-import-position
from test_rollout_gpu_scope import start_trainer  # noqa: E402  pylint: disable=wrong-import-position

GPUS = 8
CONFIGS = {
    "all-whole": [{"devices": "all", "mig-enabled": False}],
    "last-split": [{"devices": list(range(GPUS - 1)), "mig-enabled": False},
                   {"devices": [GPUS - 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
}


def play(lab, config, scope):
    started = time.monotonic()
    result = lab.play("rollout.yml", mig_config=config, mig_configs=CONFIGS, gpufleet_mig_drain_scope=scope)
    if result.returncode != 0:
        raise SystemExit("rollout failed: " + flat(result.stdout + result.stderr)[-3000:])
    return time.monotonic() - started


def fill(lab):
    for pod in lab.k8s.list("Pod", namespace=WORK_NS):
        lab.k8s.delete("Pod", pod["metadata"]["name"], namespace=WORK_NS)
    return {pod["metadata"]["uid"]: name for name, pod in
            ((name, start_trainer(lab, name)) for name in ("job-%d" % i for i in range(GPUS)))}


def measure(lab, scope):
    play(lab, "all-whole", "node")  # the starting state (not measured)
    uids = fill(lab)
    seconds = play(lab, "last-split", scope)
    left = {pod["metadata"]["uid"] for pod in lab.k8s.list("Pod", namespace=WORK_NS)}
    evicted = len([uid for uid in uids if uid not in left])
    return {"scope": scope, "pods": len(uids), "evicted": evicted, "rollout_seconds": round(seconds, 1),
            "gpu_minutes_lost": round(evicted * seconds / 60.0, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    lab_dir = tempfile.mkdtemp(prefix="bench-disruption-")
    with environ(FAST_ENV):
        info = hosts.up(lab_dir, [hosts.parse_host_spec("flt-0=H100-80GB:%d@gpu_hosts" % GPUS)], cluster=True,
                        first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.10.2"))
    try:
        lab = RolloutLab(lab_dir, info)
        result = lab.play("site.yml", mig_config="all-whole", mig_configs=CONFIGS)
        if result.returncode != 0:
            raise SystemExit("site.yml failed: " + flat(result.stdout + result.stderr)[-3000:])
        rows = [measure(lab, scope) for scope in ("gpu", "node")]
    finally:
        hosts.down(lab_dir)
    for row in rows:
        print("%(scope)-5s pods %(pods)d evicted %(evicted)d rollout %(rollout_seconds)6.1fs "
              "GPU-minutes lost %(gpu_minutes_lost)6.2f" % row)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
