# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The teams of the fleet (``gpufleet_teams``), parsed and checked (pure).

A team: ``name`` (its ClusterQueue and LocalQueues), ``namespaces`` (a LocalQueue in each),
``shares`` (resource name -> a fraction ``0.5``, a percentage ``"50%"`` or an absolute count ``3``),
optional ``cohort``, ``borrowing_limit`` and ``lending_limit`` (units per flavor and resource; both
need a cohort, as Kueue's ClusterQueue validation says). See docs/quotas.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import GpuModel

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# The extended resources the collection plans (docs/sharing.md): full GPUs, MIG devices, shared ones.
# A suffixed profile is advertised with every '+' turned into '.' (NVIDIA/k8s-device-plugin v0.20.0,
# internal/rm/rm.go: ``strings.ReplaceAll("mig-"+p.String(), "+", ".")``): ``1g.10gb+me`` is
# ``nvidia.com/mig-1g.10gb.me``, ``1g.24gb+me.all`` ``...mig-1g.24gb.me.all``, ``1g.24gb+gfx``
# ``...mig-1g.24gb.gfx``, ``1g.24gb-me`` stays. A '+' is never advertised, and Kueue refuses it in a
# resource name (a qualified name, kubernetes-sigs/kueue v0.19.2 pkg/webhooks/common.go).
GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-[0-9]+g\.[0-9]+gb(\.me|\.me\.all|\.gfx|-me)?"
                          r"|mig-[0-9]+c\.[0-9]+g\.[0-9]+gb)(\.shared)?$")
MIG_PREFIX = "nvidia.com/mig-"
_SUFFIXED = re.compile(r"^([0-9]+g\.[0-9]+gb)\.(me|me\.all|gfx)$")
PERCENT = re.compile(r"^([0-9]+(\.[0-9]+)?)%$")
TEAM_KEYS = ("name", "namespaces", "shares", "cohort", "borrowing_limit", "lending_limit")

Share = Union[Fraction, int]  # a Fraction is a part of the capacity, an int a count of units


@dataclass(frozen=True)
class Team:
    name: str
    namespaces: Tuple[str, ...]
    shares: Tuple[Tuple[str, Share], ...]
    cohort: Optional[str] = None
    borrowing_limit: Optional[int] = None
    lending_limit: Optional[int] = None

    def share(self, resource: str) -> Optional[Share]:
        return dict(self.shares).get(resource)


def parse_share(value: Any) -> Optional[Share]:
    """``"50%"`` or a float in [0, 1] -> Fraction; an int >= 0 -> count; anything else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return Fraction(value).limit_denominator(10000) if 0 <= value <= 1 else None
    match = PERCENT.match(str(value).strip())
    return Fraction(match.group(1)) / 100 if match else None


def _limit(team: Mapping[str, Any], key: str, where: str, problems: List[str]) -> Optional[int]:
    value = team.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append("%s: %s must be a whole number of units >= 0, got %r" % (where, key, value))
        return None
    if not team.get("cohort"):
        problems.append("%s: %s needs a cohort (Kueue: must be nil when cohort is empty)" % (where, key))
    return value


def _shares(team: Mapping[str, Any], where: str, problems: List[str]) -> Tuple[Tuple[str, Share], ...]:
    raw = team.get("shares")
    if not isinstance(raw, Mapping) or not raw:
        problems.append("%s: shares must be a mapping of resource name to a fraction, a percentage or a count" % where)
        return ()
    shares = []
    for resource, value in sorted(raw.items(), key=lambda kv: str(kv[0])):
        if not GPU_RESOURCE.match(str(resource)):
            problems.append("%s: resource %r: unknown resource (the fleet plans nvidia.com/gpu, "
                            "nvidia.com/mig-<profile> and their .shared names)" % (where, resource))
            continue
        share = parse_share(value)
        if share is None or (isinstance(share, Fraction) and share > 1):
            problems.append("%s: resource %s: share %r is not a fraction from 0 to 1, a percentage up to "
                            "100%% or a count >= 0" % (where, resource, value))
            continue
        shares.append((str(resource), share))
    return tuple(shares)


def _team(index: int, raw: Any, problems: List[str]) -> Optional[Team]:
    if not isinstance(raw, Mapping):
        problems.append("gpufleet_teams[%d]: must be a mapping with name, namespaces and shares" % index)
        return None
    name = raw.get("name")
    where = "gpufleet_teams[%d] (team %r)" % (index, name)
    if not isinstance(name, str) or len(name) > 63 or not DNS_LABEL.match(name):
        problems.append("%s: name must be a DNS label (lower case letters, digits, '-', at most 63)" % where)
    for key in sorted(set(raw) - set(TEAM_KEYS), key=str):
        problems.append("%s: unknown key %r (known: %s)" % (where, key, ", ".join(TEAM_KEYS)))
    namespaces = raw.get("namespaces")
    if not isinstance(namespaces, (list, tuple)) or not namespaces:
        problems.append("%s: namespaces must be a non-empty list of namespace names" % where)
        namespaces = []
    for ns in namespaces:
        if not isinstance(ns, str) or len(ns) > 63 or not DNS_LABEL.match(ns):
            problems.append("%s: namespace %r is not a DNS label (lower case letters, digits, '-', at most 63)" % (where, ns))
    cohort = raw.get("cohort")
    if cohort is not None and (not isinstance(cohort, str) or len(cohort) > 253 or not DNS_SUBDOMAIN.match(cohort)):
        problems.append("%s: cohort %r is not a DNS subdomain" % (where, cohort))
    shares = _shares(raw, where, problems)
    borrowing, lending = _limit(raw, "borrowing_limit", where, problems), _limit(raw, "lending_limit", where, problems)
    return Team(str(name), tuple(str(n) for n in namespaces), shares, cohort or None, borrowing, lending)


def parse_teams(raw: Any) -> Tuple[List[Team], List[str]]:
    """The teams and every problem of the variable (each naming the team, the resource and why)."""
    if raw is None:
        return [], []
    if not isinstance(raw, (list, tuple)):
        return [], ["gpufleet_teams must be a list of teams, got %s" % type(raw).__name__]
    problems: List[str] = []
    teams = [t for t in (_team(i, r, problems) for i, r in enumerate(raw)) if t is not None]
    seen: Dict[str, int] = {}
    for team in teams:
        seen[team.name] = seen.get(team.name, 0) + 1
    problems.extend("gpufleet_teams: team %r is declared %d times" % (n, c) for n, c in sorted(seen.items()) if c > 1)
    problems.extend(fraction_problems(teams))
    return teams, problems


def fraction_problems(teams: Sequence[Team]) -> List[str]:
    """Per resource, the fractions of all teams must not go over 100%."""
    totals: Dict[str, Fraction] = {}
    for team in teams:
        for resource, share in team.shares:
            if isinstance(share, Fraction):
                totals[resource] = totals.get(resource, Fraction(0)) + share
    problems = []
    for resource, total in sorted(totals.items()):
        if total > 1:
            parts = ", ".join("%s %s%%" % (t.name, _pct(t.share(resource))) for t in teams if isinstance(t.share(resource), Fraction))
            problems.append("gpufleet_teams: resource %s: the teams' shares add up to %s%% (%s), over 100%%" % (resource, _pct(total), parts))
    return problems


def _pct(value: Any) -> str:
    return ("%.2f" % (float(value) * 100)).rstrip("0").rstrip(".")


def team_problems(values: Mapping[str, Any]) -> List[str]:
    """The preflight's check of ``gpufleet_teams`` and ``gpufleet_quota_overcommit``."""
    _teams, problems = parse_teams(values.get("gpufleet_teams"))
    overcommit = values.get("gpufleet_quota_overcommit", False)
    if not isinstance(overcommit, bool):
        problems.append("gpufleet_quota_overcommit must be true or false, got %r" % (overcommit,))
    return problems


def profile_of(resource: str) -> Optional[str]:
    """The GI profile of a MIG resource as nvidia-smi and mig-parted name it (``nvidia.com/mig-1g.10gb.me.shared``
    -> ``1g.10gb+me``); None for a full GPU or a compute-instance name."""
    base = resource[:-len(".shared")] if resource.endswith(".shared") else resource
    if not base.startswith(MIG_PREFIX) or re.match(r"^[0-9]+c\.", base[len(MIG_PREFIX):]):
        return None
    suffix = base[len(MIG_PREFIX):]
    return _SUFFIXED.sub(r"\1+\2", suffix)


def fleet_profile_problems(teams: Sequence[Team], models: Sequence[GpuModel]) -> List[str]:
    """A share of a MIG profile that no GPU model of the fleet has can never give quota (issue 43): refused,
    naming the team, the resource and the fleet's MIG-capable models. ``models``: every MIG-capable model
    of the fleet; the caller passes none when a host's GPUs are not known (nothing is judged then)."""
    if not models:
        return []
    profiles = {p.name for m in models for p in m.profiles}
    names = ", ".join(sorted({m.key for m in models}))
    problems = []
    for team in teams:
        for resource, _share in team.shares:
            profile = profile_of(resource)
            if profile is not None and profile not in profiles:
                problems.append("gpufleet_teams (team %r): resource %s: no GPU of the fleet has MIG profile %s "
                                "(the fleet's MIG-capable models: %s)" % (team.name, resource, profile, names))
    return problems
