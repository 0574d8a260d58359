# -*- coding: utf-8 -*-
"""gpu_verify under DRA against an in-memory API: ResourceSlice rows, claim-bound pods, check mode, reports."""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_html import render_html  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_view import node_views  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.modules import gpu_verify  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"
GPU_LOG = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4)\n"
MIG_LOG = GPU_LOG + "  MIG 1g.10gb       Device  0: (UUID: MIG-9d14fb21-4ae1-546f-a636-011582899c39)\n"
PLANS = [{"node": "dra-m", "gpus": [{"model": "H100-80GB", "mig": {"1g.10gb": 2}}]},
         {"node": "dra-f", "gpus": [{"model": "H100-80GB", "count": 2}]}]


def device(name, kind, profile=None):
    attrs = {"type": {"string": kind}, "productName": {"string": H100}}
    if profile:
        attrs.update(profile={"string": profile}, parentUUID={"string": "GPU-x"})
    return {"name": name, "attributes": attrs}


def cluster(mig_devices=2):
    fake = FakeK8s()
    for node in ("dra-m", "dra-f"):
        fake.add("Node", node, metadata={"name": node, "labels": {"kubernetes.io/hostname": node}})
    fake.add("ResourceSlice", "dra-m-gpu", spec={"driver": "gpu.nvidia.com", "nodeName": "dra-m",
                                                 "pool": {"name": "dra-m", "generation": 1},
                                                 "devices": [device("gpu-0-mig-1g10gb-19-%d" % i, "mig", "1g.10gb")
                                                             for i in range(mig_devices)]})
    fake.add("ResourceSlice", "dra-f-gpu", spec={"driver": "gpu.nvidia.com", "nodeName": "dra-f",
                                                 "pool": {"name": "dra-f", "generation": 1},
                                                 "devices": [device("gpu-0", "gpu"), device("gpu-1", "gpu")]})

    def behaviour(pod):
        claim = fake.obj("ResourceClaim", pod["spec"]["resourceClaims"][0]["resourceClaimName"], pod["metadata"]["namespace"])
        selector = claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
        claim["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pod["spec"]["nodeSelector"]["kubernetes.io/hostname"],
             "device": "gpu-0"}]}}}
        return "Succeeded", MIG_LOG if "'mig'" in selector else GPU_LOG
    fake.pod_behaviour = behaviour
    return fake


ARGS = {"node_plans": PLANS, "dra_nodes": ["dra-m", "dra-f"], "configs": [], "run_id": "d1", "junit": True}


def test_slices_as_planned_and_one_claim_bound_pod_per_node_and_kind(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_verify, ARGS, fake, monkeypatch)
    assert not failed, result.get("msg")
    rows = [(c["node"], c["kind"], c["name"], c["expected"], c["actual"]) for c in result["report"]["checks"]]
    assert ("dra-m", "slice", "gpu-0 mig 1g.10gb", "2", "2") in rows
    assert ("dra-f", "slice", "gpu-1 gpu %s" % H100, "1", "1") in rows
    assert not [r for r in rows if r[1] in ("capacity", "allocatable", "label")]  # no device-plugin rows on DRA nodes
    pods = sorted((p["node"], p["resource"], p["outcome"], p["ok"], tuple(p["allocated"])) for p in result["report"]["pods"])
    assert pods == [("dra-f", "gpu-nvidia-h100-80gb-hbm3", "Succeeded", True, ("gpu.nvidia.com/dra-f/gpu-0",)),
                    ("dra-m", "mig-1g-10gb", "Succeeded", True, ("gpu.nvidia.com/dra-m/gpu-0",))]
    assert not [k for k in fake.objects if k[0] in ("Pod", "ResourceClaim")]  # pods and their claims deleted
    assert "slice" in ET.fromstring(result["report_junit"]).find("testsuite").find("testcase").get("name")
    assert "dra-m" in result["report_table"]
    nodes = {n["node"]: n for n in result["report"]["nodes"]}
    assert nodes["dra-m"]["backend"] == "dra"
    assert nodes["dra-m"]["devices"] == [{"parent": "gpu-0", "type": "mig", "model": "1g.10gb", "kind": "mig-1g-10gb", "count": 2}]


def test_the_html_page_lists_the_dra_nodes_from_the_same_json(monkeypatch):
    fake = cluster(mig_devices=1)
    result, _failed = run(gpu_verify, dict(ARGS, fail_on_mismatch=False), fake, monkeypatch)
    views = {v["name"]: v for v in node_views(result["report"])}
    assert not views["dra-m"]["ok"] and views["dra-f"]["ok"]
    assert [c["name"] for c in views["dra-m"]["failed_checks"]] == ["gpu-0 mig 1g.10gb"]
    assert [p["resource"] for p in views["dra-f"]["pods"]] == ["gpu-nvidia-h100-80gb-hbm3"]
    page = render_html(result["report"])
    assert "dra-m" in page and "gpu-0 mig 1g.10gb" in page


def test_a_mig_device_the_plugin_did_not_publish_fails_the_node(monkeypatch):
    fake = cluster(mig_devices=1)
    result, failed = run(gpu_verify, dict(ARGS, pods=False, fail_on_mismatch=False), fake, monkeypatch)
    assert not failed and not result["ok"]
    bad = [c for c in result["report"]["checks"] if not c["ok"]]
    assert [(c["node"], c["name"], c["message"]) for c in bad] == [
        ("dra-m", "gpu-0 mig 1g.10gb", "ResourceSlice devices gpu-0 mig 1g.10gb: 1 published, the plan says 2")]


def test_check_mode_creates_no_claim_and_no_pod(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_verify, ARGS, fake, monkeypatch, check_mode=True)
    assert not failed and result["ok"] and result["report"]["pods"] == []
    assert fake.writes == [] and fake.dry_writes == []


def test_a_dra_node_without_a_plan_is_a_failed_row(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_verify, dict(ARGS, node_plans=PLANS[:1], pods=False, fail_on_mismatch=False), fake, monkeypatch)
    assert not failed and not result["ok"]
    assert any(c["node"] == "dra-f" and "no GPU plan" in c["message"] for c in result["report"]["checks"])
