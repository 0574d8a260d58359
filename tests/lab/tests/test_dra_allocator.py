"""The pure DRA allocator and CEL environment (gpulab.cluster.dra.allocator/cel) on the devices the
lab's kubelet plugin announces for a host: firstAvailable, errors that abort an allocation,
exclusivity and matchAttribute, and the CEL helpers Kubernetes' environment has."""

from __future__ import annotations

import pytest

from gpulab import gpustate
from gpulab.cluster.dra import allocator, cel, slices

from dra_lab import CLASS_EXPR, mig_layout, profile_is, request

CLASSES = {name: {"spec": {"selectors": [{"cel": {"expression": CLASS_EXPR % kind}}]}}
           for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))}


@pytest.fixture
def candidates(make_host):
    path = make_host([("H100-80GB", 2)], hostname="gpu-a")
    mig_layout(path, {0: {"1g.10gb": 2, "2g.20gb": 1}, 1: None})
    return [("gpu.nvidia.com", "gpu-a", device) for device in slices.devices(gpustate.load(path))]


def _spec(*requests, constraints=None):
    devices = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"devices": devices}


def test_first_available_falls_back_to_the_next_subrequest(candidates):
    spec = _spec({"name": "mig", "firstAvailable": [
        {"name": "big", "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": profile_is("7g.80gb")}}]},
        {"name": "small", "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": profile_is("2g.20gb")}}]}]})
    (result,) = allocator.allocate(spec, CLASSES, candidates, set())
    assert result["request"] == "mig/small" and result["device"].startswith("gpu-0-mig-2g20gb-")


def test_taken_devices_are_skipped_and_all_needs_every_matching_device(candidates):
    taken = {("gpu.nvidia.com", "gpu-a", "gpu-1")}
    with pytest.raises(allocator.Unallocatable):
        allocator.allocate(_spec(request("gpu", "gpu.nvidia.com")), CLASSES, candidates, taken)
    one_1g = {allocator.key_of(c) for c in candidates if c[2]["name"].startswith("gpu-0-mig-1g10gb-")}
    some = set(list(one_1g)[:1])
    with pytest.raises(allocator.Unallocatable):
        allocator.allocate(_spec(request("all", "mig.nvidia.com", profile_is("1g.10gb"), mode="All")), CLASSES, candidates, some)
    results = allocator.allocate(_spec(request("all", "mig.nvidia.com", profile_is("1g.10gb"), mode="All")), CLASSES, candidates, set())
    assert {("gpu.nvidia.com", "gpu-a", r["device"]) for r in results} == one_1g


def test_a_missing_attribute_or_class_aborts_the_allocation(candidates):
    with pytest.raises(allocator.Unallocatable) as missing:
        allocator.allocate(_spec(request("gpu", "gpu.nvidia.com", profile_is("1g.10gb"))), CLASSES, candidates, set())
    assert "CEL runtime error" in str(missing.value) and "profile" in str(missing.value)
    with pytest.raises(allocator.Unallocatable) as no_class:
        allocator.allocate(_spec(request("gpu", "nowhere.nvidia.com")), CLASSES, candidates, set())
    assert "device class nowhere.nvidia.com does not exist" in str(no_class.value)


def test_match_attribute_across_requests_and_counts(candidates):
    spec = _spec(request("small", "mig.nvidia.com", profile_is("1g.10gb"), count=2),
                 request("mid", "mig.nvidia.com", profile_is("2g.20gb")),
                 constraints=[{"matchAttribute": "gpu.nvidia.com/parentUUID"}])
    results = allocator.allocate(spec, CLASSES, candidates, set())
    assert [r["request"] for r in results] == ["small", "small", "mid"]
    with pytest.raises(allocator.Unallocatable):
        allocator.allocate(_spec(request("small", "mig.nvidia.com", profile_is("1g.10gb"), count=3)), CLASSES, candidates, set())


def test_cel_environment_helpers(candidates):
    mig = next(c for c in candidates if c[2]["name"].startswith("gpu-0-mig-2g20gb-"))
    activation = cel.device_activation("gpu.nvidia.com", mig[2])
    assert cel.matches("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isLessThan(semver('10.0.0'))", activation)
    assert cel.matches("device.capacity['gpu.nvidia.com'].multiprocessors.asInteger() > 0", activation)
    assert cel.matches("device.attributes['resource.kubernetes.io'].pciBusID != ''", activation)
    assert cel.matches("!has(device.attributes['other.example.com'].x)", activation)
    assert cel.compile_error("device.driver == ") != ""
    with pytest.raises(cel.CelError):
        cel.matches("device.driver", activation)  # not a bool
