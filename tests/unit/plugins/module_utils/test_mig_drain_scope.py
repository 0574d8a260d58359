"""The drain scope of a host MIG change (issue 38): which GPUs change, which pods to evict, and when
the whole node must be drained instead, with the reason."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu import _kubelet_devices as kd
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_drain_scope as ds

SMI = "nvidia-smi"
PARTED = "nvidia-mig-parted"


def gpu(index, migs=()):
    instances = [{"gi_id": n, "profile": "1g.10gb", "uuid": mig,
                  "compute_instances": [{"ci_id": 0, "uuid": mig}]} for n, mig in enumerate(migs)]
    return {"index": index, "uuid": "GPU-%d" % index, "mig": {"current": bool(migs), "instances": instances}}


def change(index, mode=False, layout=False, model="H100-80GB"):
    return {"index": index, "model": model, "mode_change": mode, "layout_change": layout}


def entry(uid, ids, resource="nvidia.com/gpu", container="train", numa="-1"):
    return {"PodUID": uid, "ContainerName": container, "ResourceName": resource, "DeviceIDs": {numa: ids},
            "AllocResp": None}


def holders(*entries):
    return kd.parse_checkpoint({"Data": {"PodDeviceEntries": list(entries), "RegisteredDevices": {}}, "Checksum": 1})


EIGHT = [gpu(i) for i in range(8)]


# ------------------------------------------------------------------ the checkpoint


def test_the_checkpoint_gives_one_holder_per_device_over_every_numa_node():
    found = kd.parse_checkpoint({"Data": {"PodDeviceEntries": [
        {"PodUID": "u1", "ContainerName": "c", "ResourceName": "nvidia.com/gpu",
         "DeviceIDs": {"0": ["GPU-0"], "1": ["GPU-5", "GPU-6"]}, "AllocResp": "eHl6"}]}, "Checksum": 42})
    assert [(h.pod_uid, h.device_id) for h in found] == [("u1", "GPU-0"), ("u1", "GPU-5"), ("u1", "GPU-6")]


def test_an_empty_checkpoint_holds_nothing():
    assert kd.parse_checkpoint({"Data": {"PodDeviceEntries": None, "RegisteredDevices": None}, "Checksum": 0}) == []


@pytest.mark.parametrize("data, message", [
    ([], "no Data object"),
    ({"Data": {"PodDeviceEntries": {}}}, "PodDeviceEntries is not a list"),
    ({"Data": {"PodDeviceEntries": ["x"]}}, r"PodDeviceEntries\[0\]: not an object"),
    ({"Data": {"PodDeviceEntries": [{"PodUID": "u", "ContainerName": "c"}]}}, "ResourceName is missing"),
    ({"Data": {"PodDeviceEntries": [{"PodUID": "u", "ContainerName": "c", "ResourceName": "r", "DeviceIDs": ["a"]}]}},
     "DeviceIDs is not a map"),
    ({"Data": {"PodDeviceEntries": [{"PodUID": "u", "ContainerName": "c", "ResourceName": "r",
                                     "DeviceIDs": {"0": "GPU-0"}}]}}, r"DeviceIDs\[0\] is not a list"),
])
def test_a_checkpoint_of_another_layout_is_refused_naming_what(data, message):
    with pytest.raises(kd.CheckpointError, match=message):
        kd.parse_checkpoint(data)


@pytest.mark.parametrize("device, index", [
    ("GPU-3", 3), ("GPU-3::7", 3), ("MIG-b", 1), ("MIG-b::2", 1), ("GPU-9", None), ("MIG-zz", None)])
def test_device_ids_map_to_their_gpu_replicas_included(device, index):
    devices = kd.device_gpu_map([gpu(0), gpu(1, ["MIG-a", "MIG-b"]), gpu(3)])
    assert kd.gpu_of(device, devices) == index


# ------------------------------------------------------------------ the decision


def test_one_layout_change_of_eight_evicts_only_that_gpus_pods():
    found = holders(*[entry("pod-%d" % i, ["GPU-%d" % i]) for i in range(8)])
    decision = ds.decide("gpu", [change(i, layout=(i == 5)) for i in range(8)],
                         EIGHT, found, PARTED, nvswitch=True)
    assert decision.scope == "gpu"
    assert decision.gpus == (5,)
    assert decision.evict == ("pod-5",)
    assert decision.keep == tuple(sorted("pod-%d" % i for i in range(8) if i != 5))
    assert decision.to_dict()["why"] == {"pod-5": "container train holds GPU-5 (nvidia.com/gpu) of GPU 5"}
    assert decision.reset_gpus == ()


def test_the_issues_scenario_mig_on_for_gpu_1_on_hopper_with_the_nvidia_smi_backend():
    found = holders(entry("p0", ["GPU-0"]), entry("p1", ["GPU-1"]))
    decision = ds.decide("gpu", [change(0), change(1, mode=True, layout=True)], [gpu(0), gpu(1)], found, SMI, False)
    assert (decision.scope, decision.gpus, decision.evict, decision.keep, decision.reset_gpus) == (
        "gpu", (1,), ("p1",), ("p0",), ())


def test_the_issues_scenario_through_mig_parted_on_hopper_stays_per_gpu():
    found = holders(entry("p0", ["GPU-0"]), entry("p1", ["GPU-1"]))
    decision = ds.decide("gpu", [change(1, mode=True, layout=True)], [gpu(0), gpu(1)], found, PARTED, True)
    assert (decision.scope, decision.evict, decision.keep) == ("gpu", ("p1",), ("p0",))


def test_a_mode_change_through_mig_parted_beside_a_mig_gpu_drains_the_node_saying_why():
    found = holders(entry("p0", ["MIG-a"], "nvidia.com/mig-1g.10gb"), entry("p1", ["GPU-1"]))
    decision = ds.decide("gpu", [change(1, mode=True, layout=True)], [gpu(0, ["MIG-a"]), gpu(1)], found, PARTED, False)
    assert decision.scope == "node"
    assert "GPU 1 changes its MIG mode" in decision.reason and "GPU(s) 0 included" in decision.reason
    assert decision.evict == () and decision.gpus == (1,)


def test_an_ampere_mode_change_through_mig_parted_drains_the_node():
    decision = ds.decide("gpu", [change(1, mode=True, model="A100-40GB")], [gpu(0), gpu(1)], holders(), PARTED, False)
    assert decision.scope == "node" and "resets all GPUs" in decision.reason and "A100-40GB" in decision.reason


def test_an_ampere_mode_change_resets_that_gpu_alone_without_nvswitch():
    decision = ds.decide("gpu", [change(2, mode=True, model="A100-40GB")], [gpu(i) for i in range(4)],
                         holders(entry("p2", ["GPU-2"]), entry("p3", ["GPU-3"])), SMI, False)
    assert (decision.scope, decision.reset_gpus, decision.evict, decision.keep) == ("gpu", (2,), ("p2",), ("p3",))


def test_an_ampere_mode_change_on_an_nvswitch_host_drains_the_node():
    decision = ds.decide("gpu", [change(2, mode=True, model="A100-40GB")], EIGHT, holders(), SMI, True)
    assert decision.scope == "node" and "NVSwitch" in decision.reason


def test_a_hopper_mode_change_on_an_nvswitch_host_needs_no_reset_and_stays_per_gpu():
    decision = ds.decide("gpu", [change(2, mode=True)], EIGHT, holders(), SMI, True)
    assert (decision.scope, decision.reset_gpus) == ("gpu", ())


def test_an_unknown_model_with_a_mode_change_drains_the_node():
    decision = ds.decide("gpu", [change(0, mode=True, model=None)], [gpu(0)], holders(), SMI, False)
    assert decision.scope == "node" and "not in the catalog" in decision.reason


def test_a_layout_change_of_an_unknown_model_needs_no_reset_and_stays_per_gpu():
    decision = ds.decide("gpu", [change(0, layout=True, model=None)], [gpu(0), gpu(1)], holders(), PARTED, False)
    assert decision.scope == "gpu"


def test_mig_devices_and_replicas_are_followed_to_their_gpu():
    gpus = [gpu(0, ["MIG-a", "MIG-b"]), gpu(1, ["MIG-c"])]
    found = holders(entry("p-a", ["MIG-a"], "nvidia.com/mig-1g.10gb"), entry("p-c", ["MIG-c::1"], "nvidia.com/mig-1g.10gb"),
                    entry("p-c2", ["MIG-c::2"], "nvidia.com/mig-1g.10gb"))
    decision = ds.decide("gpu", [change(0), change(1, layout=True)], gpus, found, PARTED, True)
    assert (decision.evict, decision.keep) == (("p-c", "p-c2"), ("p-a",))


def test_a_pod_holding_devices_on_a_changing_and_an_untouched_gpu_is_evicted_not_kept():
    found = holders(entry("both", ["GPU-0", "GPU-1"]), entry("p0", ["GPU-0"], container="other"))
    decision = ds.decide("gpu", [change(1, layout=True)], [gpu(0), gpu(1)], found, PARTED, False)
    assert (decision.evict, decision.keep) == (("both",), ("p0",))


def test_a_held_device_of_no_gpu_of_the_read_drains_the_node():
    found = holders(entry("p9", ["GPU-9"]))
    decision = ds.decide("gpu", [change(0, layout=True)], [gpu(0)], found, PARTED, False)
    assert decision.scope == "node" and "GPU-9" in decision.reason and "p9" in decision.reason


def test_devices_of_other_vendors_and_resources_are_not_ours_to_judge():
    found = holders(entry("nic", ["mlx5_0"], "rdma/hca_shared_devices_a"))
    decision = ds.decide("gpu", [change(0, layout=True)], [gpu(0)], found, PARTED, False)
    assert (decision.scope, decision.evict, decision.keep) == ("gpu", (), ())


def test_the_node_scope_when_asked_evicts_through_the_whole_node_path():
    decision = ds.decide("node", [change(0, layout=True)], [gpu(0)], holders(entry("p0", ["GPU-0"])), PARTED, False)
    assert (decision.scope, decision.reason, decision.evict) == ("node", "gpufleet_mig_drain_scope is node", ())


def test_nothing_changes_nothing_to_evict():
    decision = ds.decide("gpu", [change(0)], [gpu(0)], holders(entry("p0", ["GPU-0"])), PARTED, False)
    assert (decision.scope, decision.gpus, decision.evict, decision.keep, decision.reason) == (
        "gpu", (), (), ("p0",), "no GPU changes")


def test_a_scope_that_is_neither_is_refused():
    with pytest.raises(ValueError, match="gpu, node"):
        ds.decide("rack", [], [], [], PARTED, False)


def test_a_dra_node_evicts_the_pods_whose_claims_hold_a_changing_gpus_device():
    slices = [{"spec": {"driver": kd.DRA_DRIVER, "nodeName": "n", "pool": {"name": "n"}, "devices": [
        {"name": "gpu-%d" % i, "attributes": {"uuid": {"string": "GPU-%d" % i}}} for i in (0, 1)]}}]
    claims = [{"metadata": {"namespace": "w", "name": "c%d" % i}, "status": {
        "allocation": {"devices": {"results": [{"driver": kd.DRA_DRIVER, "pool": "n", "device": "gpu-%d" % i}]}},
        "reservedFor": [{"resource": "pods", "name": "p%d" % i, "uid": "u%d" % i}]}} for i in (0, 1)]
    found = kd.claim_holders(claims, slices, "n")
    dra = ds.decide("gpu", [change(1, layout=True)], [gpu(0), gpu(1)], found, PARTED, False, gpu_backend="dra")
    assert (dra.scope, dra.evict, dra.keep) == ("gpu", ("u1",), ("u0",))
    assert dict(dra.why) == {"u1": "claim w/c1 holds GPU-1 (gpu.nvidia.com) of GPU 1"}


def test_a_claim_on_a_device_no_slice_lists_drains_the_node():
    claims = [{"metadata": {"namespace": "w", "name": "c"}, "status": {
        "allocation": {"devices": {"results": [{"driver": kd.DRA_DRIVER, "pool": "n", "device": "gpu-9"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}]
    found = kd.claim_holders(claims, [], "n")
    dra = ds.decide("gpu", [change(1, layout=True)], [gpu(0), gpu(1)], found, PARTED, False, gpu_backend="dra")
    assert dra.scope == "node" and "n/gpu-9" in dra.reason


def test_a_node_that_changes_backend_or_of_an_unknown_backend_drains_the_node():
    found = holders(entry("p0", ["GPU-0"]))
    other = ds.decide("gpu", [change(0, layout=True)], [gpu(0)], found, PARTED, False, gpu_backend="vgpu")
    assert other.scope == "node" and "'vgpu'" in other.reason
    moving = ds.decide("gpu", [change(0, layout=True)], [gpu(0)], found, PARTED, False, moves=True)
    assert moving.scope == "node" and "another GPU backend" in moving.reason
