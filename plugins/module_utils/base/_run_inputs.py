# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bounds of the run's numbers and names, one rule each, shared by the modules and the preflight (pure).

A module checks its option (``probe_min_share``), the preflight of ``site.yml`` and ``verify.yml`` the
playbook variable that feeds it (``verify_probe_min_share``) with the same function, so that a value
refused at the end of a run is refused before anything changes. Text from an inventory (``"nan"``,
``"1e9"``) is converted as Ansible converts an option; NaN and infinities are refused everywhere.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, List, Mapping, Optional, Tuple

# Kubernetes object names (DNS-1123 subdomain, as _k8s.name_problem); a Node's name is one.
_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
INT32_MAX = 2 ** 31 - 1  # coordination.k8s.io/v1 Lease spec.leaseDurationSeconds is an int32
LEASE_MAX = 86400  # a lock a dead run leaves expires within a day
HOLDER_MAX = 128
PROBE_SECONDS_MAX = 3600  # the probe pod's own deadline is twice this plus 30 (gpu_verify)


def _number(value: Any, integer: bool) -> Optional[float]:
    """``value`` as Ansible converts an int or float option; None when it is not a finite number."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if not integer else float(int(str(value).strip()) if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or (integer and number != int(number)):
        return None
    return number


def bounded(name: str, value: Any, low: float, high: float, integer: bool = False, zero_ok: str = "",
            why: str = "") -> Optional[str]:
    """Why ``value`` is not a finite number from ``low`` to ``high`` (or 0, meaning ``zero_ok``); None if it is."""
    number = _number(value, integer)
    if number is not None and ((zero_ok and number == 0) or low <= number <= high):
        return None
    wanted = "%s from %s to %s%s" % ("an integer" if integer else "a number", low, high,
                                     " (or 0: %s)" % zero_ok if zero_ok else "")
    return "%s must be %s, got %r%s" % (name, wanted, value, (": " + why) if why else "")


def probe_problems(values: Mapping[str, Any], prefix: str = "") -> List[str]:
    """The probe's numbers, named ``<prefix>probe_seconds`` etc. (missing ones are skipped)."""
    share_why = "a fraction of the fair share; above 1 can never pass, 0 only reports"
    inflation_why = "contended time / time alone; below 1 can never pass"
    rules: List[Tuple[str, Callable[[str, Any], Optional[str]]]] = [
        ("probe_seconds", lambda n, v: bounded(n, v, 1, PROBE_SECONDS_MAX, integer=True)),
        ("probe_min_share", lambda n, v: bounded(n, v, 0, 1, why=share_why)),
        ("probe_max_inflation", lambda n, v: bounded(n, v, 1, 1000, zero_ok="only report", why=inflation_why)),
    ]
    found = [rule(prefix + name, values[prefix + name]) for name, rule in rules if values.get(prefix + name) is not None]
    return [problem for problem in found if problem]


def lock_problems(duration: Any, holder: Any = None, name: str = "lease_duration") -> List[str]:
    """The rollout lock's Lease duration (seconds) and holder identity."""
    problems = [p for p in [bounded(name, duration, 1, LEASE_MAX, integer=True,
                                    why="the Lease's leaseDurationSeconds (int32); a run renews it, a dead "
                                        "run's lock expires after it")] if p]
    if holder is not None and (not isinstance(holder, str) or not holder.strip() or len(holder) > HOLDER_MAX
                               or not holder.isprintable()):
        problems.append("holder must be 1 to %d printable characters, got %d characters"
                        % (HOLDER_MAX, len(holder) if isinstance(holder, str) else 0))
    return problems


def node_name_problem(name: str, value: Any) -> Optional[str]:
    if isinstance(value, str) and _SUBDOMAIN.match(value):
        return None
    return "%s %r is not a Kubernetes node name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', " \
           "at most 253 characters)" % (name, value if not isinstance(value, str) else value[:80])


# systemd.unit(5) "Description": the characters of a unit name, the unit types, the length with the
# suffix; a name without a known type suffix is a service to systemctl (it appends ".service").
UNIT_TYPES = ("service", "socket", "device", "mount", "automount", "swap", "target", "path", "timer", "slice", "scope")
UNIT_NAME_MAX = 255
_UNIT_CHAR = re.compile(r"[A-Za-z0-9:_.\\@-]")


def _unit_name_reason(unit: str) -> Optional[str]:
    """Why ``unit`` cannot be started or stopped by name (a reason), None when it can."""
    if not unit:
        return "it is empty"
    bad = next((char for char in unit if not _UNIT_CHAR.fullmatch(char)), None)
    if bad is not None:
        return "%r is not allowed (ASCII letters, digits, ':', '-', '_', '.', '\\' and '@' only)" % bad
    if unit.startswith("-"):
        return "it starts with '-' (systemctl would read it as an option)"
    stem, dot, kind = unit.rpartition(".")
    suffix = "." + kind if dot and kind in UNIT_TYPES else ".service"
    prefix = stem if suffix != ".service" or (dot and kind == "service") else unit
    if len(prefix) + len(suffix) > UNIT_NAME_MAX:
        return "it is longer than %d characters with its suffix %s" % (UNIT_NAME_MAX, suffix)
    if not prefix:
        return "there is nothing before '%s'" % suffix
    if prefix.count("@") > 1:
        return "it has more than one '@'"
    template, at, instance = prefix.partition("@")
    if at and not template:
        return "there is nothing before '@'"
    if at and not instance:
        return "it is a template without an instance (%s@<instance>%s)" % (template, suffix)
    return None


def unit_names_problems(name: str, value: Any) -> List[str]:
    """The entries of ``value`` (a list) that are no systemd unit name systemctl can start and stop, each
    named ``<name>[<index>]`` with the reason: they go into systemctl's argv."""
    if not isinstance(value, (list, tuple)):
        return ["%s must be a list of systemd unit names, got %r" % (name, value if not isinstance(value, str) else value[:80])]
    problems = []
    for index, unit in enumerate(value):
        reason = _unit_name_reason(unit) if isinstance(unit, str) else "it is not a string (%s)" % type(unit).__name__
        if reason:
            shown = unit[:80] if isinstance(unit, str) else unit
            problems.append("%s[%d] %r is not a systemd unit name: %s" % (name, index, shown, reason))
    return problems


# An interpreter the probe pod's container runs as its command (exec form, argv[0]: no shell reads it).
_PROGRAM = re.compile(r"^(/?[A-Za-z0-9_+][A-Za-z0-9._+-]*)(/[A-Za-z0-9_+][A-Za-z0-9._+-]*)*$")


def interpreter_problem(name: str, value: Any) -> Optional[str]:
    """Why ``value`` is no program name (``python3``) or absolute path (``/usr/bin/python3``): a shell string
    (``python3; id``), arguments, a relative path with ``..``."""
    if isinstance(value, str) and len(value) <= 255 and _PROGRAM.match(value) and (value.startswith("/") or "/" not in value) \
            and ".." not in value.split("/"):
        return None
    return ("%s %r is not an interpreter: give a program name or an absolute path (letters, digits, '.', '_', '+', '-'; "
            "no spaces, arguments or shell characters)" % (name, value[:80] if isinstance(value, str) else value))


def run_variable_problems(values: Mapping[str, Any]) -> List[str]:
    """The playbook variables that reach a module or a command late in a run (the lock, the probe, the node
    name, the mig role's GPU client services)."""
    problems = probe_problems(values, "verify_")
    if values.get("gpufleet_rollout_lock_duration") is not None:
        problems += lock_problems(values["gpufleet_rollout_lock_duration"], name="gpufleet_rollout_lock_duration")
    if values.get("gpufleet_node_name") is not None:
        problems += [p for p in [node_name_problem("gpufleet_node_name", values["gpufleet_node_name"])] if p]
    if values.get("mig_gpu_clients") is not None:
        problems += unit_names_problems("mig_gpu_clients", values["mig_gpu_clients"])
    return problems


__all__ = ["HOLDER_MAX", "INT32_MAX", "LEASE_MAX", "PROBE_SECONDS_MAX", "UNIT_NAME_MAX", "UNIT_TYPES", "bounded", "interpreter_problem",
           "lock_problems", "node_name_problem", "probe_problems", "run_variable_problems", "unit_names_problems"]
