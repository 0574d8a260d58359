# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA objects the collection writes from the device kinds, and Kueue's deviceClassMappings (pure).

``resource.k8s.io/v1`` (Kubernetes 1.34+): a DeviceClass per kind (``spec.selectors[].cel.expression``),
a ResourceClaimTemplate per kind and namespace (``spec.spec.devices.requests[].exactly`` with
``deviceClassName``, ``selectors``, ``allocationMode: ExactCount``, ``count``; a shared kind adds
``spec.spec.devices.config[].opaque`` with the driver's ``GpuConfig``). Every object carries
``app.kubernetes.io/managed-by: gpufleet.sharing``.

Kueue (kueue.x-k8s.io config v1beta2, Kueue v0.19.2, site/content/en/docs/concepts/
dynamic_resource_allocation.md): ``resources.deviceClassMappings[] {name, deviceClassNames}`` maps each
DeviceClass a claim template names to the resource its ClusterQueues give quota of. Here each kind's
DeviceClass maps to the device plugin's resource name (``nvidia.com/mig-1g.10gb``, ``nvidia.com/gpu``),
so the teams' shares (``gpufleet_teams``) mean the same on both backends.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import (
    API_VERSION, DRIVER, KIND_LABEL, OWNER_KEY, OWNER_VALUE, REQUEST, SHARING, DeviceKind, TemplateRequest,
    resolve_kind)
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import qualified_name_problem

GPU_CONFIG_API = "resource.nvidia.com/v1beta1"
KUEUE_CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
_KEY_RULE = "a name of at most 63 letters, digits, '-', '_' or '.' after an optional DNS-subdomain prefix and '/'"


def _meta(name: str, kind: DeviceKind, namespace: str = "") -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "labels": {OWNER_KEY: OWNER_VALUE, KIND_LABEL: kind.name}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def device_class(kind: DeviceKind) -> Dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": _meta(kind.device_class, kind),
            "spec": {"selectors": [{"cel": {"expression": kind.selector()}}]}}


def claim_template(kind: DeviceKind, namespace: str, count: int = 1, device_class_name: str = "") -> Dict[str, Any]:
    """``device_class_name``: another class than the kind's own (the verification claims use the driver's)."""
    devices: Dict[str, Any] = {"requests": [{"name": REQUEST, "exactly": {
        "deviceClassName": device_class_name or kind.device_class, "selectors": [{"cel": {"expression": kind.selector()}}],
        "allocationMode": "ExactCount", "count": count}}]}
    if kind.sharing:
        devices["config"] = [{"requests": [REQUEST], "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": GPU_CONFIG_API, "kind": "GpuConfig", "sharing": {"strategy": SHARING[kind.sharing][0]}}}}]
    return {"apiVersion": API_VERSION, "kind": "ResourceClaimTemplate", "metadata": _meta(kind.name, kind, namespace),
            "spec": {"spec": {"devices": devices}}}


def plan_objects(requests: Sequence[TemplateRequest], kinds: Mapping[str, DeviceKind]
                 ) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[str]]:
    """(DeviceClasses of every kind, ResourceClaimTemplates, problems). A kind or profile the plan does not
    have is a problem naming it and the kinds the plan has; the same template twice with different counts too."""
    problems: List[str] = []
    chosen: Dict[Tuple[str, str], Tuple[DeviceKind, int]] = {}
    for i, request in enumerate(requests):
        wanted = [kinds[k] for k in sorted(kinds)] if not request.kinds else []
        for name in request.kinds:
            kind = resolve_kind(name, kinds)
            if kind is None:
                problems.append("claim_templates[%d]: %r is not a device kind of the plan (the planned nodes have: %s)"
                                % (i, name, ", ".join(sorted(kinds)) or "no GPU devices"))
            else:
                wanted.append(kind)
        for kind in wanted:
            for namespace in request.namespaces:
                before = chosen.get((namespace, kind.name))
                if before is not None and before[1] != request.count:
                    problems.append("claim_templates[%d]: template %s/%s asked with count %d and %d"
                                    % (i, namespace, kind.name, before[1], request.count))
                chosen[(namespace, kind.name)] = (kind, request.count)
    classes = [device_class(kinds[name]) for name in sorted(kinds)]  # every kind: Kueue's mappings name them all
    templates = [claim_template(kind, ns, count) for (ns, _name), (kind, count) in sorted(chosen.items())]
    return classes, templates, problems


def device_class_mappings(kinds: Sequence[DeviceKind]) -> List[Dict[str, Any]]:
    """Kueue's ``resources.deviceClassMappings``: one entry per resource, the DeviceClasses charged to it."""
    by_resource: Dict[str, List[str]] = {}
    for kind in kinds:
        by_resource.setdefault(kind.resource, []).append(kind.device_class)
    return [{"name": resource, "deviceClassNames": sorted(set(names))} for resource, names in sorted(by_resource.items())]


def mapping_problems(mappings: Sequence[Mapping[str, Any]]) -> List[str]:
    """What Kueue's manager refuses in ``resources.deviceClassMappings`` (kubernetes-sigs/kueue v0.19.2,
    pkg/config/validation.go, validateDeviceClassMappings): more than 16 mappings, more than 8 DeviceClasses
    in one, and a resource name or DeviceClass name that is not a label key (``content.IsLabelKey``: an
    optional DNS-subdomain prefix and '/', then a name of at most 63 characters). One bad entry makes Kueue
    refuse its whole configuration, so the manager does not start."""
    problems = []
    if len(mappings) > 16:
        problems.append("Kueue deviceClassMappings: %d resources, Kueue allows 16" % len(mappings))
    for mapping in mappings:
        if qualified_name_problem("", mapping["name"]):
            problems.append("Kueue deviceClassMappings: resource %r is not a label key (Kueue refuses the whole "
                            "configuration): %s" % (mapping["name"], _KEY_RULE))
        if len(mapping["deviceClassNames"]) > 8:
            problems.append("Kueue deviceClassMappings: resource %s has %d DeviceClasses, Kueue allows 8"
                            % (mapping["name"], len(mapping["deviceClassNames"])))
        problems += ["Kueue deviceClassMappings: resource %s: DeviceClass %r is not a label key (Kueue refuses the "
                     "whole configuration): %s" % (mapping["name"], name, _KEY_RULE)
                     for name in mapping["deviceClassNames"] if qualified_name_problem("", name)]
    return problems


def with_mappings(config: Mapping[str, Any], mappings: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Kueue's Configuration with ``resources.deviceClassMappings`` set to ``mappings`` (the rest kept)."""
    result = dict(config)
    resources = dict(result.get("resources") or {})
    if mappings:
        resources["deviceClassMappings"] = [dict(m) for m in mappings]
    else:
        resources.pop("deviceClassMappings", None)
    if resources:
        result["resources"] = resources
    else:
        result.pop("resources", None)
    return result
