# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Team quotas from the fleet plan (pure): flavors, their capacity, each team's nominal quota.

Input: per node what the plan says it will advertise (``resources``), the labels it will carry
(``labels``, the plan's GFD labels over the live ones) and its taints. Nodes are grouped into
flavors by GPU product label (``nvidia.com/gpu.product``) and the scheduling taints they carry;
a flavor's capacity for a resource is the sum over its nodes. A team's share of a resource is
applied to each flavor offering it: a fraction takes ``floor(fraction * capacity)``, a count is
split over the flavors in proportion to their capacity (largest remainders first). The teams'
quotas of a flavor never add up to more than its capacity unless over-commit is allowed.
See docs/quotas.md.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import Share, Team

PRODUCT_LABEL = "nvidia.com/gpu.product"
FLAVOR_PREFIX = "gpufleet-"
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
# Taints the node lifecycle and a rollout put on and take off: not a property of the flavor.
TRANSIENT_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "gpufleet.sharing/")
MAX_RESOURCE_GROUPS = 16
MAX_PER_GROUP = 64

Quotas = Dict[str, Dict[str, int]]  # flavor -> resource -> units


@dataclass(frozen=True)
class Flavor:
    name: str
    product: str
    taints: Tuple[Tuple[str, str, str], ...]  # (key, value, effect)
    nodes: Tuple[str, ...]
    capacity: Tuple[Tuple[str, int], ...]  # resource -> units

    def units(self, resource: str) -> int:
        return dict(self.capacity).get(resource, 0)


@dataclass
class QuotaPlan:
    flavors: List[Flavor] = field(default_factory=list)
    quotas: Dict[str, Quotas] = field(default_factory=dict)  # team -> flavor -> resource -> units
    problems: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)  # shares of resources no planned node offers

    def capacity(self) -> Quotas:
        return {f.name: dict(f.capacity) for f in self.flavors}


def flavor_name(product: str, taints: Sequence[Tuple[str, str, str]]) -> str:
    """``gpufleet-<product>`` (lower case, DNS subdomain), ``-t<hash>`` when the nodes are tainted."""
    slug = re.sub(r"[^a-z0-9.-]+", "-", product.lower())
    slug = re.sub(r"-+", "-", re.sub(r"\.+", ".", slug)).strip("-.")
    suffix = ""
    if taints:
        suffix = "-t" + hashlib.sha256(repr(sorted(taints)).encode()).hexdigest()[:8]
    return (FLAVOR_PREFIX + slug)[:253 - len(suffix)].rstrip("-.") + suffix


def scheduling_taints(taints: Sequence[Mapping[str, Any]]) -> Tuple[Tuple[str, str, str], ...]:
    """The taints that decide where a pod may run (NoSchedule/NoExecute), without transient ones."""
    kept = {(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect")))
            for t in taints if t.get("effect") in SCHEDULING_EFFECTS
            and not str(t.get("key", "")).startswith(TRANSIENT_TAINT_PREFIXES)}
    return tuple(sorted(kept))


def flavors_of(nodes: Sequence[Mapping[str, Any]]) -> Tuple[List[Flavor], List[str]]:
    """Group nodes ({node, resources, labels, taints}) into flavors; problems for nodes without a product."""
    groups: Dict[Tuple[str, Tuple[Tuple[str, str, str], ...]], Dict[str, Any]] = {}
    problems: List[str] = []
    for node in sorted(nodes, key=lambda n: str(n["node"])):
        resources = {r: int(n) for r, n in (node.get("resources") or {}).items() if int(n) > 0}
        if not resources:
            continue
        product = (node.get("labels") or {}).get(PRODUCT_LABEL)
        if not product:
            problems.append("node %s: no %s label planned or present: its GPUs are in no flavor" % (node["node"], PRODUCT_LABEL))
            continue
        key = (str(product), scheduling_taints(node.get("taints") or []))
        group = groups.setdefault(key, {"nodes": [], "capacity": {}})
        group["nodes"].append(str(node["node"]))
        for resource, units in resources.items():
            group["capacity"][resource] = group["capacity"].get(resource, 0) + units
    flavors = [Flavor(flavor_name(product, taints), product, taints, tuple(g["nodes"]), tuple(sorted(g["capacity"].items())))
               for (product, taints), g in groups.items()]
    return sorted(flavors, key=lambda f: f.name), problems


def split_count(count: int, capacities: Sequence[Tuple[str, int]]) -> Dict[str, int]:
    """A count over flavors in proportion to their capacity: floors, then the largest remainders (then names)."""
    total = sum(c for _n, c in capacities)
    if total == 0:
        return {name: 0 for name, _c in capacities}
    exact = {name: Fraction(count * cap, total) for name, cap in capacities}
    parts = {name: int(value) for name, value in exact.items()}
    left = count - sum(parts.values())
    for name in sorted(exact, key=lambda n: (-(exact[n] - parts[n]), n))[:left]:
        parts[name] += 1
    return parts


def team_quotas(team: Team, flavors: Sequence[Flavor]) -> Tuple[Quotas, List[str]]:
    """One team's nominal quota per flavor and resource."""
    quotas: Quotas = {}
    problems: List[str] = []
    for resource, share in team.shares:
        offering = [(f.name, f.units(resource)) for f in flavors if f.units(resource) > 0]
        if not offering:
            problems.append("team %s: resource %s: no planned node advertises it, no quota for it" % (team.name, resource))
            continue
        for name, units in _apply(share, offering).items():
            quotas.setdefault(name, {})[resource] = units
    return quotas, problems


def _apply(share: Share, offering: Sequence[Tuple[str, int]]) -> Dict[str, int]:
    if isinstance(share, Fraction):
        return {name: int(share * cap) for name, cap in offering}
    return split_count(share, offering)


def capacity_problems(plan: QuotaPlan, teams: Sequence[Team]) -> List[str]:
    """Per flavor and resource: the teams' quotas must fit the capacity."""
    problems = []
    for flavor in plan.flavors:
        for resource, cap in flavor.capacity:
            given = [(t.name, plan.quotas.get(t.name, {}).get(flavor.name, {}).get(resource, 0)) for t in teams]
            total = sum(n for _t, n in given)
            if total > cap:
                problems.append("resource %s, flavor %s: the teams' quotas add up to %d (%s), the nodes advertise %d; "
                                "lower the shares or set gpufleet_quota_overcommit: true" % (
                                    resource, flavor.name, total, ", ".join("%s %d" % g for g in given if g[1]), cap))
    return problems


def plan_quotas(nodes: Sequence[Mapping[str, Any]], teams: Sequence[Team], overcommit: bool = False) -> QuotaPlan:
    """The flavors, their capacity and every team's nominal quota; ``problems`` says what cannot be applied."""
    flavors, problems = flavors_of(nodes)
    plan = QuotaPlan(flavors, {}, problems)
    for team in teams:
        quotas, absent = team_quotas(team, flavors)
        plan.quotas[team.name] = quotas
        plan.warnings.extend(absent)
    if not overcommit:
        plan.problems.extend(capacity_problems(plan, teams))
    return plan


def resource_groups(quotas: Quotas) -> List[List[Tuple[str, List[str]]]]:
    """Kueue resource groups: flavors and resources linked by a quota, each in one group only.

    Returns per group a list of (flavor, covered resources) with the same resources for each flavor."""
    groups: List[set] = []
    for flavor, res in sorted(quotas.items()):
        for resource in sorted(res):
            keys = {"f:" + flavor, "r:" + resource}
            touching = [g for g in groups if g & keys]
            groups = [g for g in groups if not g & keys] + [keys.union(*touching)]
    result = []
    for members in sorted(groups, key=sorted):
        resources = sorted(k[2:] for k in members if k.startswith("r:"))
        result.append([(k[2:], resources) for k in sorted(members) if k.startswith("f:")])
    return result


def group_problems(team: str, groups: Sequence[Sequence[Tuple[str, List[str]]]], kept: Sequence[Any] = ()) -> List[str]:
    """Kueue's limits: at most 16 resource groups (``kept``: the user's own groups count too), 64 flavors and
    64 resources each."""
    problems = []
    if len(groups) + len(kept) > MAX_RESOURCE_GROUPS:
        problems.append("team %s: %d resource groups%s, Kueue allows %d" % (
            team, len(groups) + len(kept), " (%d of your own)" % len(kept) if kept else "", MAX_RESOURCE_GROUPS))
    for group in groups:
        if len(group) > MAX_PER_GROUP or (group and len(group[0][1]) > MAX_PER_GROUP):
            problems.append("team %s: a resource group of %d flavors and %d resources, Kueue allows %d of each"
                            % (team, len(group), len(group[0][1]), MAX_PER_GROUP))
    return problems


def shrunk(planned: Quotas, live: Quotas) -> Quotas:
    """The quota to hold while nodes change: per flavor and resource the smaller of live and planned
    (what only one side has counts as 0, and is kept at 0 so that nothing is admitted on it)."""
    result: Quotas = {}
    for flavor in sorted(set(planned) | set(live)):
        for resource in sorted(set(planned.get(flavor, {})) | set(live.get(flavor, {}))):
            result.setdefault(flavor, {})[resource] = min(planned.get(flavor, {}).get(resource, 0),
                                                          live.get(flavor, {}).get(resource, 0))
    return result


def total(quotas: Optional[Quotas]) -> Dict[str, int]:
    """Units per resource over all flavors."""
    sums: Dict[str, int] = {}
    for res in (quotas or {}).values():
        for resource, units in res.items():
            sums[resource] = sums.get(resource, 0) + units
    return dict(sorted(sums.items()))
