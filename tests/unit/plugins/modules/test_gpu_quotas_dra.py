# -*- coding: utf-8 -*-
"""gpu_quotas with DRA nodes against an in-memory API: capacity from the planned devices, Kueue's
deviceClassMappings returned (issue 23's DRA bullet; docs/quotas.md)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.modules import gpu_quotas  # noqa: E402

PRODUCT = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
PLANS = [{"node": "dra-m", "gpus": [{"model": "H100-80GB", "count": 2, "mig": {"1g.10gb": 7}}]},
         {"node": "dra-f", "gpus": [{"model": "H100-80GB", "count": 2}]}]
TEAMS = [{"name": "vision", "namespaces": ["vision"], "shares": {"nvidia.com/mig-1g.10gb": "50%", "nvidia.com/gpu": 1}}]


def cluster():
    fake = FakeK8s()
    for node in ("dra-m", "dra-f"):
        fake.add("Node", node, metadata={"name": node, "labels": dict(PRODUCT, **{"kubernetes.io/hostname": node})})
    fake.add("Namespace", "vision")
    return fake


def test_dra_nodes_offer_their_planned_devices_and_the_mappings_are_returned(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_quotas, {"teams": TEAMS, "node_plans": PLANS, "dra_nodes": ["dra-m", "dra-f"], "configs": []},
                         fake, monkeypatch)
    assert not failed, result.get("msg")
    assert result["flavors"][0]["capacity"] == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 14}
    assert result["quotas"]["vision"] == {"gpufleet-nvidia-h100-80gb-hbm3": {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 7}}
    mappings = [{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu-nvidia-h100-80gb-hbm3.gpufleet.sharing"]},
                {"name": "nvidia.com/mig-1g.10gb", "deviceClassNames": ["mig-1g-10gb.gpufleet.sharing"]}]
    assert result["kueue_device_class_mappings"] == mappings
    assert result["kueue_config"] == {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                      "resources": {"deviceClassMappings": mappings}}


def test_without_dra_nodes_there_is_no_mapping(monkeypatch):
    fake = cluster()
    result, _failed = run(gpu_quotas, {"teams": TEAMS, "node_plans": PLANS, "configs": [], "mig_strategy": "mixed"},
                          fake, monkeypatch, check_mode=True)
    assert result["kueue_device_class_mappings"] == []
    assert "resources" not in result["kueue_config"]


def test_a_dra_node_without_a_plan_is_refused_by_name(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_quotas, {"teams": TEAMS, "node_plans": PLANS[:1], "dra_nodes": ["dra-m", "dra-f"],
                                      "configs": []}, fake, monkeypatch)
    assert failed and "node dra-f: no GPU plan" in result["msg"]
    assert fake.writes == [] and fake.dry_writes == []
