"""_dra_devices: the devices a node's DRA kubelet plugin should publish, and those it does."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_devices import (
    device_differences,
    expected_devices,
    published_devices,
)

MIGS = [{"profile": "1g.10gb"}, {"profile": "1g.10gb"}, {"profile": "3g.40gb"}]
GPUS = [{"uuid": "GPU-0", "mig": {"current": True, "instances": MIGS}},
        {"uuid": "GPU-1", "mig": {"current": False, "instances": []}},
        {"uuid": "GPU-2", "mig": {"current": True, "instances": []}}]


def device(kind, uuid, profile=None, parent=None):
    attributes = {"type": {"string": kind}, "uuid": {"string": uuid}}
    if profile:
        attributes.update(profile={"string": profile}, parentUUID={"string": parent})
    return {"name": uuid.lower(), "attributes": attributes}


def slices(node, *devices, driver="gpu.nvidia.com"):
    return {"spec": {"driver": driver, "nodeName": node, "devices": list(devices)}}


def test_mig_on_gives_its_devices_mig_off_the_gpu_and_an_empty_mig_gpu_nothing():
    assert expected_devices(GPUS) == [("gpu", "", "GPU-1"), ("mig", "1g.10gb", "GPU-0"), ("mig", "1g.10gb", "GPU-0"),
                                      ("mig", "3g.40gb", "GPU-0")]


def test_published_devices_are_the_nodes_own_of_the_gpu_driver():
    items = [slices("n1", device("gpu", "GPU-1"), device("mig", "MIG-a", "1g.10gb", "GPU-0")),
             slices("n2", device("gpu", "GPU-9")), slices("n1", device("gpu", "GPU-7"), driver="compute-domain.nvidia.com")]
    assert published_devices(items, "n1") == [("gpu", "", "GPU-1"), ("mig", "1g.10gb", "GPU-0")]


def test_differences_name_kind_profile_parent_and_counts():
    published = [("gpu", "", "GPU-1"), ("mig", "1g.10gb", "GPU-0")]
    assert device_differences(expected_devices(GPUS), published) == [
        "MIG 1g.10gb on GPU GPU-0: 2 planned, 1 published", "MIG 3g.40gb on GPU GPU-0: 1 planned, 0 published"]
    assert device_differences(published, published) == []
