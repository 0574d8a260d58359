"""The lab kubelet keeps the device manager's checkpoint of which container holds which device.

The real kubelet writes /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint after each
allocation and after it frees an inactive pod's devices (kubernetes pkg/kubelet/cm/devicemanager:
checkpoint/checkpoint.go, manager.go); a device-plugin restart re-registers the devices and leaves
the running pods' entries as they were. The collection reads this file to find the pods that hold a
GPU (issue 38; docs/reference/kubelet-devices.md). gpulab/cluster/devicecheckpoint.py is the writer.
"""

from __future__ import annotations

import json
import os

import pytest

from gpulab import gpustate
from gpulab.cluster import devicecheckpoint
from gpulab.cluster.devicemodel import Device
from labtools import one_gpu_node, wait_until

NODE = "gpu-h"


@pytest.fixture
def lab(tmp_path):
    with one_gpu_node(str(tmp_path), NODE, "H100-80GB", count=2) as running:
        yield running, running.states[NODE]


def _pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": NODE, "containers": [{"name": "train", "image": "busybox",
                                                       "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def _running(store, name):
    pod = store.get("v1/pods", "default", name)
    return pod if (pod.get("status") or {}).get("phase") == "Running" else None


def _entries(state):
    path = devicecheckpoint.path_for(state)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _held(state):
    found = _entries(state)
    if not found:
        return {}
    return {(e["PodUID"], e["ContainerName"], e["ResourceName"]): e["DeviceIDs"]["-1"]
            for e in found["Data"]["PodDeviceEntries"]}


def test_the_checkpoint_names_each_pods_gpu_and_outlives_a_device_plugin_restart(lab):
    running, state = lab
    store = running.store
    uuids = sorted(gpu.uuid for gpu in gpustate.load(state).gpus)
    for name in ("a", "b"):
        store.create("v1/pods", _pod(name))
    pods = {name: wait_until(name + " running", lambda name=name: _running(store, name)) for name in ("a", "b")}
    uids = {name: pod["metadata"]["uid"] for name, pod in pods.items()}
    held = wait_until("both pods in the checkpoint", lambda: len(_held(state)) == 2 and _held(state))
    assert sorted(ids[0] for ids in held.values()) == uuids
    for name, pod in pods.items():
        annotated = pod["metadata"]["annotations"]["lab.gpufleet.io/allocated-devices"]
        assert held[(uids[name], "train", "nvidia.com/gpu")] == [annotated.split("=")[1]]
    assert _entries(state)["Data"]["RegisteredDevices"] == {"nvidia.com/gpu": uuids}

    plugin = [p for p in store.items("v1/pods") if p["metadata"]["name"].startswith("nvidia-device-plugin")]
    assert plugin, "the device plugin pod runs"
    store.delete("v1/pods", "gpu-operator", plugin[0]["metadata"]["name"], grace_period_seconds=0)
    wait_until("device plugin back", lambda: any(
        p["metadata"]["name"].startswith("nvidia-device-plugin") and p["metadata"]["uid"] != plugin[0]["metadata"]["uid"]
        and (p.get("status") or {}).get("phase") == "Running" for p in store.items("v1/pods")))
    assert _held(state) == held

    store.delete("v1/pods", "default", "a", grace_period_seconds=0)
    wait_until("a's entry gone", lambda: set(_held(state)) == {(uids["b"], "train", "nvidia.com/gpu")})


def test_replicas_and_mig_devices_keep_their_plugin_ids_and_claims_stay_out():
    replica = Device("GPU-aaaa::3", "nvidia.com/gpu", 0, "H100", "GPU-aaaa", replica=3)
    mig = Device("MIG-bbbb", "nvidia.com/mig-1g.10gb", 1, "H100", "GPU-cccc", "1g.10gb", "MIG-bbbb")
    claimed = Device("GPU-dddd", "claim:gpu-0", 2, "H100", "GPU-dddd")
    built = devicecheckpoint.build([("uid-1", "main", [replica, mig, claimed])],
                                   {"nvidia.com/gpu": [replica], "nvidia.com/mig-1g.10gb": [mig]})
    entries = built["Data"]["PodDeviceEntries"]
    assert [(e["ResourceName"], e["DeviceIDs"]) for e in entries] == [
        ("nvidia.com/gpu", {"-1": ["GPU-aaaa::3"]}), ("nvidia.com/mig-1g.10gb", {"-1": ["MIG-bbbb"]})]
    assert built["Checksum"] == devicecheckpoint.fnv1a32(
        json.dumps(built["Data"], sort_keys=True, separators=(",", ":")).encode("utf-8"))
