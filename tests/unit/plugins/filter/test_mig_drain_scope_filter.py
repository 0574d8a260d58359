"""The mig_drain_scope filter: the rollout's per-GPU drain decision from the host's read (issue 38)."""

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sharing.plugins.filter.mig_drain_scope import mig_drain_scope

GPUS = [{"index": 0, "uuid": "GPU-0", "mig": {"current": False, "instances": []}},
        {"index": 1, "uuid": "GPU-1", "mig": {"current": False, "instances": []}}]
PLAN = {"gpus": [{"index": 0, "model": "H100-80GB", "mode_change": False, "layout_change": False},
                 {"index": 1, "model": "H100-80GB", "mode_change": True, "layout_change": True}]}


def checkpoint(*pairs):
    return json.dumps({"Data": {"PodDeviceEntries": [
        {"PodUID": uid, "ContainerName": "c", "ResourceName": "nvidia.com/gpu", "DeviceIDs": {"-1": [dev]}}
        for uid, dev in pairs], "RegisteredDevices": {}}, "Checksum": 7})


def test_the_issues_two_gpu_scenario_evicts_the_pod_of_gpu_1_only():
    scope = mig_drain_scope(PLAN, "gpu", GPUS, checkpoint(("u0", "GPU-0"), ("u1", "GPU-1")))
    assert (scope["scope"], scope["gpus"], scope["evict"], scope["keep"]) == ("gpu", [1], ["u1"], ["u0"])
    assert scope["why"] == {"u1": "container c holds GPU-1 (nvidia.com/gpu) of GPU 1"}


@pytest.mark.parametrize("text, reason", [
    (None, "could not be read"), ("{", "not as documented"), ("[]", "not as documented: not a device manager")])
def test_no_usable_checkpoint_drains_the_node_with_the_reason(text, reason):
    scope = mig_drain_scope(PLAN, "gpu", GPUS, text)
    assert scope["scope"] == "node" and reason in scope["reason"] and scope["evict"] == []


def test_the_node_scope_needs_no_checkpoint():
    assert mig_drain_scope(PLAN, "node", GPUS, None)["reason"] == "gpufleet_mig_drain_scope is node"


def test_bad_input_is_an_error_naming_it():
    with pytest.raises(AnsibleFilterError, match="not a plan"):
        mig_drain_scope({}, "gpu", GPUS, None)
    with pytest.raises(AnsibleFilterError, match="gpu, node"):
        mig_drain_scope(PLAN, "all", GPUS, None)


def test_a_dra_node_takes_the_node_scope_without_reading_the_checkpoint():
    scope = mig_drain_scope(PLAN, "gpu", GPUS, None, gpu_backend="dra")
    assert scope["scope"] == "node" and "ResourceClaims" in scope["reason"]


def test_a_dra_node_takes_its_holders_from_fleet_info():
    holders = [{"pod_uid": "u%d" % i, "container": "claim w/c%d" % i, "resource": "gpu.nvidia.com",
                "device_id": "GPU-%d" % i} for i in (0, 1)]
    scope = mig_drain_scope(PLAN, "gpu", GPUS, None, gpu_backend="dra", holders=holders)
    assert (scope["scope"], scope["evict"], scope["keep"]) == ("gpu", ["u1"], ["u0"])
    assert scope["why"] == {"u1": "claim w/c1 holds GPU-1 (gpu.nvidia.com) of GPU 1"}


def test_a_dra_node_whose_claims_were_not_read_drains_the_node():
    scope = mig_drain_scope(PLAN, "gpu", GPUS, None, gpu_backend="dra")
    assert scope["scope"] == "node" and scope["reason"] == "the node's ResourceClaims could not be read"
    with pytest.raises(AnsibleFilterError, match="device_holders"):
        mig_drain_scope(PLAN, "gpu", GPUS, None, gpu_backend="dra", holders=[{"pod_uid": "u"}])
