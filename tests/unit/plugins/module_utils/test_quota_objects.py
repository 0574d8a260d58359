"""_quota_objects: the Kueue objects of a plan, quotas read back, the summary and the proof rows."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import BUILTIN_TYPES
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_objects import (
    API_VERSION, cluster_queue, live_quotas, local_queue, owned, quota_checks, resource_flavor, summary, units,
    users_groups)
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
    a, b = "nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb"
    quotas = {"gpufleet-f1": {a: 1, b: 2}, "gpufleet-f2": {b: 3}}
    groups = cluster_queue(NLP, quotas)["spec"]["resourceGroups"]
    assert groups == [{"coveredResources": [a, b], "flavors": [
        {"name": "gpufleet-f1", "resources": [{"name": a, "nominalQuota": 1}, {"name": b, "nominalQuota": 2}]},
        {"name": "gpufleet-f2", "resources": [{"name": a, "nominalQuota": 0}, {"name": b, "nominalQuota": 3}]}]}]
    assert live_quotas({"spec": {"resourceGroups": groups}}) == {"gpufleet-f1": {a: 1, b: 2}, "gpufleet-f2": {a: 0, b: 3}}


def test_the_users_own_resource_groups_are_kept_and_are_not_quota_of_the_plan():
    """Issue 42: a group for cpu and memory the user added to a team's ClusterQueue (so that pods asking for
    them are admitted) is kept after the collection's groups; a group naming a GPU resource or one of the
    collection's flavors is the collection's."""
    cpu = {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor", "resources": [
        {"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"}]}]}
    gpu_by_hand = {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "mine", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": 99}]}]}
    ours = cluster_queue(NLP, {"gpufleet-f1": {MIG1: 7}})
    live = dict(ours, spec=dict(ours["spec"], resourceGroups=ours["spec"]["resourceGroups"] + [gpu_by_hand, cpu]))
    assert users_groups(live) == [cpu]
    assert live_quotas(live) == {"gpufleet-f1": {MIG1: 7}, "mine": {"nvidia.com/gpu": 99}}
    again = cluster_queue(NLP, {"gpufleet-f1": {MIG1: 5}}, users_groups(live))
    assert again["spec"]["resourceGroups"][1:] == [cpu] and len(again["spec"]["resourceGroups"]) == 2


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
