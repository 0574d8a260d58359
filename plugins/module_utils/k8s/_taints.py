# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node taints declared in the inventory, the tolerations they need, and what tolerates what.

Pure, no I/O (docs/reference/specs.md §17.3). The taints the collection set on a node are recorded in
the node annotation ``gpufleet.sharing/taints`` so that a taint removed from the inventory is removed
from the node, and a taint someone else set is never touched. Every GPU host of the inventory is passed,
those that declare no taint with an empty list, so that removing the variable removes the taints.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._values_tree import get_path, set_path

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
OWNED_ANNOTATION = "gpufleet.sharing/taints"
# The chart's default operand toleration (§17.3), kept when tolerations are added to daemonsets.tolerations.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Key prefixes owned by Kubernetes' own components (§17.3): the node lifecycle controller and the kubelet
# set and remove node.kubernetes.io/* (k8s.io/api core/v1 well_known_taints.go: not-ready, unreachable,
# unschedulable, memory-/disk-/pid-pressure, network-unavailable, out-of-service), the cloud controller
# node.cloudprovider.kubernetes.io/* (k8s.io/cloud-provider api/well_known_taints.go: uninitialized,
# shutdown), kubeadm node-role.kubernetes.io/control-plane; kubernetes.io and k8s.io, with their
# subdomains, are reserved for Kubernetes core components (the well-known labels, annotations and taints).
RESERVED_DOMAINS = ("kubernetes.io", "k8s.io")
# Kubernetes bounds no node's taint count (validateNodeTaints checks each taint and their uniqueness only);
# every declared taint becomes an operand toleration, and a node's taints are matched against every pod's
# tolerations: far more than any real node carries.
MAX_TAINTS = 32


def _key_problem(key: Any) -> Optional[str]:
    if not isinstance(key, str) or not key:
        return "key is required"
    prefix, _sep, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _PREFIX.match(prefix))) or len(name) > 63 or not _NAME.match(name):
        return "key %r is not a qualified name ([prefix/]name)" % key
    if any(prefix == domain or prefix.endswith("." + domain) for domain in RESERVED_DOMAINS):
        return ("key %r is reserved for Kubernetes (the kubelet, the node lifecycle controller or the cloud provider "
                "sets and removes taints under %s): choose a key of your own domain" % (key, prefix))
    return None


def taint_problems(taints: Any, where: str) -> List[str]:
    """Every reason ``taints`` (a list of {key, value, effect}) cannot be set, each naming ``where``."""
    if not isinstance(taints, list):
        return ["%s: taints must be a list of {key, value, effect}, got %r" % (where, taints)]
    if len(taints) > MAX_TAINTS:
        return ["%s: %d taints, at most %d per node" % (where, len(taints), MAX_TAINTS)]
    problems = []
    for index, taint in enumerate(taints):
        label = "%s: taint %d" % (where, index + 1)
        if not isinstance(taint, Mapping):
            problems.append("%s must be a mapping {key, value, effect}, got %r" % (label, taint))
            continue
        unknown = sorted(set(taint) - {"key", "value", "effect"})
        problems += ["%s: unknown field %r" % (label, field) for field in unknown]
        key_problem = _key_problem(taint.get("key"))
        if key_problem:
            problems.append("%s: %s" % (label, key_problem))
        value = str(taint.get("value") or "")
        if len(value) > 63 or not _VALUE.match(value):
            problems.append("%s (%s): value %r is not a label value" % (label, taint.get("key"), value))
        if taint.get("effect") not in EFFECTS:
            problems.append("%s (%s): invalid effect %r, expected one of %s"
                            % (label, taint.get("key"), taint.get("effect"), ", ".join(EFFECTS)))
    pairs = [(t.get("key"), t.get("effect")) for t in taints if isinstance(t, Mapping)]
    # Kubernetes: "taints must be unique by key and effect pair" (validateNodeTaints)
    problems += ["%s: taint %s:%s given more than once (a node's taints are unique by key and effect)" % (where, key, effect)
                 for key, effect in sorted({pair for pair in pairs if pairs.count(pair) > 1}, key=str)]
    return problems


def normal(taint: Mapping[str, Any]) -> Dict[str, str]:
    result = {"key": str(taint["key"]), "effect": str(taint["effect"])}
    if taint.get("value"):
        result["value"] = str(taint["value"])
    return result


def toleration_for(taint: Mapping[str, Any]) -> Dict[str, str]:
    toleration = {"key": str(taint["key"]), "effect": str(taint["effect"])}
    if taint.get("value"):
        toleration.update(operator="Equal", value=str(taint["value"]))
    else:
        toleration["operator"] = "Exists"
    return toleration


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule (§17.3)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        operator = toleration.get("operator") or "Equal"
        if not toleration.get("key"):
            if operator == "Exists":
                return True
            continue
        if toleration.get("key") != taint.get("key"):
            continue
        if operator == "Exists" or str(toleration.get("value") or "") == str(taint.get("value") or ""):
            return True
    return False


def tolerations_for(taints: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]] = ()) -> List[Dict[str, Any]]:
    """``base`` plus a toleration for each taint ``base`` does not tolerate yet, without duplicates."""
    result = [dict(item) for item in base]
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(result, taint):
            result.append(toleration_for(taint))
    return result


def untolerated(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> List[Dict[str, str]]:
    """The scheduling taints (NoSchedule, NoExecute) that ``tolerations`` do not tolerate."""
    return [normal(t) for t in taints if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)]


def owned(node: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """(key, effect) of the taints this collection set on ``node`` (its annotation)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(OWNED_ANNOTATION)
    try:
        return [(str(item[0]), str(item[1])) for item in json.loads(raw)] if raw else []
    except (ValueError, TypeError, IndexError):
        return []


def node_taints(node: Mapping[str, Any], declared: Sequence[Mapping[str, Any]]) -> Tuple[List[Dict[str, Any]], str]:
    """The node's taints with ``declared`` in force (ours no longer declared removed, others kept), and
    the annotation value that records ours."""
    wanted = [normal(t) for t in declared]
    ours = set(owned(node)) | {(t["key"], t["effect"]) for t in wanted}
    kept = [dict(t) for t in (node.get("spec") or {}).get("taints") or [] if (t.get("key"), t.get("effect")) not in ours]
    return kept + wanted, json.dumps(sorted([t["key"], t["effect"]] for t in wanted))


def stranding_problems(node: str, declared: Sequence[Mapping[str, Any]],
                       operand_tolerations: Sequence[Mapping[str, Any]]) -> List[str]:
    """A taint this collection would leave on ``node`` that the operator's operands will not tolerate (the
    chart's nvidia.com/gpu toleration plus ``operand_tolerations``): the device plugin would leave the node
    and it would advertise no GPU (issue 21). Refused before any node is changed."""
    return ["node %s: taint %s=%s:%s would be tolerated by no operand of the GPU Operator (operand_tolerations): "
            "its device plugin would leave and the node would advertise no GPU" % (node, t["key"], t.get("value", ""), t["effect"])
            for t in untolerated(declared, [GPU_TOLERATION] + list(operand_tolerations))]


# The chart values that hold the tolerations of pods that must run on GPU nodes (§17.3).
TOLERATION_PATHS = (("daemonsets", "tolerations"), ("node-feature-discovery", "worker", "tolerations"))


def toleration_values(chart_values: Mapping[str, Any], values: Mapping[str, Any],
                      extra: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Overrides adding ``extra`` to each toleration list of TOLERATION_PATHS the chart has, on top of the
    list in ``values`` or else the chart's default (setting a list replaces it, §17.3)."""
    overrides: Dict[str, Any] = {}
    for path in TOLERATION_PATHS:
        in_chart, default = get_path(chart_values, path)
        if not in_chart or not extra:
            continue
        in_values, current = get_path(values, path)
        merged = [dict(t) for t in ((current if in_values else default) or [])]
        merged += [dict(t) for t in extra if dict(t) not in merged]
        set_path(overrides, path, merged)
    return overrides


__all__ = ["EFFECTS", "MAX_TAINTS", "RESERVED_DOMAINS", "TOLERATION_PATHS", "toleration_values", "GPU_TOLERATION", "OWNED_ANNOTATION",
           "node_taints", "normal", "owned",
           "stranding_problems", "taint_problems", "toleration_for", "tolerations_for", "tolerates", "untolerated"]
