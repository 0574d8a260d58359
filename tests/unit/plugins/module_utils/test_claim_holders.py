"""On a DRA node the pods that hold a GPU are read from ResourceClaims (issue 38): each allocated
device mapped to its GPU through the node's ResourceSlices (uuid, parentUUID)."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu import _kubelet_devices as kd
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_drain_scope as ds

NODE = "dra-0"


def slice_(node=NODE, driver="gpu.nvidia.com"):
    return {"spec": {"driver": driver, "nodeName": node, "pool": {"name": node}, "devices": [
        {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-0"}}},
        {"name": "gpu-1-mig-9-0",
         "attributes": {"type": {"string": "mig"}, "uuid": {"string": "MIG-a"}, "parentUUID": {"string": "GPU-1"}}},
        {"name": "gpu-1-mig-19-5-1", "attributes": {"type": {"string": "mig"}, "parentUUID": {"string": "GPU-1"}}}]}}


def claim(name, device, pod_uid, pool=NODE, driver="gpu.nvidia.com"):
    return {"metadata": {"namespace": "w", "name": name}, "status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": pod_uid}]}}


def gpus():
    return [{"index": 0, "uuid": "GPU-0", "mig": {"current": False, "instances": []}},
            {"index": 1, "uuid": "GPU-1", "mig": {"current": True, "instances": [
                {"uuid": "MIG-a", "compute_instances": [{"uuid": "MIG-a"}]}]}}]


def test_claims_map_to_their_gpus_through_the_slices():
    holders = kd.claim_holders([claim("c0", "gpu-0", "u0"), claim("c1", "gpu-1-mig-9-0", "u1"),
                                claim("c2", "gpu-1-mig-19-5-1", "u2")], [slice_()], NODE)
    per_gpu, unknown = kd.holders_by_gpu(holders, kd.device_gpu_map(gpus()))
    assert unknown == []
    assert {i: sorted(h.pod_uid for h in found) for i, found in per_gpu.items()} == {0: ["u0"], 1: ["u1", "u2"]}
    assert holders[0].container == "claim w/c0"


def test_unallocated_unreserved_and_other_drivers_hold_nothing():
    unreserved = claim("c", "gpu-0", "u")
    unreserved["status"]["reservedFor"] = []
    assert kd.claim_holders([{"metadata": {}, "status": {}}, unreserved, claim("n", "nic-0", "u", driver="nic.example.com")],
                            [slice_()], NODE) == []


def test_another_nodes_device_is_not_ours_and_a_stale_device_drains_the_node():
    assert kd.claim_holders([claim("c", "gpu-0", "u", pool="dra-1")], [slice_(), slice_(node="dra-1")], NODE) == []
    stale = kd.claim_holders([claim("c", "gpu-7", "u")], [slice_()], NODE)
    decision = ds.decide("gpu", [{"index": 1, "model": "H100-80GB", "layout_change": True}], gpus(), stale,
                         "nvidia-mig-parted", False)
    assert decision.scope == "node" and "dra-0/gpu-7" in decision.reason


def test_the_decision_over_claims_evicts_the_pods_of_the_changing_gpu():
    holders = kd.claim_holders([claim("c0", "gpu-0", "u0"), claim("c1", "gpu-1-mig-9-0", "u1")], [slice_()], NODE)
    decision = ds.decide("gpu", [{"index": 1, "model": "H100-80GB", "layout_change": True}], gpus(), holders,
                         "nvidia-mig-parted", False)
    assert (decision.scope, decision.evict, decision.keep) == ("gpu", ("u1",), ("u0",))
