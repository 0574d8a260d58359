# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout lock: a ``coordination.k8s.io/v1`` Lease, decided purely (no I/O, the clock passed in).

A Lease is held by ``spec.holderIdentity`` until ``spec.renewTime + spec.leaseDurationSeconds``;
after that anyone may take it over (``leaseTransitions`` counts the takeovers), as Kubernetes'
leader election does. ``decide`` says what to do for a wanted state (acquired, renewed, released, or checked: a read that
says whether a take would succeed, so that a run takes the lock only when it has something to change):
create, update (with the new spec), delete, nothing, or refuse with "held by X since T (expires E)".
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import object_name_problems, qualified_name_problem

LEASE_API_VERSION = "coordination.k8s.io/v1"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # metav1.MicroTime
FREE = "free"  # what a check says of a lock nobody holds


def lock_option_problems(params: Mapping[str, Any]) -> List[str]:
    """The Lease's name and namespace, and ``node_annotation`` (an annotation key: it is looked up on every
    node), each named; checked before the first request."""
    problems = object_name_problems([("name", "Lease", params.get("name")), ("namespace", "Namespace", params.get("namespace"))])
    return problems + [p for p in [qualified_name_problem("node_annotation", params.get("node_annotation"))] if p]


class LeaseDecision(NamedTuple):
    action: str  # create | update | delete | none | refuse
    message: str
    spec: Optional[Dict[str, Any]]


def format_time(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc).strftime(TIME_FORMAT)


def parse_time(text: str) -> float:
    """MicroTime or RFC 3339 seconds ("...Z") to epoch seconds."""
    fmt = TIME_FORMAT if "." in text else "%Y-%m-%dT%H:%M:%SZ"
    return _dt.datetime.strptime(text, fmt).replace(tzinfo=_dt.timezone.utc).timestamp()


def _expiry(spec: Dict[str, Any]) -> Optional[float]:
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    if not renewed or spec.get("leaseDurationSeconds") is None:
        return None  # never expires by itself: treat as expired (nobody renews it)
    return parse_time(renewed) + int(spec["leaseDurationSeconds"])


def held_by(lease: Dict[str, Any]) -> str:
    """"X since T (expires E)" for a lease's holder."""
    spec = lease.get("spec") or {}
    expiry = _expiry(spec)
    return "%s since %s (expires %s)" % (spec.get("holderIdentity"), spec.get("acquireTime"),
                                         format_time(expiry) if expiry is not None else "never")


def _new_spec(holder: str, duration: int, now: float, transitions: int, acquired: Optional[str] = None
              ) -> Dict[str, Any]:
    return {"holderIdentity": holder, "acquireTime": acquired or format_time(now), "renewTime": format_time(now),
            "leaseDurationSeconds": duration, "leaseTransitions": transitions}


def decide(lease: Optional[Dict[str, Any]], state: str, holder: str, duration: int, now: float) -> LeaseDecision:
    """What to do with the (current) ``lease`` so that ``holder`` has it in ``state``."""
    spec = (lease or {}).get("spec") or {}
    current = spec.get("holderIdentity")
    transitions = int(spec.get("leaseTransitions") or 0)
    ours = lease is not None and current == holder
    if state == "released":
        if lease is None:
            return LeaseDecision("none", "not held", None)
        if not ours:
            return LeaseDecision("none", "not ours: held by %s" % held_by(lease), None)
        return LeaseDecision("delete", "released", None)
    if state == "checked":
        return _check(decide(lease, "acquired", holder, duration, now))
    if ours:
        return LeaseDecision("update", "renewed", _new_spec(holder, duration, now, transitions, spec.get("acquireTime")))
    if state == "renewed":
        return LeaseDecision("refuse", "not held by %s: %s" % (
            holder, "held by " + held_by(lease) if lease is not None and current else "nobody holds it"), None)
    if lease is None:
        return LeaseDecision("create", "acquired", _new_spec(holder, duration, now, 0))
    expiry = _expiry(spec)
    if current and expiry is not None and expiry > now:
        return LeaseDecision("refuse", "held by " + held_by(lease), None)
    taken = "acquired (the lease of %s had expired)" % held_by(lease) if current else "acquired"
    return LeaseDecision("update", taken, _new_spec(holder, duration, now, transitions + (1 if current else 0)))


def _check(take: LeaseDecision) -> LeaseDecision:
    """The take's decision without its write: refused as the take is, else free or expired (never a write)."""
    if take.action == "refuse":
        return take
    if take.message.startswith("acquired ("):
        return LeaseDecision("none", "expired" + take.message[len("acquired"):], None)
    return LeaseDecision("none", FREE, None)


def taken_as_checked(checked: str, taken: str) -> bool:
    """Whether a take's message agrees with the check before it (nobody held the Lease in between).

    A check that found the lock free is followed by a plain take; one that found an expired holder, by a
    takeover. Anything else means another run held the Lease between the two, and what was read and
    planned after the check may be stale.
    """
    if checked == FREE:
        return taken == "acquired"
    return checked.startswith("expired (") and taken == "acquired" + checked[len("expired"):]
