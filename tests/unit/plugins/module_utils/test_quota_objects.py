"""_quota_objects: the Kueue objects of a plan, quotas read back, the summary and the proof rows."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import BUILTIN_TYPES
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_objects import (
    API_VERSION, cluster_queue, live_quotas, local_queue, owned, quota_checks, resource_flavor, summary, units)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_plan import Flavor, plan_quotas
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import Team

MIG1 = "nvidia.com/mig-1g.10gb"
H100 = "gpufleet-nvidia-h100-80gb-hbm3"
NODES = [{"node": "h1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "resources": {MIG1: 14}},
         {"node": "h2", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "resources": {MIG1: 14}}]
VISION = Team("vision", ("vision-dev", "vision-train"), ((MIG1, Fraction(1, 2)),), "research", 4, 20)
NLP = Team("nlp", ("nlp",), ((MIG1, 7),))


def test_resource_flavor_with_taints_and_tolerations():
    flavor = Flavor("f", "P", (("a", "", "NoExecute"), ("b", "x", "NoSchedule")), ("n",), ())
    obj = resource_flavor(flavor)
    assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2" and owned(obj)
    assert obj["spec"] == {"nodeLabels": {"nvidia.com/gpu.product": "P"},
                           "nodeTaints": [{"key": "a", "effect": "NoExecute"}, {"key": "b", "value": "x", "effect": "NoSchedule"}],
                           "tolerations": [{"key": "a", "effect": "NoExecute", "operator": "Exists"},
                                           {"key": "b", "value": "x", "effect": "NoSchedule", "operator": "Equal"}]}
    assert resource_flavor(Flavor("g", "P", (), (), ()))["spec"] == {"nodeLabels": {"nvidia.com/gpu.product": "P"}}


def test_cluster_queue_of_a_team_in_a_cohort():
    plan = plan_quotas(NODES, [VISION, NLP])
    obj = cluster_queue(VISION, plan.quotas["vision"])
    assert obj["metadata"] == {"name": "vision", "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing"}}
    assert obj["spec"] == {
        "cohortName": "research",
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                    "values": ["vision-dev", "vision-train"]}]},
        "resourceGroups": [{"coveredResources": [MIG1], "flavors": [{"name": H100, "resources": [
            {"name": MIG1, "nominalQuota": 14, "borrowingLimit": 4, "lendingLimit": 14}]}]}]}
    nlp = cluster_queue(NLP, plan.quotas["nlp"])["spec"]
    assert "cohortName" not in nlp and nlp["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": MIG1, "nominalQuota": 7}]


def test_every_flavor_of_a_group_lists_every_covered_resource():
    quotas = {"f1": {"a": 1, "b": 2}, "f2": {"b": 3}}
    groups = cluster_queue(NLP, quotas)["spec"]["resourceGroups"]
    assert groups == [{"coveredResources": ["a", "b"], "flavors": [
        {"name": "f1", "resources": [{"name": "a", "nominalQuota": 1}, {"name": "b", "nominalQuota": 2}]},
        {"name": "f2", "resources": [{"name": "a", "nominalQuota": 0}, {"name": "b", "nominalQuota": 3}]}]}]
    assert live_quotas({"spec": {"resourceGroups": groups}}) == {"f1": {"a": 1, "b": 2}, "f2": {"a": 0, "b": 3}}


def test_local_queue_and_ownership():
    assert local_queue(NLP, "nlp") == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                       "metadata": {"name": "nlp", "namespace": "nlp",
                                                    "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing"}},
                                       "spec": {"clusterQueue": "nlp"}}
    assert not owned({"metadata": {"labels": {"app.kubernetes.io/managed-by": "helm"}}})
    assert not owned(None)


@pytest.mark.parametrize("value,n", [(7, 7), ("7", 7), ("2k", 2000)])
def test_units(value, n):
    assert units(value) == n


@pytest.mark.parametrize("value", ["1.5", "-1", "500m", "x"])
def test_units_refuses_fractions(value):
    with pytest.raises(ValueError):
        units(value)


def test_summary_before_after():
    assert summary({"a": {"f": {"r": 4}}}, {"a": {"f": {"r": 2}, "g": {"r": 1}}, "b": {}}) == [
        {"team": "a", "before": {"r": 4}, "after": {"r": 3}}, {"team": "b", "before": {}, "after": {}}]


def test_quota_checks_as_planned_and_fitting():
    plan = plan_quotas(NODES, [VISION, NLP])
    live = {t.name: cluster_queue(t, plan.quotas[t.name]) for t in (VISION, NLP)}
    advertised = {"h1": (H100, {MIG1: 14}), "h2": (H100, {MIG1: 14})}
    checks = quota_checks(plan, [VISION, NLP], live, advertised)
    assert all(c.ok for c in checks)
    assert [(c.node, c.kind, c.name, c.expected, c.actual) for c in checks] == [
        ("team/vision", "quota", H100 + " " + MIG1, "14", "14"), ("team/nlp", "quota", H100 + " " + MIG1, "7", "7"),
        ("flavor/" + H100, "quota-fit", MIG1, "<= 28", "21")]


def test_quota_checks_fail_on_drift_and_on_missing_capacity():
    plan = plan_quotas(NODES, [VISION])
    checks = quota_checks(plan, [VISION, NLP], {"vision": cluster_queue(VISION, {H100: {MIG1: 20}}), "nlp": None},
                          {"h1": (H100, {MIG1: 14})})
    bad = [(c.node, c.message) for c in checks if not c.ok]
    assert bad == [("team/vision", "live quota differs from the plan"),
                   ("flavor/" + H100, "the teams' quotas exceed what the nodes advertise")]


def test_the_client_knows_kueue_types_at_the_version_written():
    assert {BUILTIN_TYPES[k].api_version for k in ("ResourceFlavor", "ClusterQueue", "LocalQueue")} == {API_VERSION}
    assert BUILTIN_TYPES["LocalQueue"].path("team", "ns") == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/team"
