"""gpu_verify killed mid-run (SIGTERM, as AWX cancelling a job) leaves no pod that outlives the next run.

One H100 node with one GPU. A first run's pod is made to run for minutes (lab annotation) and the
module process is sent SIGTERM while the pod holds the node's only GPU. The orphan keeps its run
label and an activeDeadlineSeconds; the next run deletes it first, so its own pod gets the GPU, and
leaves no verification pod behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from labtools import BUILD, one_gpu_node, run_module, wait_until

MANAGED = "app.kubernetes.io/managed-by=gpufleet.sharing"
PLAN = {"gpu-h": [{"model": "H100-80GB", "count": 1, "product": "NVIDIA H100 80GB HBM3"}]}


@pytest.fixture
def lab(tmp_path):
    with one_gpu_node(str(tmp_path), "gpu-h", "H100-80GB") as running:
        yield running


def verify_args(lab, run_id, **extra):
    args = {"kubeconfig": lab.kubeconfig, "configs": [], "node_gpus": PLAN, "run_id": run_id, "pod_timeout": 30,
            "poll_interval": 0.2}
    args.update(extra)
    return args


def start_module(tmp_path, args):
    """gpu_verify as Ansible runs it (its own process), so that it can be killed."""
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(args, _ansible_tmpdir=str(tmp_path))}))
    return subprocess.Popen([sys.executable, "-m", "ansible_collections.gpufleet.sharing.plugins.modules.gpu_verify",
                             str(path)], env=dict(os.environ, PYTHONPATH=BUILD),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def verify_pods(lab):
    return lab.store.items("v1/pods", "gpufleet-verify", label_selector=MANAGED)


def test_sigterm_leaves_an_orphan_that_the_next_run_removes(lab, tmp_path):
    slow = {"lab.gpufleet.io/runtime-seconds": "600"}
    proc = start_module(tmp_path, verify_args(lab, "first", pod_timeout=120, pod_annotations=slow))
    try:
        wait_until("the first run's pod running", lambda: [p for p in verify_pods(lab)
                                                           if (p.get("status") or {}).get("phase") == "Running"])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    orphans = verify_pods(lab)
    assert [p["metadata"]["labels"]["gpufleet.sharing/verify-run"] for p in orphans] == ["first"]
    spec = orphans[0]["spec"]
    assert spec["activeDeadlineSeconds"] == 120 + 60
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True

    start = time.monotonic()
    result = run_module("gpu_verify", verify_args(lab, "second"), str(tmp_path))
    assert not result.get("failed"), result.get("msg")
    assert result["ok"] is True and result["removed_leftover_pods"] == [orphans[0]["metadata"]["name"]]
    assert [p["outcome"] for p in result["report"]["pods"]] == ["Succeeded"]
    assert time.monotonic() - start < 30
    wait_until("no verification pod left", lambda: not verify_pods(lab), timeout=10)


def test_pods_of_another_run_on_another_node_are_left_alone(lab, tmp_path):
    """One rollout batch verifies its nodes in parallel (one gpu_verify run per node): a run removes
    leftovers only on the nodes it verifies, never another run's pods elsewhere."""
    other = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "gpufleet-verify-other-gpu-x", "namespace": "gpufleet-verify",
                          "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing",
                                     "gpufleet.sharing/verify-run": "parallel"}},
             "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-x"},
                      "containers": [{"name": "probe", "image": "busybox"}]}}
    lab.store.create("v1/namespaces", {"metadata": {"name": "gpufleet-verify"}})
    lab.store.create("v1/pods", other)
    result = run_module("gpu_verify", verify_args(lab, "mine"), str(tmp_path))
    assert not result.get("failed"), result.get("msg")
    assert result["ok"] is True and result["removed_leftover_pods"] == []
    assert [p["metadata"]["name"] for p in verify_pods(lab)] == ["gpufleet-verify-other-gpu-x"]
