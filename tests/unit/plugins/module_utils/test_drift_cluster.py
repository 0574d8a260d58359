"""Drift rows of the cluster side (pure): operator, sharing, node state, rollout lock."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift import CLUSTER, row
from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift_cluster import (
    cluster_rows,
    lock_rows,
    node_rows,
    operator_rows,
    quota_rows,
    sharing_rows,
    summary,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_lock import parse_time

SITE = "ansible-playbook playbooks/site.yml"
UNCHANGED = {"action": "unchanged", "release": {"chart_version": "v25.10.0"}, "values_changes": [],
             "carried_forward": ["devicePlugin.config.name"]}


def test_operator_as_planned_skipped_or_unmanaged_has_no_row():
    assert operator_rows(UNCHANGED, "v25.10.0") == [] == operator_rows(UNCHANGED, "25.10.0")
    assert operator_rows(UNCHANGED, "") == []  # any version planned
    assert operator_rows({}, "v1") == [] == operator_rows({"skipped": True}, "v1")
    # the live ClusterPolicy's device-plugin config, carried forward: not in the release, not drift
    carried = dict(UNCHANGED, values_changes=["devicePlugin: added {'config': {'name': 'cm'}}"])
    assert operator_rows(carried, "") == []
    assert operator_rows(dict(carried, action="upgraded"), "") == []


def test_operator_missing_failed_or_another_version():
    assert operator_rows({"action": "installed", "release": {}}, "") == [row(CLUSTER, "GPU Operator release", "installed", None, SITE)]
    assert operator_rows({"failed": True, "msg": "helm: boom"}, "")[0]["found"] == "helm: boom"
    rows = operator_rows(dict(UNCHANGED, action="upgraded"), "v25.3.4")
    assert rows == [row(CLUSTER, "GPU Operator chart version", "v25.3.4", "v25.10.0", SITE)]


def test_one_row_per_value_path():
    result = dict(UNCHANGED, action="upgraded", values_changes=[
        "mig.strategy: 'single' -> 'mixed'", "driver.enabled: added False", "dcgm: removed (was {'enabled': True})", "odd line"])
    assert [(r["what"], r["planned"], r["found"]) for r in operator_rows(result, "")] == [
        ("GPU Operator value mig.strategy", "'mixed'", "'single'"),
        ("GPU Operator value driver.enabled", "False", "absent"),
        ("GPU Operator value dcgm", "absent", "{'enabled': True}"),
        ("GPU Operator value", "as planned", "odd line")]


def test_sharing_rows():
    result = {"configmap": {"name": "cm", "action": "updated", "changed_keys": ["ts4"]},
              "cluster_policy_patch": {"spec": {"devicePlugin": {"config": {"name": "cm", "default": ""}}}},
              "labels_changed": {"n2": {"before": "ts2", "after": "ts4"}, "n1": {"before": None, "after": "ts4"}}}
    assert [(r["node"], r["what"], r["planned"], r["found"], r["converge"]) for r in sharing_rows(result, {"n1": "h1"})] == [
        (CLUSTER, "device-plugin ConfigMap cm", "as planned", "differs in ts4", SITE),
        (CLUSTER, "ClusterPolicy device-plugin config", "spec.devicePlugin.config.default=, spec.devicePlugin.config.name=cm",
         "differs", SITE),
        ("n1", "label nvidia.com/device-plugin.config", "ts4", "absent", SITE + " --limit h1"),
        ("n2", "label nvidia.com/device-plugin.config", "ts4", "ts2", SITE + " --limit n2")]
    created = sharing_rows({"configmap": {"name": "cm", "action": "created"}}, {})
    assert [r["found"] for r in created] == ["absent"]


def test_sharing_as_planned_skipped_or_failed():
    assert sharing_rows({"configmap": {"action": "unchanged"}, "labels_changed": {}, "cluster_policy_patch": {}}, {}) == []
    assert sharing_rows({}, {}) == [] == sharing_rows({"skipped": True}, {})
    assert sharing_rows({"failed": True, "msg": "bad"}, {})[0]["what"] == "sharing plan"


def state(labels=None, notes=None, unschedulable=False, since=None):
    return {"labels": labels or {}, "annotations": notes or {}, "unschedulable": unschedulable, "cordoned_since": since}


def test_a_clean_node_has_no_row():
    assert node_rows("n", state({"nvidia.com/mig.config.state": "success",
                                 "nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}), "h", True) == []


@pytest.mark.parametrize("operator_mig, planned, converge", [
    (True, "success", SITE + " --limit h"),
    (False, None, "kubectl label node n nvidia.com/mig.config.state-"),
])
def test_mig_manager_state(operator_mig, planned, converge):
    rows = node_rows("n", state({"nvidia.com/mig.config.state": "failed"}), "h", operator_mig)
    assert rows == [row("n", "label nvidia.com/mig.config.state", planned, "failed", converge)]


def test_mig_manager_failure_since_its_event():
    rows = node_rows("n", dict(state({"nvidia.com/mig.config.state": "failed"}), mig_failed_since="T1"), "h", True)
    assert rows[0]["since"] == "T1"
    pending = node_rows("n", dict(state({"nvidia.com/mig.config.state": "pending"}), mig_failed_since="T1"), "h", True)
    assert pending[0]["since"] is None  # an earlier failure says nothing about since when it is pending


def test_driver_upgrade_state():
    rows = node_rows("n", state({"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"}), "h", False)
    assert [(r["what"], r["planned"], r["found"]) for r in rows] == [
        ("label nvidia.com/gpu-driver-upgrade-state", "upgrade-done", "upgrade-failed")]


def test_a_failed_rollout_node_is_one_row_with_its_cordon():
    notes = {"gpufleet.sharing/rollout": "failed: verify timed out", "gpufleet.sharing/cordoned-by": "run-1"}
    rows = node_rows("n", state(notes=notes, unschedulable=True, since="2026-12-01T10:00:00Z"), "h", False)
    assert rows == [row("n", "annotation gpufleet.sharing/rollout", None, "failed: verify timed out (node cordoned)",
                        "ansible-playbook playbooks/rollout.yml --limit h", "2026-12-01T10:00:00Z")]


def test_our_cordon_alone_and_paused_operands():
    rows = node_rows("n", state(notes={"gpufleet.sharing/cordoned-by": "run-1", "gpufleet.sharing/paused-operands": "x"},
                                unschedulable=True, since="T"), "h", False)
    assert [(r["what"], r["found"], r["since"]) for r in rows] == [
        ("cordon gpufleet.sharing/cordoned-by", "cordoned by run run-1", "T"),
        ("annotation gpufleet.sharing/paused-operands", "x", None)]
    stale = node_rows("n", state(notes={"gpufleet.sharing/cordoned-by": "run-1"}), "h", False)
    assert stale[0]["found"] == "annotation left on a schedulable node (run run-1)"


def lease(renew="2026-12-01T10:00:00.000000Z", duration=600):
    return {"spec": {"holderIdentity": "run-9 a@b", "renewTime": renew, "leaseDurationSeconds": duration}}


def test_the_lock_free_held_or_stale():
    start = parse_time("2026-12-01T10:00:00.000000Z")
    assert lock_rows(None, start) == []
    held = lock_rows(lease(), start + 60)
    assert [(r["found"], r["since"]) for r in held] == [("held by run-9 a@b until 2026-12-01T10:10:00.000000Z",
                                                        "2026-12-01T10:00:00.000000Z")]
    stale = lock_rows(lease(), start + 601)
    assert stale[0]["found"] == "stale: held by run-9 a@b, expired 2026-12-01T10:10:00.000000Z"
    assert lock_rows({"spec": {"holderIdentity": "x"}}, start)[0]["found"] == "stale: held by x, expired never renewed"


def test_cluster_rows_and_summary():
    rows = cluster_rows(UNCHANGED, "", {}, {"b": state({"nvidia.com/mig.config.state": "failed"}), "a": state()},
                        {"b": "host-b"}, {"b": True}, lease(), 0.0)
    assert [(r["node"], r["what"], r["converge"]) for r in rows] == [
        (CLUSTER, "rollout lock", "wait for that run to end"),
        ("b", "label nvidia.com/mig.config.state", SITE + " --limit host-b")]
    assert summary(rows, 2) == {"rows": 2, "nodes": 2, "drifted": [CLUSTER, "b"], "ok": False}
    assert summary([], 2)["ok"]


def test_kueue_quota_rows_from_gpu_quotas_verified():
    """Issue 43 (5): drift compares the Kueue quotas (gpu_quotas state verified, fail_on_mismatch false)."""
    checks = [{"node": "team/vision", "kind": "quota", "name": "gpufleet-a100 nvidia.com/mig-1g.5gb", "expected": "2",
               "actual": "5", "ok": False, "message": "live quota differs from the plan"},
              {"node": "team/nlp", "kind": "quota", "name": "gpufleet-a100 nvidia.com/mig-3g.20gb", "expected": "1",
               "actual": "None", "ok": False, "message": "live quota differs from the plan"},
              {"node": "flavor/gpufleet-a100", "kind": "quota-fit", "name": "nvidia.com/mig-1g.5gb", "expected": "<= 4",
               "actual": "6", "ok": False, "message": "the teams' quotas exceed what the nodes advertise"},
              {"node": "team/nlp", "kind": "quota", "name": "x", "expected": "1", "actual": "1", "ok": True, "message": ""}]
    rows = quota_rows({"checks": checks})
    assert rows == [
        row(CLUSTER, "Kueue team/vision quota gpufleet-a100 nvidia.com/mig-1g.5gb", "2", "5", SITE),
        row(CLUSTER, "Kueue team/nlp quota gpufleet-a100 nvidia.com/mig-3g.20gb", "1", None, SITE),
        row(CLUSTER, "Kueue flavor/gpufleet-a100 quota-fit nvidia.com/mig-1g.5gb", "<= 4", "6", SITE)]
    assert rows[1]["found"] == "absent"
    assert quota_rows({}) == [] and quota_rows({"skipped": True}) == [] and quota_rows({"checks": checks[3:]}) == []
    assert quota_rows({"failed": True, "msg": "Kueue's API is not served"}) == [
        row(CLUSTER, "Kueue team quotas", "as planned", "cannot be compared: Kueue's API is not served", SITE)]


def test_a_lock_namespace_that_does_not_exist_is_no_no_drift():
    """Issue 43 (5): the Lease cannot be read in a namespace that does not exist; drift cannot know whether a
    rollout runs, and a rollout could not take the lock there: a row, never "No drift"."""
    rows = lock_rows(None, 0.0, missing_namespace="no-such-ns")
    assert rows == [row(CLUSTER, "rollout lock", "free",
                        "unknown: namespace no-such-ns does not exist (gpufleet_rollout_lock_namespace), so the lock "
                        "cannot be read and a rollout could not take it",
                        "kubectl create namespace no-such-ns, or set gpufleet_rollout_lock_namespace to an existing namespace")]
    rows = cluster_rows(UNCHANGED, "", {}, {}, {}, {}, None, 0.0, lock_missing_namespace="no-such-ns")
    assert not summary(rows, 1)["ok"] and rows[0]["what"] == "rollout lock"
