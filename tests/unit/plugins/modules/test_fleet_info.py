"""fleet_info: reads the nodes' state labels, our annotations, cordons and the rollout lock; writes nothing."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.modules import fleet_info  # noqa: E402


def test_reads_what_drift_needs_and_writes_nothing(monkeypatch):
    fake = FakeK8s()
    fake.add("Node", "a", metadata={"name": "a", "labels": {"nvidia.com/mig.config.state": "failed", "other": "x"},
                                    "annotations": {"gpufleet.sharing/rollout": "failed: x", "kubeadm": "y"}},
             spec={"unschedulable": True, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                                                      "timeAdded": "2026-12-01T10:00:00Z"}]})
    fake.add("Node", "b", metadata={"name": "b"})
    fake.add("Lease", "gpufleet-sharing-rollout", namespace="kube-system", spec={"holderIdentity": "run-1"})
    fake.events = [
        {"reason": "MigConfigFailed", "involvedObject": {"kind": "Node", "name": "a"}, "lastTimestamp": "2026-12-01T09:00:00Z"},
        {"reason": "MigConfigFailed", "involvedObject": {"kind": "Node", "name": "a"}, "lastTimestamp": "2026-12-01T11:00:00Z"},
        {"reason": "Other", "involvedObject": {"kind": "Node", "name": "b"}, "lastTimestamp": "2026-12-01T11:00:00Z"},
        {"reason": "MigConfigFailed", "involvedObject": {"kind": "Pod", "name": "b"}, "lastTimestamp": "2026-12-01T11:00:00Z"}]
    result, failed = run(fleet_info, {"nodes": ["a", "b", "gone"]}, fake, monkeypatch)
    assert not failed and not result["changed"]
    assert result["nodes"]["a"] == {"exists": True, "labels": {"nvidia.com/mig.config.state": "failed"},
                                    "annotations": {"gpufleet.sharing/rollout": "failed: x"}, "unschedulable": True,
                                    "cordoned_since": "2026-12-01T10:00:00Z", "mig_failed_since": "2026-12-01T11:00:00Z"}
    assert result["nodes"]["b"] == {"exists": True, "labels": {}, "annotations": {}, "unschedulable": False, "cordoned_since": None,
                                    "mig_failed_since": None}
    assert not result["nodes"]["gone"]["exists"]
    assert result["lease"]["spec"] == {"holderIdentity": "run-1"}
    assert fake.writes == [] and fake.dry_writes == []


def test_no_lease(monkeypatch):
    result, failed = run(fleet_info, {"nodes": []}, FakeK8s(), monkeypatch, check_mode=True)
    assert not failed and result["lease"] is None and result["nodes"] == {}


def test_device_holders_maps_each_nodes_claims_to_its_slices_devices(monkeypatch):
    fake = FakeK8s()
    fake.add("ResourceSlice", "a-gpu", spec={"driver": "gpu.nvidia.com", "nodeName": "a", "pool": {"name": "a"}, "devices": [
        {"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-0"}}},
        {"name": "gpu-1-mig-0", "attributes": {"uuid": {"string": "MIG-1a"}, "parentUUID": {"string": "GPU-1"}}}]})
    for name, node, device, uid in (("c0", "a", "gpu-0", "u0"), ("c1", "a", "gpu-1-mig-0", "u1"), ("c2", "b", "gpu-0", "u2")):
        fake.add("ResourceClaim", name, namespace="w", status={
            "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": node, "device": device}]}},
            "reservedFor": [{"resource": "pods", "name": "p-" + uid, "uid": uid}]})
    result, failed = run(fleet_info, {"nodes": ["a"], "device_holders": True}, fake, monkeypatch, check_mode=True)
    assert not failed and not result["changed"]
    assert result["device_holders"] == {"a": [
        {"pod_uid": "u0", "container": "claim w/c0", "resource": "gpu.nvidia.com", "device_id": "GPU-0"},
        {"pod_uid": "u1", "container": "claim w/c1", "resource": "gpu.nvidia.com", "device_id": "MIG-1a"}]}
    assert fake.writes == [] and fake.dry_writes == []
    plain, _failed = run(fleet_info, {"nodes": ["a"]}, fake, monkeypatch)
    assert "device_holders" not in plain
