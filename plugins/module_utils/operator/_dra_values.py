# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA driver's Helm values and the node labels of each backend (pure).

Keys are those of NVIDIA's chart (kubernetes-sigs/dra-driver-nvidia-gpu v0.5.0, read at main 9593204,
``deployments/helm/dra-driver-nvidia-gpu/values.yaml``; v0.4.1 and v25.12.0 ``nvidia-dra-driver-gpu`` have the
same keys): ``resources.gpus.enabled`` with ``gpuResourcesEnabledOverride`` (``templates/validation.yaml``
refuses GPUs through DRA without it, because the driver cannot share a node with the device plugin),
``resources.computeDomains.enabled``, ``featureGates``, ``nvidiaDriverRoot``, ``nameOverride``,
``kubeletPlugin.nodeSelector`` and ``kubeletPlugin.tolerations`` (default ``[]`` in v25.12.0,
``nvidia.com/gpu:NoSchedule`` from v0.4.0: written only when the inventory adds to it, else the default would
be wiped). The device plugin is turned off per node with the operator's deploy label
``nvidia.com/gpu.deploy.device-plugin=false`` (gpu-operator docs, "GPU Operator with DRA").
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_preflight import gate_problems, gate_values
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_versions import NEW_CHART, OLD_CHART, selector
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import merge
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError

DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
BACKEND_LABEL = "gpufleet.sharing/gpu-backend"
# The kubelet plugin pods' selector label per release name (templates/_helpers.tpl, selectorLabels): the old
# chart's, kept by an upgrade with nameOverride, and the new chart's from v0.4.0.
KUBELET_PLUGIN_SELECTORS = (selector(OLD_CHART), selector(NEW_CHART))


class DraValuesError(ProblemsError):
    """Values the driver or its chart would refuse; ``problems`` lists each."""


def _explicit(gates: Mapping[str, Any], version: Optional[str]) -> Dict[str, bool]:
    """Only the gates the inventory sets (the chart passes them as --feature-gates), checked against the
    driver ``version`` being installed."""
    merged, problems = gate_values(gates, version)
    problems += gate_problems(merged, version)
    if problems:
        raise DraValuesError(problems)
    return {name: bool(value) for name, value in sorted(gates.items())}


def driver_values(feature_gates: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]],
                  values: Optional[Mapping[str, Any]] = None, chart_tolerations: Sequence[Mapping[str, Any]] = (),
                  compute_domains: bool = False, version: Optional[str] = None, driver_root: Optional[str] = None,
                  name_override: str = "") -> Dict[str, Any]:
    """The release's values: GPUs through DRA on the nodes labelled for DRA only, the gates asked for (checked
    against driver ``version``), ``tolerations`` added to the kubelet plugin's (``chart_tolerations``, the
    chart's own) only when they add one, ``nvidiaDriverRoot`` from the driver mode, ``nameOverride`` kept on an
    upgrade from the old chart, then ``values`` merged; a ``values`` entry that contradicts a typed setting is
    refused."""
    extra = dict(values or {})
    plugin: Dict[str, Any] = {"nodeSelector": {BACKEND_LABEL: "dra"}}
    planned: Dict[str, Any] = {
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": compute_domains}},
        "gpuResourcesEnabledOverride": True,
        "kubeletPlugin": plugin,
    }
    added = _tolerations(extra, tolerations, chart_tolerations)
    if added is not None:
        plugin["tolerations"] = added
    if driver_root:
        planned["nvidiaDriverRoot"] = driver_root
    if name_override:
        planned["nameOverride"] = name_override
    gates = _explicit(feature_gates, version)
    if gates:
        planned["featureGates"] = gates
    problems = _contradictions(planned, extra)
    if problems:
        raise DraValuesError(problems)
    return merge(extra, planned)


def _tolerations(extra: Mapping[str, Any], ours: Sequence[Mapping[str, Any]],
                 chart: Sequence[Mapping[str, Any]]) -> Optional[List[Dict[str, Any]]]:
    """The kubelet plugin's tolerations to write, or None when ours add nothing to the base (the user's
    ``values`` list, else the chart's defaults): writing a list replaces the chart's."""
    plugin = extra.get("kubeletPlugin") if isinstance(extra.get("kubeletPlugin"), Mapping) else {}
    base = plugin.get("tolerations") if isinstance(plugin.get("tolerations"), list) else chart
    found = [dict(t) for t in base]
    added = [dict(t) for t in ours if dict(t) not in found]
    return found + added if added else None


def _contradictions(planned: Mapping[str, Any], extra: Mapping[str, Any], path: str = "") -> List[str]:
    problems: List[str] = []
    for key, value in planned.items():
        if key not in extra or key == "tolerations":
            continue
        where = "%s%s" % (path, key)
        if isinstance(value, Mapping) and isinstance(extra[key], Mapping):
            problems += _contradictions(value, extra[key], where + ".")
        elif extra[key] != value:
            problems.append("values.%s is %r but the DRA backend needs %r" % (where, extra[key], value))
    return problems


def node_labels(backend: str, live: Mapping[str, str]) -> Dict[str, Optional[str]]:
    """The label changes that put a node on ``backend`` given its ``live`` labels (None removes a label):
    on DRA the operator's device plugin is off and the kubelet plugin selects the node; back on the
    device plugin our label goes and the deploy label returns to the operator's ``true``, only where we
    had set it (a node never on DRA is not touched)."""
    if backend == "dra":
        wanted: Dict[str, Optional[str]] = {DEVICE_PLUGIN_LABEL: "false", BACKEND_LABEL: "dra"}
    elif BACKEND_LABEL in live:
        wanted = {DEVICE_PLUGIN_LABEL: "true", BACKEND_LABEL: None}
    else:
        wanted = {}
    return {key: value for key, value in wanted.items() if live.get(key) != value}


def split_nodes(dra: Sequence[str], device_plugin: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The nodes of each backend; a node named in both is refused (one node, one backend)."""
    both = sorted(set(dra) & set(device_plugin))
    if both:
        raise DraValuesError(["node %s: asked on both backends (dra_nodes and device_plugin_nodes); a node runs either "
                              "the device plugin or the DRA kubelet plugin" % node for node in both])
    return sorted(set(dra)), sorted(set(device_plugin))
