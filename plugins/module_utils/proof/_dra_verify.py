# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The proof under the DRA backend (pure): each node's ResourceSlices against the planned devices, and
the verification claims (one per node and device kind) that ``gpu_verify``'s pods are bound to.

A ResourceSlice (``resource.k8s.io/v1``) names its node (``spec.nodeName``), driver and pool (``name``,
``generation``: a republished pool has a higher generation and the older slices go away) and lists
``spec.devices[] {name, attributes}``; an attribute is ``{string|int|bool|version: value}`` under its
qualified name, the driver's own ones unqualified (``type``, ``profile``, ``uuid``, ``parentUUID``,
``productName``; see ``_dra_claims``). The rows are ``_verify.Check``s, so the table, JSON, JUnit and the
HTML page show them as any other.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import (
    API_VERSION, DRIVER, OWNER_KEY, OWNER_VALUE, PlannedDevice)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_objects import claim_template
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import GPU_RESOURCE
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import mig_resource_name
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import RUN_ID_LABEL, Check, PodSpecWanted

_PARENT_RE = re.compile(r"^(gpu-[0-9]+)(-mig-.*)?$")
Key = Tuple[str, str, str]  # (parent GPU, type, profile or product)


def attribute(device: Mapping[str, Any], name: str) -> Optional[str]:
    """A device attribute's value as text, under its short or its driver-qualified name."""
    attrs = device.get("attributes") or {}
    value = attrs.get(name) or attrs.get("%s/%s" % (DRIVER, name)) or {}
    for field in ("string", "version", "int", "bool"):
        if field in value:
            return str(value[field])
    return None


def node_slices(slices: Sequence[Mapping[str, Any]], node: str) -> List[Mapping[str, Any]]:
    """The node's slices of the driver, newest generation of each pool only."""
    mine = [s for s in slices if (s.get("spec") or {}).get("nodeName") == node and (s.get("spec") or {}).get("driver") == DRIVER]
    newest: Dict[str, int] = {}
    for piece in mine:
        pool = piece["spec"].get("pool") or {}
        newest[str(pool.get("name"))] = max(newest.get(str(pool.get("name")), 0), int(pool.get("generation") or 0))
    return [s for s in mine if int((s["spec"].get("pool") or {}).get("generation") or 0) == newest[str((s["spec"].get("pool") or {}).get("name"))]]


def _live_key(device: Mapping[str, Any], by_uuid: bool) -> Key:
    kind = attribute(device, "type") or "unknown"
    match = _PARENT_RE.match(str(device.get("name") or ""))
    if kind == "mig":
        parent = attribute(device, "parentUUID") if by_uuid else None
        return (parent or (match.group(1) if match else "?"), "mig", attribute(device, "profile") or "?")
    parent = attribute(device, "uuid") if by_uuid else None
    return (parent or (match.group(1) if match else str(device.get("name"))), kind, attribute(device, "productName") or "")


def _planned_key(device: PlannedDevice) -> Key:
    kind = device.kind
    return (device.parent, kind.type, (kind.profile or "") if kind.type == "mig" else (kind.product or ""))


def _describe(key: Key) -> str:
    return "%s %s %s" % key if key[2] else "%s %s" % key[:2]


def slice_checks(node: str, planned: Sequence[PlannedDevice], slices: Sequence[Mapping[str, Any]]) -> List[Check]:
    """One row per (parent GPU, type, profile): the planned count against what the node's slices list.
    A full GPU's product is compared only when the plan knows it."""
    mine = node_slices(slices, node)
    if not mine:
        return [Check(node, "slice", DRIVER, "ResourceSlices of %s" % DRIVER, "none", False,
                      "node %s has no ResourceSlice of driver %s: is its kubelet plugin running?" % (node, DRIVER))]
    by_uuid = any(d.uuid for d in planned)
    want = Counter(_planned_key(d) for d in planned)
    have = Counter(_live_key(dev, by_uuid) for s in mine for dev in (s.get("spec") or {}).get("devices") or [])
    for key in list(have):  # a full GPU of unknown product in the plan matches any product
        loose = (key[0], key[1], "")
        if key[1] == "gpu" and key not in want and loose in want:
            have[loose] += have.pop(key)
    checks = []
    for key in sorted(set(want) | set(have)):
        ok = want.get(key, 0) == have.get(key, 0)
        checks.append(Check(node, "slice", _describe(key), str(want.get(key, 0)), str(have.get(key, 0)), ok,
                            "" if ok else "ResourceSlice devices %s: %d published, the plan says %d" % (
                                _describe(key), have.get(key, 0), want.get(key, 0))))
    return checks


def pods_for_devices(devices: Sequence[PlannedDevice]) -> List[PodSpecWanted]:
    """One verification pod per node and device kind, bound to a claim of that kind."""
    seen = sorted({(d.node, d.kind.name): d for d in devices}.items())
    return [PodSpecWanted(d.node, d.kind.resource, d.kind.type, d.kind.profile, kind=d.kind, count=1) for _key, d in seen]


def claim_body(wanted: PodSpecWanted, name: str, namespace: str, run_id: str) -> Dict[str, Any]:
    """The verification pod's own ResourceClaim: the kind's claim template's spec with the driver's DeviceClass
    (so that the proof does not depend on gpu_claim_templates having run), labelled with the run."""
    template = claim_template(wanted.kind, namespace, device_class_name=wanted.kind.driver_class) if wanted.kind else {}
    labels = {OWNER_KEY: OWNER_VALUE, RUN_ID_LABEL: run_id}
    return {"apiVersion": API_VERSION, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": template["spec"]["spec"]}


def allocated_devices(claim: Optional[Mapping[str, Any]]) -> List[str]:
    """``driver/pool/device`` of each device the claim's allocation holds."""
    results = (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return ["%s/%s/%s" % (r.get("driver"), r.get("pool"), r.get("device")) for r in results]


def report_nodes(devices: Mapping[str, Sequence[PlannedDevice]]) -> List[Dict[str, Any]]:
    """The DRA nodes as the report's ``nodes`` entries (the page lists them with their rows and pods):
    no extended resource or GFD label, the planned devices per parent GPU, type and profile or product."""
    entries = []
    for node, planned in sorted(devices.items()):
        counts = Counter((d.parent, d.kind.type, d.kind.profile or d.kind.product or "", d.kind.name) for d in planned)
        entries.append({"node": node, "backend": "dra", "config": None, "sharing": None, "mig_strategy": None,
                        "resources": {}, "labels": {}, "product_suffixes": {}, "gpus": None,
                        "devices": [{"parent": p, "type": t, "model": m, "kind": k, "count": n}
                                    for (p, t, m, k), n in sorted(counts.items())]})
    return entries


def slice_resources(slices: Sequence[Mapping[str, Any]], node: str) -> Dict[str, int]:
    """What a DRA node offers now, per resource name as Kueue's quotas count it (``_dra_claims.DeviceKind.resource``):
    its published MIG devices per profile and its full GPUs."""
    counts: Counter = Counter()
    for piece in node_slices(slices, node):
        for dev in (piece.get("spec") or {}).get("devices") or []:
            kind = attribute(dev, "type")
            if kind == "mig":
                counts[mig_resource_name(attribute(dev, "profile") or "")] += 1
            elif kind == "gpu":
                counts[GPU_RESOURCE] += 1
    return dict(sorted(counts.items()))
