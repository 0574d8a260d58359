"""The lab scheduler and kubelet with ResourceClaims (gpulab.cluster.dra.claims/allocator): claims
from templates per pod, CEL selectors (cel-python), count, allocationMode All, matchAttribute,
one claim per device, deallocation, and `nvidia-smi -L` in the pod showing exactly the claim's devices."""

from __future__ import annotations

import re

import pytest

from gpulab import gpustate
from gpulab.cluster.errors import ApiError

from dra_lab import DraLab, mig_layout, profile_is, request, wait_for

NODE = "gpu-a"
PARENT = "gpu.nvidia.com/parentUUID"


@pytest.fixture
def lab(tmp_path):
    made = []

    def _make(per_gpu, gpus=2):
        one = DraLab(tmp_path, {NODE: [("H100-80GB", gpus)]})
        mig_layout(one.paths[NODE], per_gpu)
        made.append(one.start())
        wait_for("the plugin's slice", lambda: one.slice_devices(NODE))
        return one
    yield _make
    for one in made:
        one.stop()


def _uuids(log: str):
    return re.findall(r"UUID: ((?:MIG|GPU)-[0-9a-f-]+)", log)


def _results(claim):
    return [r["device"] for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])]


def test_a_template_claim_per_pod_and_nvidia_smi_lists_exactly_its_devices(lab):
    made = lab({0: {"1g.10gb": 3}, 1: None})
    made.template("mig-1g-10gb", [request("mig", "mig.nvidia.com", profile_is("1g.10gb"), count=2)])
    made.pod("job", {"gpu": "template:mig-1g-10gb"}, always=True)
    wait_for("running", lambda: made.phase("job") == "Running")
    (claim,) = made.claims()
    pod = made.store.get("v1/pods", "default", "job")
    assert claim["metadata"]["name"].startswith("job-gpu-")
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Pod", pod["metadata"]["uid"], True)
    assert pod["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]
    allocation = claim["status"]["allocation"]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [NODE]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "job", "uid": pod["metadata"]["uid"]}]
    names = _results(claim)
    assert len(names) == 2 and all(n.startswith("gpu-0-mig-1g10gb-") for n in names)
    devices = made.slice_devices(NODE)
    expected = [devices[n]["attributes"]["uuid"]["string"] for n in names]
    log = made.store.get_pod_log("default", "job")
    gpu0 = gpustate.load(made.paths[NODE]).gpus[0]
    assert _uuids(log) == [gpu0.uuid] + expected
    assert log.count("MIG 1g.10gb") == 2
    made.store.delete("v1/pods", "default", "job")
    wait_for("the claim to go with its pod", lambda: not made.claims() or None)


def test_a_device_goes_to_one_claim_at_a_time_and_is_freed_with_the_pod(lab):
    made = lab({0: None, 1: {"7g.80gb": 1}})  # one whole GPU
    made.template("gpu", [request("gpu", "gpu.nvidia.com")])
    made.pod("first", {"gpu": "template:gpu"}, always=True)
    wait_for("first running", lambda: made.phase("first") == "Running")
    made.pod("second", {"gpu": "template:gpu"})

    def unschedulable():
        conditions = made.store.get("v1/pods", "default", "second").get("status", {}).get("conditions") or []
        return [c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"]
    (condition,) = wait_for("second pending", unschedulable)
    assert "cannot allocate all claims" in condition["message"]
    made.store.delete("v1/pods", "default", "first")
    wait_for("second done", lambda: made.phase("second") == "Succeeded")
    gpu0 = gpustate.load(made.paths[NODE]).gpus[0]
    assert _uuids(made.store.get_pod_log("default", "second")) == [gpu0.uuid]


def test_match_attribute_keeps_the_devices_of_a_claim_on_one_gpu(lab):
    made = lab({0: {"1g.10gb": 1, "3g.40gb": 1}, 1: {"1g.10gb": 2}})
    made.template("two-on-one-gpu", [request("a", "mig.nvidia.com", profile_is("1g.10gb")),
                                     request("b", "mig.nvidia.com", profile_is("1g.10gb"))],
                  constraints=[{"requests": ["a", "b"], "matchAttribute": PARENT}])
    made.pod("pair", {"gpu": "template:two-on-one-gpu"}, always=True)
    wait_for("running", lambda: made.phase("pair") == "Running")
    assert all(n.startswith("gpu-1-mig-1g10gb-") for n in _results(made.claims()[0]))
    made.pod("again", {"gpu": "template:two-on-one-gpu"})  # only gpu-0's single 1g.10gb is left

    def message():
        conditions = made.store.get("v1/pods", "default", "again").get("status", {}).get("conditions") or []
        return [c["message"] for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"]
    assert "cannot allocate all claims" in wait_for("again pending", message)[0]


def test_allocation_mode_all_and_cel_on_capacity_and_versions(lab):
    made = lab({0: {"1g.10gb": 2, "3g.40gb": 1}, 1: None})
    made.template("all-migs", [request("all", "mig.nvidia.com", mode="All")])
    big = ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0 && "
           "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))")
    made.template("big-mig", [request("big", "mig.nvidia.com", big)])
    made.pod("everything", {"gpu": "template:all-migs"})
    wait_for("done", lambda: made.phase("everything") == "Succeeded")
    assert made.store.get_pod_log("default", "everything").count("  MIG ") == 3
    made.pod("big", {"gpu": "template:big-mig"})
    wait_for("done", lambda: made.phase("big") == "Succeeded")
    assert made.store.get_pod_log("default", "big").count("MIG 3g.40gb") == 1
    assert "1g.10gb" not in made.store.get_pod_log("default", "big")


def test_a_named_claim_is_shared_by_its_pods_and_deallocated_when_unused(lab):
    made = lab({0: None, 1: None})
    made.store.create("resource.k8s.io/v1/resourceclaims", {
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"devices": {"requests": [request("gpu", "gpu.nvidia.com")]}}})
    made.pod("one", {"gpu": "claim:shared"}, always=True)
    made.pod("two", {"gpu": "claim:shared"}, always=True)
    wait_for("both running", lambda: made.phase("one") == made.phase("two") == "Running")
    claim = made.store.get("resource.k8s.io/v1/resourceclaims", "default", "shared")
    assert len(_results(claim)) == 1 and len(claim["status"]["reservedFor"]) == 2
    assert _uuids(made.store.get_pod_log("default", "one")) == _uuids(made.store.get_pod_log("default", "two"))
    for name in ("one", "two"):
        made.store.delete("v1/pods", "default", name)
    wait_for("deallocated", lambda: not made.store.get("resource.k8s.io/v1/resourceclaims", "default", "shared")
             .get("status", {}).get("allocation"))


def test_a_pod_waits_for_a_missing_claim(lab):
    made = lab({0: None, 1: None})
    made.pod("orphan", {"gpu": "claim:nowhere"})

    def message():
        conditions = made.store.get("v1/pods", "default", "orphan").get("status", {}).get("conditions") or []
        return [c["message"] for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"]
    assert wait_for("pending", message) == ['resourceclaim "nowhere" not found']
    with pytest.raises(ApiError):
        made.store.get("resource.k8s.io/v1/resourceclaims", "default", "nowhere")
