# -*- coding: utf-8 -*-
"""gpu_quotas with state=verified writes nothing, so it reads the node list once (issue 26 item 3):
the quota checks judge the nodes the plan was made from."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.modules import gpu_quotas  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_io import TYPES  # noqa: E402

PLANS = [{"node": "gpu-a", "gpus": [{"model": "H100-80GB", "count": 2}]}]
TEAMS = [{"name": "vision", "namespaces": ["vision"], "shares": {"nvidia.com/gpu": 1}}]


class CountingK8s(FakeK8s):
    def __init__(self):
        super().__init__()
        self.node_lists = 0

    def list(self, kind, namespace=None, label_selector=None, field_selector=None):
        self.node_lists += kind == "Node"
        return super().list(kind, namespace, label_selector, field_selector)


def test_verified_reads_the_node_list_once(monkeypatch):
    fake = CountingK8s()
    fake.add("Node", "gpu-a", metadata={"name": "gpu-a", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                                    "nvidia.com/gpu.count": "2"}},
             status={"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "1"}})
    fake.add("Namespace", "vision")
    result, failed = run(gpu_quotas, {"teams": TEAMS, "node_plans": PLANS, "configs": [], "state": "verified",
                                      "fail_on_mismatch": False}, fake, monkeypatch)
    assert not failed, result.get("msg")
    assert fake.node_lists == 1 and fake.writes == [] and fake.dry_writes == []
    assert [c["name"] for c in result["checks"]] == ["gpufleet-nvidia-h100-80gb-hbm3 nvidia.com/gpu"]


class GetCountingK8s(FakeK8s):
    def __init__(self):
        super().__init__()
        self.gets = []

    def get(self, kind, name, namespace=None):
        self.gets.append((kind, namespace, name))
        return super().get(kind, name, namespace)


def test_a_converged_present_run_does_not_read_its_own_objects_again(monkeypatch):
    """Issue 26: the owned objects were listed by their label; reading each one again (and its team's
    namespace) to refuse foreign objects cost a request per object on every no-op."""
    fake = GetCountingK8s()
    fake.add("Node", "gpu-a", metadata={"name": "gpu-a", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                                    "nvidia.com/gpu.count": "2"}},
             status={"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}})
    fake.add("Namespace", "vision")
    args = {"teams": TEAMS, "node_plans": PLANS, "configs": [], "state": "present"}
    first, failed = run(gpu_quotas, args, fake, monkeypatch)
    assert not failed and first["changed"], first.get("msg")
    for (kind, namespace, name) in [key for key in fake.objects if key[0] in TYPES]:  # created by kind, read by type
        fake.objects[(TYPES[kind], namespace, name)] = fake.objects.pop((kind, namespace, name))
    fake.gets.clear()
    again, failed = run(gpu_quotas, args, fake, monkeypatch)
    assert not failed and not again["changed"], again.get("msg")
    assert fake.gets == []


def test_a_foreign_object_and_a_missing_namespace_are_still_refused(monkeypatch):
    fake = GetCountingK8s()
    fake.add("Node", "gpu-a", metadata={"name": "gpu-a", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                                    "nvidia.com/gpu.count": "2"}},
             status={"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}})
    fake.add(TYPES["ClusterQueue"], "vision", metadata={"name": "vision"}, spec={})
    result, failed = run(gpu_quotas, {"teams": TEAMS, "node_plans": PLANS, "configs": [], "state": "present"},
                         fake, monkeypatch)
    assert failed
    assert "namespace vision does not exist" in result["msg"]
    assert "ClusterQueue vision exists and is not managed by gpufleet.sharing" in result["msg"]
    assert fake.writes == []
