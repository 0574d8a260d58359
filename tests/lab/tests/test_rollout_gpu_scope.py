"""Issue 38: a MIG change on one GPU evicts only the pods of that GPU (gpufleet_mig_drain_scope: gpu).

The issue's scenario: a host with two H100s, each held by a running pod of a ReplicaSet; the inventory
changes GPU 1 only (MIG off -> seven 1g.10gb, GPU 0 stays a whole GPU). The rollout reads the kubelet's
device checkpoint on the host (the lab kubelet writes it, gpulab/cluster/devicecheckpoint.py), evicts
the pod that holds GPU 1, applies the layout, and ends with the node schedulable and advertising one
whole GPU plus GPU 1's MIG devices, while the pod on GPU 0 keeps running: same uid, no restart.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Any, Dict, Iterator

import pytest

from gpulab import gpustate, hosts

from labtools import FAST_ENV, environ, wait_until
from rollout_lab import WORK_NS, RolloutLab, flat

pytestmark = pytest.mark.lab_hosts

MIG_CONFIGS = {
    "two-whole": [{"devices": "all", "mig-enabled": False}],
    "gpu1-split": [{"devices": [0], "mig-enabled": False},
                   {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
}
OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer", "uid": "rs-trainer-uid"}


@contextlib.contextmanager
def two_gpu_lab(lab_dir: str) -> Iterator[RolloutLab]:
    """flt-0 with two whole H100s, converged by site.yml (also test_rollout_dra_gpu_scope.py's start)."""
    with environ(FAST_ENV):
        info = hosts.up(lab_dir, [hosts.parse_host_spec("flt-0=H100-80GB:2@gpu_hosts")], cluster=True,
                        first_address=os.environ.get("GPUFLEET_TEST_LAB_ADDRESS", "127.0.10.2"))
    lab = RolloutLab(lab_dir, info)
    try:
        result = lab.play("site.yml", mig_config="two-whole", mig_configs=MIG_CONFIGS)
        assert result.returncode == 0, flat(result.stdout + result.stderr)[-4000:]
        yield lab
    finally:
        hosts.down(lab_dir)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with two_gpu_lab(str(tmp_path_factory.mktemp("gpuscopelab"))) as lab:
        yield lab


def create_trainer(lab, name: str, spec: Dict[str, Any]) -> None:
    """A pod of the ReplicaSet ``trainer`` in the work namespace, its container asking what ``spec`` adds."""
    lab.k8s.ensure_namespace(WORK_NS)
    spec = dict(spec)
    container = {"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "command": ["sleep", "infinity"],
                 "resources": spec.pop("resources")}
    lab.k8s.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": WORK_NS, "labels": {"app": "trainer"}, "ownerReferences": [dict(OWNER, controller=True)]},
        "spec": dict(spec, terminationGracePeriodSeconds=0, containers=[container])})


def running_pod(lab, name: str):
    """The pod once it runs (None before), for wait_until."""
    pod = lab.k8s.get("Pod", name, WORK_NS) or {}
    return pod if (pod.get("status") or {}).get("phase") == "Running" else None


def start_trainer(lab, name):
    create_trainer(lab, name, {"nodeName": "flt-0", "resources": {"limits": {"nvidia.com/gpu": 1}}})
    return wait_until(name + " running", lambda: running_pod(lab, name), 30)


def capacity(lab):
    status = (lab.k8s.get("Node", "flt-0") or {}).get("status") or {}
    return {k: int(v) for k, v in (status.get("capacity") or {}).items() if k.startswith("nvidia.com/")}


def test_one_gpus_change_evicts_only_its_pod(fleet):
    assert capacity(fleet).get("nvidia.com/gpu") == 2
    pods = {name: start_trainer(fleet, name) for name in ("trainer-a", "trainer-b")}
    uuids = [gpu.uuid for gpu in sorted(gpustate.load(fleet.hosts["flt-0"]["state_file"]).gpus, key=lambda g: g.index)]
    on_gpu = {}
    for name, pod in pods.items():
        device = pod["metadata"]["annotations"]["lab.gpufleet.io/allocated-devices"].split("=")[1]
        on_gpu[uuids.index(device)] = pod
    kept, moved = on_gpu[0], on_gpu[1]

    argv = fleet.argv("rollout.yml", dict(mig_config="gpu1-split", mig_configs=MIG_CONFIGS, gpufleet_mig_drain_scope="gpu"), None)
    check = subprocess.run(argv + ["--check"], capture_output=True, text=True, check=False, env=fleet.env(), timeout=600)  # noqa: S603
    check_out = flat(check.stdout + check.stderr)
    assert check.returncode == 0, check_out[-4000:]
    assert "drain scope gpu (only GPU(s) 1 change)" in check_out and moved["metadata"]["uid"] in check_out, check_out[-4000:]
    assert all(fleet.k8s.get("Pod", p["metadata"]["name"], WORK_NS) for p in pods.values())  # check mode evicted nothing

    result = fleet.play("rollout.yml", mig_config="gpu1-split", mig_configs=MIG_CONFIGS, gpufleet_mig_drain_scope="gpu")
    output = flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-6000:]
    assert "drain scope gpu (only GPU(s) 1 change)" in output, output[-6000:]
    assert moved["metadata"]["uid"] in output  # the message names the evicted pod's UID and its device

    now = fleet.k8s.get("Pod", kept["metadata"]["name"], WORK_NS)
    assert now is not None and now["metadata"]["uid"] == kept["metadata"]["uid"]
    assert now["status"]["phase"] == "Running" and not now["metadata"].get("deletionTimestamp")
    assert [c.get("restartCount", 0) for c in now["status"]["containerStatuses"]] == [0]
    assert fleet.k8s.get("Pod", moved["metadata"]["name"], WORK_NS) is None
    assert capacity(fleet).get("nvidia.com/gpu") == 1 and capacity(fleet).get("nvidia.com/mig-1g.10gb") == 7, capacity(fleet)
    assert fleet.node("flt-0") == {"unschedulable": False, "annotation": None}


def test_a_failure_leaves_the_node_cordoned_with_the_reason_and_a_rerun_finishes(fleet):
    """Runs after the change above: GPU 1 back to a whole GPU, while a process outside Kubernetes holds
    GPU 1. The busy check (the changing GPUs only) refuses; the node stays cordoned, saying why; the pod
    on GPU 0 was never evicted. Once the process is gone, the same run finishes."""
    state = fleet.hosts["flt-0"]["state_file"]
    kept = [pod for pod in fleet.k8s.list("Pod", namespace=WORK_NS) if (pod.get("status") or {}).get("phase") == "Running"]
    assert len(kept) == 1, kept
    gpu1 = [gpu for gpu in state_gpus(state) if gpu.index == 1][0]
    instance = gpu1.gpu_instances[0]
    pid = gpustate.add_process(state, 1, None, "stray", 64, instance.gi_id, instance.compute_instances[0].ci_id)
    try:
        failed = fleet.play("rollout.yml", mig_config="two-whole", mig_configs=MIG_CONFIGS, gpufleet_mig_drain_scope="gpu")
        output = flat(failed.stdout + failed.stderr)
        assert failed.returncode != 0, output[-4000:]
        node = fleet.node("flt-0")
        assert node["unschedulable"] and node["annotation"].startswith("failed: "), node
        assert "busy" in node["annotation"] and "GPU 1" in node["annotation"], node
    finally:
        gpustate.remove_process(state, pid)
    still = fleet.k8s.get("Pod", kept[0]["metadata"]["name"], WORK_NS)
    assert still["metadata"]["uid"] == kept[0]["metadata"]["uid"] and still["status"]["phase"] == "Running"

    again = fleet.play("rollout.yml", mig_config="two-whole", mig_configs=MIG_CONFIGS, gpufleet_mig_drain_scope="gpu")
    assert again.returncode == 0, flat(again.stdout + again.stderr)[-4000:]
    assert fleet.node("flt-0") == {"unschedulable": False, "annotation": None}
    assert capacity(fleet).get("nvidia.com/gpu") == 2 and not capacity(fleet).get("nvidia.com/mig-1g.10gb"), capacity(fleet)
    after = fleet.k8s.get("Pod", kept[0]["metadata"]["name"], WORK_NS)
    assert after["metadata"]["uid"] == kept[0]["metadata"]["uid"] and after["status"]["phase"] == "Running"
    assert [c.get("restartCount", 0) for c in after["status"]["containerStatuses"]] == [0]


def state_gpus(state):
    return gpustate.load(state).gpus
