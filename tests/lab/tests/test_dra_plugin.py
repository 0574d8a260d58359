"""The simulated GPU kubelet plugin of NVIDIA's DRA driver (gpulab.cluster.dra.plugin/slices):
slices from the host's GPU state with the real driver's names and attributes (dra-driver-nvidia-gpu
v25.12.0, v0.4.1, v0.5.0 = main 9593204), a snapshot taken only at start, the gates of each release, the driver
root, DynamicMIG as the driver runs it, and a start beside the device plugin (the real plugin has no check)."""

from __future__ import annotations

import pytest

from gpulab import gpustate
from gpulab.cluster.dra import api as dra_api

from dra_lab import IMAGE_0_5, DraLab, mig_layout, wait_for

NODE = "gpu-a"


@pytest.fixture
def lab(tmp_path):
    made = []

    def _make(layout=None, **kwargs):
        made.append(DraLab(tmp_path, layout or {NODE: [("H100-80GB", 2)]}, **kwargs))
        return made[-1]
    yield _make
    for one in made:
        one.stop()


def test_slice_lists_mig_devices_of_mig_gpus_and_whole_gpus_otherwise(lab):
    made = lab()
    mig_layout(made.paths[NODE], {0: {"1g.10gb": 2, "3g.40gb": 1}, 1: None})
    made.start()
    devices = wait_for("the slice", lambda: made.slice_devices(NODE))
    state = gpustate.load(made.paths[NODE])
    gpu0, gpu1 = state.gpus
    migs = {ci.profile + "@" + str(gi.start): (gi, ci) for gi, ci in gpu0.mig_devices()}
    expected = {"gpu-1"} | {f"gpu-0-mig-{ci.profile.replace('.', '')}-{gi.profile_id}-{gi.start}" for gi, ci in migs.values()}
    assert set(devices) == expected
    assert "gpu-0" not in devices  # a MIG-enabled GPU is not announced whole
    whole = devices["gpu-1"]
    assert whole["attributes"]["type"] == {"string": "gpu"}
    assert whole["attributes"]["uuid"] == {"string": gpu1.uuid}
    assert whole["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert whole["attributes"]["architecture"] == {"string": "Hopper"}
    assert whole["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert whole["attributes"]["driverVersion"]["version"].split(".")[0] == state.driver_version.split(".")[0]
    assert whole["capacity"]["memory"] == {"value": f"{gpu1.memory_total_mib}Mi"}
    assert "parentUUID" not in whole["attributes"] and "profile" not in whole["attributes"]
    for gi, ci in migs.values():
        device = devices[f"gpu-0-mig-{ci.profile.replace('.', '')}-{gi.profile_id}-{gi.start}"]
        assert device["attributes"]["type"] == {"string": "mig"}
        assert device["attributes"]["uuid"] == {"string": ci.uuid}
        assert device["attributes"]["parentUUID"] == {"string": gpu0.uuid}
        assert device["attributes"]["profile"] == {"string": ci.profile}
        assert all(f"memorySlice{i}" in device["capacity"] for i in range(gi.start, gi.start + gi.size))
    (obj,) = made.store.items(dra_api.RESOURCESLICES)
    assert obj["spec"]["driver"] == "gpu.nvidia.com" and obj["spec"]["pool"]["name"] == NODE
    assert obj["spec"]["pool"]["resourceSliceCount"] == 1
    assert obj["metadata"]["ownerReferences"][0]["kind"] == "Node"


def test_a_mig_partition_made_after_start_is_published_only_after_a_restart(lab):
    made = lab({NODE: [("H100-80GB", 1)]})
    mig_layout(made.paths[NODE], {0: {"1g.10gb": 1}})
    made.start()
    wait_for("the plugin", lambda: made.plugin_running(NODE) and made.slice_devices(NODE))
    before = set(made.slice_devices(NODE))
    assert len(before) == 1
    mig_layout(made.paths[NODE], {0: {"1g.10gb": 3}})  # over SSH, behind the plugin's back
    assert len(gpustate.load(made.paths[NODE]).gpus[0].mig_devices()) == 3
    made.controllers.run_pass()
    assert set(made.slice_devices(NODE)) == before
    made.restart_plugin(NODE)
    after = wait_for("the new slice", lambda: len(made.slice_devices(NODE)) == 3 and made.slice_devices(NODE))
    assert before < set(after)


def test_the_plugin_starts_beside_the_device_plugin_as_the_real_one_does(lab):
    """kubernetes-sigs/dra-driver-nvidia-gpu (v25.12.0 .. v0.5.0) has no device-plugin check in
    cmd/gpu-kubelet-plugin; only the chart's templates/validation.yaml guards with gpuResourcesEnabledOverride."""
    made = lab(plugin=False)
    labels = {"app": "nvidia-device-plugin"}
    made.store.create("apps/v1/daemonsets", {"metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"}, "spec": {
        "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "containers": [{"name": "nvidia-device-plugin-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.1"}]}}}})
    made.start()
    wait_for("the device plugin", lambda: [p for p in made.store.items("v1/pods", "kube-system")
                                           if (p.get("status") or {}).get("phase") == "Running"])
    made.deploy_plugin()
    wait_for("the plugin beside the device plugin", lambda: made.plugin_running(NODE) and made.slice_devices(NODE))


def _crash_message(made):
    def crashing():
        statuses = (made.plugin_pod(NODE).get("status") or {}).get("containerStatuses") or []
        return statuses and (statuses[0]["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff" and statuses[0]
    return wait_for("CrashLoopBackOff", crashing)["lastState"]["terminated"]["message"]


def test_device_metadata_is_unknown_to_25_12_and_known_to_0_5(lab):
    old = lab(gates="DeviceMetadata=true,PassthroughSupport=true").start()
    assert "unrecognized feature gate: DeviceMetadata" in _crash_message(old)
    assert old.store.items(dra_api.RESOURCESLICES) == []
    old.stop()
    new = lab(gates="DeviceMetadata=true,PassthroughSupport=true", image=IMAGE_0_5).start()
    wait_for("the 0.5.0 plugin", lambda: new.plugin_running(NODE) and new.slice_devices(NODE))


def test_0_5_refuses_device_metadata_without_passthrough(lab):
    made = lab(gates="DeviceMetadata=true", image=IMAGE_0_5).start()
    assert "feature gate DeviceMetadata requires PassthroughSupport to also be enabled" in _crash_message(made)


def test_a_wrong_driver_root_keeps_the_plugin_from_starting(lab):
    made = lab(env={"NVIDIA_DRIVER_ROOT": "/run/nvidia/driver"}, image=IMAGE_0_5).start()
    message = _crash_message(made)
    assert message.startswith("/driver-root (/run/nvidia/driver on host): nvidia-smi: not found")
    assert "the NVIDIA driver on node gpu-a is under /" in message


def test_dynamic_mig_destroys_unknown_mig_devices_and_publishes_every_placement(lab):
    """cmd/gpu-kubelet-plugin (v0.5.0): DestroyUnknownMIGDevices at start, then the full GPU and every possible
    MIG placement are published."""
    made = lab({NODE: [("A100-40GB", 1)]}, gates="DynamicMIG=true", image=IMAGE_0_5)
    mig_layout(made.paths[NODE], {0: {"3g.20gb": 2}})
    made.start()
    devices = wait_for("the slice", lambda: made.plugin_running(NODE) and made.slice_devices(NODE))
    assert gpustate.load(made.paths[NODE]).gpus[0].mig_devices() == []
    assert "gpu-0" in devices
    migs = [d for d in devices.values() if d["attributes"]["type"]["string"] == "mig"]
    one_g = [d for d in migs if d["attributes"]["profile"]["string"] == "1g.5gb"]
    assert len(one_g) == 7 and {d["name"] for d in one_g} == {"gpu-0-mig-1g5gb-19-%d" % i for i in range(7)}
    assert any(d["attributes"]["profile"]["string"] == "7g.40gb" for d in migs)


def test_feature_gates_the_driver_refuses_stop_the_plugin(lab):
    made = lab(gates="DynamicMIG=true,MPSSupport=true,").start()

    def crashing():
        statuses = (made.plugin_pod(NODE).get("status") or {}).get("containerStatuses") or []
        return statuses and (statuses[0]["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff" and statuses[0]
    status = wait_for("CrashLoopBackOff", crashing)
    assert "feature gate DynamicMIG is currently mutually exclusive with MPSSupport" in status["lastState"]["terminated"]["message"]
    assert made.store.items(dra_api.RESOURCESLICES) == []


def test_time_slicing_and_mps_gates_are_accepted(lab):
    made = lab(gates="TimeSlicingSettings=true,MPSSupport=true").start()
    wait_for("the plugin", lambda: made.plugin_running(NODE) and made.slice_devices(NODE))
    assert "feature gates: MPSSupport=True,TimeSlicingSettings=True" in made.store.get_pod_log(
        made.plugin_pod(NODE)["metadata"]["namespace"], made.plugin_pod(NODE)["metadata"]["name"])
