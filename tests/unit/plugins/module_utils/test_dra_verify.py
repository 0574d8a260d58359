"""_dra_verify: a node's ResourceSlices against the planned devices; the verification claims and pods."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import node_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._dra_verify import (
    allocated_devices, claim_body, node_slices, pods_for_devices, slice_checks, slice_resources)
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import judge_pod_log, pod_check, pod_manifest

H100 = "NVIDIA H100 80GB HBM3"
PLAN = [{"model": "H100-80GB", "mig": {"1g.10gb": 2}}, {"model": "H100-80GB"}]


def dev(name, kind, profile=None, parent=None, uuid=None):
    attrs = {"type": {"string": kind}, "productName": {"string": H100}}
    if profile:
        attrs.update(profile={"string": profile}, parentUUID={"string": parent or "GPU-0"})
    if uuid:
        attrs["uuid"] = {"string": uuid}
    return {"name": name, "attributes": attrs}


def rslice(node, devices, generation=1, driver="gpu.nvidia.com"):
    return {"metadata": {"name": "%s-%d" % (node, generation)},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": generation}, "devices": devices}}


GOOD = [dev("gpu-0-mig-1g10gb-19-0", "mig", "1g.10gb"), dev("gpu-0-mig-1g10gb-19-1", "mig", "1g.10gb"),
        dev("gpu-1", "gpu", uuid="GPU-1")]


def test_slices_listing_exactly_the_plan_pass():
    checks = slice_checks("n1", node_devices("n1", PLAN), [rslice("n1", GOOD), rslice("other", GOOD)])
    assert [(c.name, c.expected, c.actual, c.ok) for c in checks] == [
        ("gpu-0 mig 1g.10gb", "2", "2", True), ("gpu-1 gpu %s" % H100, "1", "1", True)]


def test_a_missing_mig_device_and_an_unplanned_one_are_rows_that_fail():
    live = [GOOD[0], dev("gpu-0-mig-2g20gb-14-2", "mig", "2g.20gb"), GOOD[2]]
    checks = {c.name: c for c in slice_checks("n1", node_devices("n1", PLAN), [rslice("n1", live)])}
    assert not checks["gpu-0 mig 1g.10gb"].ok and checks["gpu-0 mig 1g.10gb"].actual == "1"
    assert "1 published, the plan says 2" in checks["gpu-0 mig 1g.10gb"].message
    assert not checks["gpu-0 mig 2g.20gb"].ok and checks["gpu-0 mig 2g.20gb"].expected == "0"


def test_parents_by_uuid_when_the_host_read_gives_them():
    facts = [{"index": 0, "uuid": "GPU-0"}, {"index": 1, "uuid": "GPU-1"}]
    ok = slice_checks("n1", node_devices("n1", PLAN, facts), [rslice("n1", GOOD)])
    assert all(c.ok for c in ok), ok
    moved = [dev("gpu-0-mig-1g10gb-19-0", "mig", "1g.10gb", parent="GPU-1"), GOOD[1], GOOD[2]]
    bad = slice_checks("n1", node_devices("n1", PLAN, facts), [rslice("n1", moved)])
    assert {c.name for c in bad if not c.ok} == {"GPU-0 mig 1g.10gb", "GPU-1 mig 1g.10gb"}


def test_only_the_newest_generation_of_a_pool_counts_and_no_slice_is_a_failure():
    old = rslice("n1", [dev("gpu-0", "gpu"), dev("gpu-1", "gpu")], generation=1)
    assert node_slices([old, rslice("n1", GOOD, generation=2)], "n1")[0]["spec"]["pool"]["generation"] == 2
    checks = slice_checks("n1", node_devices("n1", PLAN), [old, rslice("n1", GOOD, generation=2)])
    assert all(c.ok for c in checks)
    none = slice_checks("n1", node_devices("n1", PLAN), [rslice("n1", GOOD, driver="other.example.com")])
    assert len(none) == 1 and not none[0].ok and "no ResourceSlice of driver gpu.nvidia.com" in none[0].message


def test_one_pod_per_node_and_kind_bound_to_its_own_claim():
    wanted = pods_for_devices(node_devices("n1", PLAN) + node_devices("n2", PLAN))
    assert [(w.node, w.label, w.device_kind) for w in wanted] == [
        ("n1", "gpu-nvidia-h100-80gb-hbm3", "gpu"), ("n1", "mig-1g-10gb", "mig"),
        ("n2", "gpu-nvidia-h100-80gb-hbm3", "gpu"), ("n2", "mig-1g-10gb", "mig")]
    pod = pod_manifest(wanted[1], "p1", "ns", "run1", "img", ["nvidia-smi", "-L"])
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "p1"}]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    claim = claim_body(wanted[1], "p1", "ns", "run1")
    assert claim["kind"] == "ResourceClaim" and claim["metadata"]["labels"]["gpufleet.sharing/verify-run"] == "run1"
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig.nvidia.com"  # the driver's class: the proof needs no template run
    assert "profile == '1g.10gb'" in exactly["selectors"][0]["cel"]["expression"]


def test_a_full_gpu_claim_must_show_exactly_one_gpu():
    wanted = pods_for_devices(node_devices("n1", [{"model": "H100-80GB"}]))[0]
    one = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
    two = one + "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n"
    assert judge_pod_log(wanted, one) == (True, "1 GPU")
    assert judge_pod_log(wanted, two) == (False, "2 GPUs instead of 1")
    check = pod_check(wanted, "Succeeded", two)
    assert check.name == "gpu-nvidia-h100-80gb-hbm3" and not check.ok


def test_allocated_devices_of_a_claim():
    claim = {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"}]}}}}
    assert allocated_devices(claim) == ["gpu.nvidia.com/n1/gpu-1"]
    assert allocated_devices(None) == []


def test_slice_resources_count_what_a_dra_node_publishes_per_quota_resource():
    assert slice_resources([rslice("n1", GOOD), rslice("n2", GOOD)], "n1") == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2}
    assert slice_resources([], "n1") == {}
