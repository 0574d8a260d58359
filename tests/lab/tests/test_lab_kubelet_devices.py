"""The lab's kubelet frees a removed pod's devices before it admits the next pod, as the real one does.

The kubelet's device manager frees the devices of every pod that is no longer active before it
allocates devices to a new pod (kubernetes pkg/kubelet/cm/devicemanager/manager.go:
``UpdateAllocatedDevices``, called from the allocation of a container's devices; ``activePods``
leaves out a pod whose API object is gone). A pod deleted with a grace period of 0 is gone from the
API at once, so a pod bound to the same node right after it gets its device. gpu_verify does exactly
this with a pod an interrupted run left behind (tests/lab/tests/test_verify_interrupted.py).
"""

from __future__ import annotations

import pytest

from labtools import one_gpu_node, wait_until


@pytest.fixture
def lab(tmp_path):
    with one_gpu_node(str(tmp_path), "gpu-h", "H100-80GB") as running:
        yield running


def _pod(name, seconds):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": {"lab.gpufleet.io/runtime-seconds": seconds}},
            "spec": {"nodeName": "gpu-h", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}}


def _phase(store, name):
    return (store.get("v1/pods", "default", name).get("status") or {}).get("phase")


@pytest.mark.parametrize("turn", range(3))
def test_a_pod_bound_right_after_a_forced_deletion_gets_the_freed_device(lab, turn):
    store = lab.store
    old, new = "old-%d" % turn, "new-%d" % turn
    store.create("v1/pods", _pod(old, "600"))
    wait_until("%s running" % old, lambda: _phase(store, old) == "Running")
    store.delete("v1/pods", "default", old, grace_period_seconds=0)
    store.create("v1/pods", _pod(new, "0.2"))
    wait_until("%s admitted and finished" % new, lambda: _phase(store, new) in ("Succeeded", "Failed"))
    status = store.get("v1/pods", "default", new)["status"]
    assert status["phase"] == "Succeeded", (status.get("reason"), status.get("message"))
