# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kueue objects from a quota plan, the quotas read back from them, and the proof rows (pure).

API: ``kueue.x-k8s.io/v1beta2``, the storage version of Kueue v0.19.2 (in v1beta2 a ClusterQueue's
cohort is ``spec.cohortName``). Objects carry ``app.kubernetes.io/managed-by: gpufleet.sharing``; the
module changes and deletes only objects with that label.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_plan import (
    FLAVOR_PREFIX, Flavor, PRODUCT_LABEL, QuotaPlan, Quotas, resource_groups, total)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import Team
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check

API_VERSION = "kueue.x-k8s.io/v1beta2"
OWNER_KEY = "app.kubernetes.io/managed-by"
OWNER_VALUE = "gpufleet.sharing"
OWNER = {OWNER_KEY: OWNER_VALUE}
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
GPU_PREFIX = "nvidia.com/"


def owned(obj: Optional[Mapping[str, Any]]) -> bool:
    return bool(obj) and ((obj.get("metadata") or {}).get("labels") or {}).get(OWNER_KEY) == OWNER_VALUE


def resource_flavor(flavor: Flavor) -> Dict[str, Any]:
    """Nodes by product label; their taints as nodeTaints, and the matching tolerations for admitted pods."""
    spec: Dict[str, Any] = {"nodeLabels": {PRODUCT_LABEL: flavor.product}}
    if flavor.taints:
        spec["nodeTaints"] = [_taint(k, v, e) for k, v, e in flavor.taints]
        spec["tolerations"] = [dict(_taint(k, v, e), operator="Equal" if v else "Exists") for k, v, e in flavor.taints]
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor",
            "metadata": {"name": flavor.name, "labels": dict(OWNER)}, "spec": spec}


def _taint(key: str, value: str, effect: str) -> Dict[str, str]:
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def _resource(team: Team, resource: str, nominal: int) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    if team.cohort and team.borrowing_limit is not None:
        entry["borrowingLimit"] = team.borrowing_limit
    if team.cohort and team.lending_limit is not None:
        entry["lendingLimit"] = min(team.lending_limit, nominal)  # Kueue: lendingLimit <= nominalQuota
    return entry


def users_group(group: Mapping[str, Any]) -> bool:
    """A resource group the user added to a team's ClusterQueue (for ``cpu``, ``memory``, ...): it covers no
    ``nvidia.com/`` resource and names none of the collection's flavors. The module keeps such groups as they
    are and owns the others (docs/quotas.md, "Pods that also ask for cpu or memory")."""
    return not any(str(r).startswith(GPU_PREFIX) for r in group.get("coveredResources") or []) and \
        not any(str(f.get("name", "")).startswith(FLAVOR_PREFIX) for f in group.get("flavors") or [])


def users_groups(cq: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The live ClusterQueue's resource groups of the user's own, in their order."""
    return [copy.deepcopy(g) for g in ((cq or {}).get("spec") or {}).get("resourceGroups") or [] if users_group(g)]


def cluster_queue(team: Team, quotas: Quotas, kept: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """The team's ClusterQueue: one resource group per connected set of flavors and resources, then the
    user's own groups (``kept``) as they are."""
    groups: List[Any] = []
    for group in resource_groups(quotas):
        covered = group[0][1] if group else []
        groups.append({"coveredResources": covered, "flavors": [
            {"name": flavor, "resources": [_resource(team, r, quotas[flavor].get(r, 0)) for r in covered]}
            for flavor, _covered in group]})
    groups.extend(copy.deepcopy(dict(g)) for g in kept)
    spec: Dict[str, Any] = {
        "namespaceSelector": {"matchExpressions": [
            {"key": NAMESPACE_LABEL, "operator": "In", "values": sorted(team.namespaces)}]},
        "resourceGroups": groups}
    if team.cohort:
        spec["cohortName"] = team.cohort
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": {"name": team.name, "labels": dict(OWNER)}, "spec": spec}


def local_queue(team: Team, namespace: str) -> Dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": team.name, "namespace": namespace, "labels": dict(OWNER)},
            "spec": {"clusterQueue": team.name}}


def units(value: Any) -> int:
    """A nominal quota as whole units (the collection writes integers; ``1k`` style is read too)."""
    text = str(value)
    match = re.match(r"^([0-9]+)(k|M|G)?$", text)
    if not match:
        raise ValueError("quota %r is not a whole number of units" % text)
    return int(match.group(1)) * {None: 1, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9}[match.group(2)]


def live_quotas(cq: Optional[Mapping[str, Any]]) -> Quotas:
    """flavor -> resource -> nominal quota of a ClusterQueue's own groups (empty when there is none; the
    user's groups are not the collection's quota)."""
    quotas: Quotas = {}
    for group in ((cq or {}).get("spec") or {}).get("resourceGroups") or []:
        if users_group(group):
            continue
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                quotas.setdefault(flavor["name"], {})[res["name"]] = units(res.get("nominalQuota", 0))
    return quotas


def with_quotas(plan: QuotaPlan, quotas: Mapping[str, Quotas]) -> QuotaPlan:
    return QuotaPlan(plan.flavors, {t: dict(q) for t, q in quotas.items()}, list(plan.problems), list(plan.warnings))


def summary(before: Mapping[str, Quotas], after: Mapping[str, Quotas]) -> List[Dict[str, Any]]:
    """Per team, the units per resource before and after (the rollout summary's quota rows)."""
    return [{"team": team, "before": total(before.get(team)), "after": total(after.get(team))}
            for team in sorted(set(before) | set(after))]


def quota_checks(plan: QuotaPlan, teams: Sequence[Team], live: Mapping[str, Optional[Mapping[str, Any]]],
                 advertised: Mapping[str, Tuple[str, Mapping[str, int]]]) -> List[Check]:
    """The proof: each team's live quota as planned; per flavor and resource the live quotas' total
    fits what the flavor's nodes advertise now (``advertised``: node -> (flavor, allocatable))."""
    checks: List[Check] = []
    live_q = {t.name: live_quotas(live.get(t.name)) for t in teams}
    for team in teams:
        planned = plan.quotas.get(team.name, {})
        for flavor in sorted(set(planned) | set(live_q[team.name])):
            for res in sorted(set(planned.get(flavor, {})) | set(live_q[team.name].get(flavor, {}))):
                want, got = planned.get(flavor, {}).get(res, 0), live_q[team.name].get(flavor, {}).get(res)
                checks.append(Check("team/" + team.name, "quota", "%s %s" % (flavor, res), str(want), str(got),
                                    got == want, "" if got == want else "live quota differs from the plan"))
    checks.extend(_fit_checks(live_q, advertised))
    return checks


def _fit_checks(live_q: Mapping[str, Quotas], advertised: Mapping[str, Tuple[str, Mapping[str, int]]]) -> List[Check]:
    capacity: Dict[Tuple[str, str], int] = {}
    for _node, (flavor, alloc) in advertised.items():
        for res, n in alloc.items():
            capacity[(flavor, res)] = capacity.get((flavor, res), 0) + int(n)
    given: Dict[Tuple[str, str], int] = {}
    for quotas in live_q.values():
        for flavor, res in quotas.items():
            for name, n in res.items():
                given[(flavor, name)] = given.get((flavor, name), 0) + n
    checks = []
    for (flavor, res), n in sorted(given.items()):
        if not flavor.startswith(FLAVOR_PREFIX):
            continue
        cap = capacity.get((flavor, res), 0)
        checks.append(Check("flavor/" + flavor, "quota-fit", res, "<= %d" % cap, str(n), n <= cap,
                            "" if n <= cap else "the teams' quotas exceed what the nodes advertise"))
    return checks
