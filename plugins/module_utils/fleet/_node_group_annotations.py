# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Cluster Autoscaler's scale-from-zero annotations on a node group's MachineDeployments (issue 39):
which MachineDeployments, and which annotations each gets or loses.

Pure. A group's template (``_node_groups``) gives its annotations where ``clusterapi.expressible``; the
GPU keys (``gpu-type``, ``gpu-count``, ``dra-driver``) are removed where it is not, so that no stale pair
describes a node the group no longer makes. Every other annotation of the object stays as it is
(kubernetes/autoscaler cluster-autoscaler-1.36.1 ``cloudprovider/clusterapi/clusterapi_utils.go``)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._node_groups import CAPI_PREFIX

GPU_KEYS = tuple(CAPI_PREFIX + k for k in ("gpu-type", "gpu-count", "dra-driver"))
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

Target = Tuple[str, str, str]  # (group, namespace, name)


class AnnotationError(ProblemsError):
    """The MachineDeployments to annotate cannot be told."""


def targets(groups: Sequence[Mapping[str, Any]], templates: Mapping[str, Any]) -> List[Target]:
    """Every (group, namespace, name) the groups' ``machine_deployments`` name; AnnotationError with every problem."""
    problems: List[str] = []
    found: List[Target] = []
    known = (templates or {}).get("groups") or {}
    for group in groups:
        name = group.get("name")
        for index, entry in enumerate(group.get("machine_deployments") or []):
            where = "node group %r machine_deployments[%d]" % (name, index)
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                problems.append("%s: must be {name, namespace}, got %r" % (where, entry))
                continue
            namespace = entry.get("namespace") or "default"
            if len(entry["name"]) > 253 or not _DNS_SUBDOMAIN.match(entry["name"]):
                problems.append("%s: name %r is not a valid object name" % (where, entry["name"]))
            elif not isinstance(namespace, str) or len(namespace) > 63 or not _DNS_LABEL.match(namespace):
                problems.append("%s: namespace %r is not a valid namespace name" % (where, namespace))
            elif name not in known:
                problems.append("%s: the group has no template (not in play, or no GPU host)" % where)
            else:
                found.append((str(name), namespace, entry["name"]))
    claimed: Dict[Tuple[str, str], str] = {}
    for group, namespace, name in found:
        if claimed.setdefault((namespace, name), group) != group:
            problems.append("MachineDeployment %s/%s is named by the node groups %r and %r" % (namespace, name, claimed[(namespace, name)], group))
    if problems:
        raise AnnotationError(problems)
    return found


def wanted(templates: Mapping[str, Any], group: str) -> Dict[str, Optional[str]]:
    """Annotation -> value (None: remove) for a MachineDeployment of ``group``."""
    capi = templates["groups"][group]["clusterapi"]
    values: Dict[str, Optional[str]] = {key: None for key in GPU_KEYS}
    if capi.get("expressible"):
        values.update(capi.get("annotations") or {})
    return values


def annotated(current: Mapping[str, str], values: Mapping[str, Optional[str]]) -> Dict[str, str]:
    """``current`` with ``values`` applied (the others kept)."""
    after = dict(current)
    for key, value in values.items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    return after
