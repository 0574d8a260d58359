"""gpu_claim_templates against the in-memory client: writes, re-run, check mode, refusals (docs/dra.md)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.modules import gpu_claim_templates as module  # noqa: E402

OWNER = {"app.kubernetes.io/managed-by": "gpufleet.sharing"}
PLANS = [{"node": "mig-1", "gpus": [{"model": "H100-80GB", "count": 2, "mig": {"1g.10gb": 7}}]},
         {"node": "full-1", "gpus": [{"model": "H100-80GB", "count": 2}]}]


def cluster():
    fake = FakeK8s()
    for node in ("mig-1", "full-1"):
        fake.add("Node", node, metadata={"name": node, "labels": {"kubernetes.io/hostname": node}})
    for ns in ("vision", "nlp"):
        fake.add("Namespace", ns)
    return fake


def args(**extra):
    return dict({"claim_templates": [{"namespaces": ["vision", "nlp"]}], "node_plans": PLANS, "configs": []}, **extra)


def test_templates_per_kind_and_namespace_then_nothing_changes(monkeypatch):
    fake = cluster()
    result, failed = run(module, args(), fake, monkeypatch)
    assert not failed, result
    assert result["changed"]
    assert result["templates"] == ["nlp/gpu-nvidia-h100-80gb-hbm3", "nlp/mig-1g-10gb",
                                   "vision/gpu-nvidia-h100-80gb-hbm3", "vision/mig-1g-10gb"]
    assert result["devices"] == {"full-1": {"gpu-nvidia-h100-80gb-hbm3": 2}, "mig-1": {"mig-1g-10gb": 14}}
    template = fake.obj("ResourceClaimTemplate", "mig-1g-10gb", "vision")
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "mig-1g-10gb.gpufleet.sharing"
    assert "profile == '1g.10gb'" in request["selectors"][0]["cel"]["expression"]
    assert fake.obj("DeviceClass", "mig-1g-10gb.gpufleet.sharing")["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufleet.sharing"
    assert result["kueue_device_class_mappings"] == [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu-nvidia-h100-80gb-hbm3.gpufleet.sharing"]},
        {"name": "nvidia.com/mig-1g.10gb", "deviceClassNames": ["mig-1g-10gb.gpufleet.sharing"]}]
    writes = len(fake.writes)
    again, failed = run(module, args(), fake, monkeypatch)
    assert not failed and not again["changed"] and len(fake.writes) == writes


def test_check_mode_writes_nothing_and_reports_the_change(monkeypatch):
    fake = cluster()
    result, failed = run(module, args(), fake, monkeypatch, check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert fake.writes == [] and len(fake.dry_writes) == 6
    assert fake.obj("ResourceClaimTemplate", "mig-1g-10gb", "vision") is None


def test_a_profile_the_plan_does_not_have_is_refused_by_name(monkeypatch):
    fake = cluster()
    result, failed = run(module, args(claim_templates=[{"namespaces": ["vision"], "kinds": ["2g.20gb"]}]), fake, monkeypatch)
    assert failed
    assert "'2g.20gb' is not a device kind of the plan" in result["msg"] and "mig-1g-10gb" in result["msg"]
    assert fake.writes == [] and fake.dry_writes == []


def test_an_object_we_did_not_create_is_left_alone_and_nothing_is_written(monkeypatch):
    fake = cluster()
    fake.add("ResourceClaimTemplate", "mig-1g-10gb", "vision", metadata={"name": "mig-1g-10gb", "namespace": "vision"},
             spec={"spec": {"devices": {"requests": []}}})
    result, failed = run(module, args(), fake, monkeypatch)
    assert failed and "ResourceClaimTemplate vision/mig-1g-10gb exists and is not managed by gpufleet.sharing" in result["msg"]
    assert fake.writes == []
    assert fake.obj("ResourceClaimTemplate", "mig-1g-10gb", "vision")["spec"] == {"spec": {"devices": {"requests": []}}}


def test_a_missing_namespace_and_a_shared_kind_without_its_gate(monkeypatch):
    fake = cluster()
    result, failed = run(module, args(claim_templates=[{"namespaces": ["absent"]}]), fake, monkeypatch)
    assert failed and "namespace absent does not exist" in result["msg"] and fake.writes == []
    shared = args(configs=[{"name": "ts", "strategy": "time-slicing", "nodes": ["full-1"],
                            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}])
    result, failed = run(module, shared, fake, monkeypatch)
    assert failed and "TimeSlicingSettings" in result["msg"] and fake.writes == []
    result, failed = run(module, dict(shared, feature_gates={"TimeSlicingSettings": True}), fake, monkeypatch)
    assert not failed, result
    assert "vision/gpu-nvidia-h100-80gb-hbm3-time-slicing" in result["templates"]


def test_templates_the_plan_no_longer_names_are_deleted_only_when_ours(monkeypatch):
    fake = cluster()
    run(module, args(), fake, monkeypatch)
    fake.add("ResourceClaimTemplate", "theirs", "vision", metadata={"name": "theirs", "namespace": "vision"}, spec={})
    result, failed = run(module, args(claim_templates=[{"namespaces": ["vision"], "kinds": ["1g.10gb"]}]), fake, monkeypatch)
    assert not failed and result["changed"]
    assert fake.obj("ResourceClaimTemplate", "mig-1g-10gb", "nlp") is None
    assert fake.obj("DeviceClass", "gpu-nvidia-h100-80gb-hbm3.gpufleet.sharing") is not None  # still a planned kind
    assert fake.obj("ResourceClaimTemplate", "theirs", "vision") is not None
    assert fake.obj("ResourceClaimTemplate", "mig-1g-10gb", "vision") is not None


def test_a_converged_run_does_not_read_its_own_objects_again(monkeypatch):
    """Issue 26: the owned objects were listed by their label; each (and its namespace) was read again."""
    fake = cluster()
    first, failed = run(module, args(), fake, monkeypatch)
    assert not failed and first["changed"], first
    gets = []
    original = fake.get
    monkeypatch.setattr(fake, "get", lambda kind, name, namespace=None: gets.append((kind, name)) or original(kind, name, namespace))
    again, failed = run(module, args(), fake, monkeypatch)
    assert not failed and not again["changed"], again
    assert gets == []


def test_a_changed_count_re_creates_the_template_and_check_mode_only_dry_runs_the_delete(monkeypatch):
    """Issue 43 #1: a template's spec is immutable (the fake refuses its update with 422, as the API server)."""
    fake = cluster()
    one = [{"namespaces": ["vision"], "kinds": ["1g.10gb"], "count": 1}]
    two = [{"namespaces": ["vision"], "kinds": ["1g.10gb"], "count": 2}]
    result, failed = run(module, args(claim_templates=one), fake, monkeypatch)
    assert not failed, result
    writes = len(fake.writes)
    planned, failed = run(module, args(claim_templates=two), fake, monkeypatch, check_mode=True, diff=True)
    assert not failed and planned["changed"] and planned["replaced"] == ["vision/mig-1g-10gb"], planned
    assert fake.dry_writes == [("delete", "ResourceClaimTemplate", "mig-1g-10gb")] and len(fake.writes) == writes
    assert "deleted and created again" in planned["diff"]["before_header"]
    assert planned["diff"]["after"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    applied, failed = run(module, args(claim_templates=two), fake, monkeypatch)
    assert not failed, applied["msg"]
    assert fake.writes[writes:] == [("delete", "ResourceClaimTemplate", "mig-1g-10gb"),
                                    ("create", "ResourceClaimTemplate", "mig-1g-10gb")]
    template = fake.obj("ResourceClaimTemplate", "mig-1g-10gb", "vision")
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    again, failed = run(module, args(claim_templates=two), fake, monkeypatch)
    assert not failed and not again["changed"] and "replaced" not in again
