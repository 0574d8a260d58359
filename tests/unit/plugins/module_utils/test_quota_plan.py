"""_quota_plan: flavors from the planned nodes, capacity, nominal quotas, resource groups, the shrink step."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_plan import (
    flavor_name, flavors_of, plan_quotas, resource_groups, group_problems, scheduling_taints, shrunk, split_count, total)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import Team

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
H200_SHARED = "NVIDIA-H200-SHARED"
MIG1 = "nvidia.com/mig-1g.10gb"
MIG5 = "nvidia.com/mig-1g.5gb"


FLEET = [
    {"node": "h1", "labels": {"nvidia.com/gpu.product": H100}, "resources": {MIG1: 14, "nvidia.com/gpu": 0}},
    {"node": "h2", "labels": {"nvidia.com/gpu.product": H100}, "resources": {MIG1: 14}},
    {"node": "a1", "labels": {"nvidia.com/gpu.product": A100}, "resources": {MIG5: 7}},
    {"node": "m1", "labels": {"nvidia.com/gpu.product": H200_SHARED}, "resources": {"nvidia.com/gpu": 8}},
    {"node": "cpu", "labels": {}, "resources": {}},
]


def team(name, shares, **kwargs):
    return Team(name, (name,), tuple(sorted(shares.items())), **kwargs)


def test_flavors_group_nodes_by_product_and_sum_capacity():
    flavors, problems = flavors_of(FLEET)
    assert problems == []
    assert [(f.name, f.nodes, f.capacity) for f in flavors] == [
        ("gpufleet-nvidia-a100-sxm4-40gb", ("a1",), ((MIG5, 7),)),
        ("gpufleet-nvidia-h100-80gb-hbm3", ("h1", "h2"), ((MIG1, 28),)),
        ("gpufleet-nvidia-h200-shared", ("m1",), (("nvidia.com/gpu", 8),)),
    ]


def test_taints_split_a_flavor_transient_taints_do_not():
    nodes = [dict(FLEET[0], taints=[{"key": "team", "value": "vision", "effect": "NoSchedule"}]),
             dict(FLEET[1], taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                                    {"key": "soft", "effect": "PreferNoSchedule"}])]
    flavors, _p = flavors_of(nodes)
    assert [f.nodes for f in flavors] == [("h2",), ("h1",)]
    tainted = [f for f in flavors if f.taints][0]
    assert tainted.nodes == ("h1",) and tainted.taints == (("team", "vision", "NoSchedule"),)
    assert tainted.name.startswith("gpufleet-nvidia-h100-80gb-hbm3-t") and len(tainted.name) == len("gpufleet-nvidia-h100-80gb-hbm3") + 10
    assert scheduling_taints([{"key": "gpufleet.sharing/rollout", "effect": "NoSchedule"}]) == ()


def test_a_node_without_product_is_named():
    _f, problems = flavors_of([{"node": "x", "labels": {}, "resources": {"nvidia.com/gpu": 1}}])
    assert problems == ["node x: no nvidia.com/gpu.product label planned or present: its GPUs are in no flavor"]


@pytest.mark.parametrize("product,name", [
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "gpufleet-nvidia-a100-sxm4-40gb-mig-1g.5gb"),
    ("Tesla T4 (PCIe)", "gpufleet-tesla-t4-pcie"),
    ("X" * 300, "gpufleet-" + "x" * 244)])
def test_flavor_names_are_dns_subdomains(product, name):
    assert flavor_name(product, ()) == name


@pytest.mark.parametrize("count,caps,expected", [
    (10, [("a", 28), ("b", 7)], {"a": 8, "b": 2}),
    (3, [("a", 1), ("b", 1), ("c", 1)], {"a": 1, "b": 1, "c": 1}),
    (1, [("a", 1), ("b", 1)], {"a": 1, "b": 0}),
    (0, [("a", 5)], {"a": 0}),
    (5, [("a", 0)], {"a": 0}),
])
def test_split_count(count, caps, expected):
    assert split_count(count, caps) == expected
    if sum(c for _n, c in caps):
        assert sum(split_count(count, caps).values()) == count


def test_plan_fractions_floor_and_counts_split():
    teams = [team("vision", {MIG1: Fraction(1, 2), "nvidia.com/gpu": 3}), team("nlp", {MIG1: Fraction(1, 3)})]
    plan = plan_quotas(FLEET, teams)
    assert plan.problems == []
    assert plan.quotas == {
        "vision": {"gpufleet-nvidia-h100-80gb-hbm3": {MIG1: 14}, "gpufleet-nvidia-h200-shared": {"nvidia.com/gpu": 3}},
        "nlp": {"gpufleet-nvidia-h100-80gb-hbm3": {MIG1: 9}},  # floor(28 / 3)
    }
    assert plan.capacity()["gpufleet-nvidia-h100-80gb-hbm3"] == {MIG1: 28}


def test_sum_never_exceeds_capacity_unless_overcommit():
    teams = [team("vision", {MIG5: 5}), team("nlp", {MIG5: Fraction(1, 2)})]
    plan = plan_quotas(FLEET, teams)
    assert plan.problems == ["resource nvidia.com/mig-1g.5gb, flavor gpufleet-nvidia-a100-sxm4-40gb: the teams' quotas add up "
                             "to 8 (vision 5, nlp 3), the nodes advertise 7; lower the shares or set gpufleet_quota_overcommit: true"]
    assert plan_quotas(FLEET, teams, overcommit=True).problems == []


@pytest.mark.parametrize("shares", [{MIG1: Fraction(1, 7)}, {MIG1: Fraction(1)}, {MIG1: 28}, {MIG1: 1}])
def test_single_team_never_over_capacity(shares):
    plan = plan_quotas(FLEET, [team("t", shares)])
    assert plan.problems == []
    assert total(plan.quotas["t"])[MIG1] <= 28


def test_resource_nobody_advertises():
    plan = plan_quotas(FLEET, [team("t", {"nvidia.com/mig-3g.40gb": 1})])
    assert plan.problems == []
    assert plan.warnings == ["team t: resource nvidia.com/mig-3g.40gb: no planned node advertises it, no quota for it"]
    assert plan.quotas == {"t": {}}


def test_resource_groups_connect_flavors_sharing_resources():
    quotas = {"f1": {"r1": 1, "r2": 2}, "f2": {"r2": 3}, "f3": {"r3": 4}}
    assert resource_groups(quotas) == [[("f1", ["r1", "r2"]), ("f2", ["r1", "r2"])], [("f3", ["r3"])]]
    assert resource_groups({}) == []
    assert group_problems("t", resource_groups({"f%d" % i: {"r%d" % i: 1} for i in range(17)})) == \
        ["team t: 17 resource groups, Kueue allows 16"]
    assert "64" in group_problems("t", resource_groups({"f%d" % i: {"r": 1} for i in range(65)}))[0]


def test_shrunk_is_the_smaller_of_live_and_planned():
    live = {"h100": {MIG1: 14}, "a100": {MIG5: 3}}
    planned = {"h100": {MIG1: 7, "nvidia.com/mig-3g.40gb": 2}}
    assert shrunk(planned, live) == {"a100": {MIG5: 0}, "h100": {MIG1: 7, "nvidia.com/mig-3g.40gb": 0}}
    assert shrunk(planned, planned) == planned
    assert total(shrunk(planned, live)) == {MIG5: 0, MIG1: 7, "nvidia.com/mig-3g.40gb": 0}
