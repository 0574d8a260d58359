# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster side of gpu_quotas: the fleet plan's nodes, the live Kueue objects, the writes.

Writes go through ``K8sClient`` (a server-side dry run in check mode). An object the plan names that
exists without ``app.kubernetes.io/managed-by=gpufleet.sharing`` is refused by name before anything is
written; owned objects the plan no longer names are deleted (LocalQueues, then ClusterQueues, then
ResourceFlavors) unless the state keeps them.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._apply import object_key, replacement, unlisted
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._dra_plan import plan_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import PlannedDevice, kind_capacity
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._dra_verify import slice_resources
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_read import planned_fleet
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import BUILTIN_TYPES, label_selector
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_objects import OWNER, owned
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import Team, fleet_profile_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import GpuModel, find_model

TYPES = {kind: BUILTIN_TYPES[kind] for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue")}  # API_VERSION
SPEC_FIELDS = {"ResourceFlavor": ("nodeLabels", "nodeTaints", "tolerations"),
               "ClusterQueue": ("cohortName", "namespaceSelector", "resourceGroups"),
               "LocalQueue": ("clusterQueue",)}
QUANTITY_FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")


def plan_models(plans: Mapping[str, Any]) -> List[GpuModel]:
    """The MIG-capable catalog models of the hosts' plans (declared ``gpus`` or read ``gpu_facts``); none when a
    host's GPUs are not known, so that nothing is judged on a part of the fleet."""
    models: Dict[str, GpuModel] = {}
    for plan in plans.values():
        entries = list(plan.gpus) or list(plan.gpu_facts)
        if not entries:
            return []
        for gpu in entries:
            model = find_model(str(gpu.get("model") or gpu.get("name") or ""), gpu.get("pci_device_id"))
            if model is not None:
                models[model.key] = model
    return [models[k] for k in sorted(models)]


def planned_nodes(mod: Any, teams: Sequence[Team]) -> Tuple[List[Dict[str, Any]], Dict[str, List[PlannedDevice]], List[Dict[str, Any]]]:
    """Per node in the plan: what it will advertise, its labels (the plan's over the live ones), its taints;
    a DRA node (option ``dra_nodes``) offers its planned devices instead. Also the DRA nodes' devices, and
    the node list as read (what ``advertised_nodes`` judges when nothing was written since). Fails, before
    anything is written, on a team's share of a MIG profile no GPU model of the fleet has."""
    read, fleet = planned_fleet(mod)
    unknown = fleet_profile_problems(teams, plan_models(read.plans))
    if unknown:
        mod.fail("invalid gpufleet_teams: %s" % "; ".join(unknown), problems=unknown)
    dra = mod.params["dra_nodes"]
    devices, problems = plan_devices(fleet, read.plans, dra) if dra else ({}, [])
    if problems:
        mod.fail("the DRA nodes cannot be planned: %s" % "; ".join(problems), problems=problems)
    capacity = kind_capacity(devices)
    live = {n["metadata"]["name"]: n for n in read.nodes}
    result = []
    for name, node in sorted(fleet.nodes.items()):
        if node.exists and (node.expected is not None or name in capacity):
            planned = node.expected.labels if node.expected is not None and name not in capacity else {}
            labels = dict((live[name]["metadata"].get("labels") or {}), **planned)
            resources = capacity[name] if name in capacity else dict(node.expected.resources)
            result.append({"node": name, "resources": resources, "labels": labels,
                           "taints": (live[name].get("spec") or {}).get("taints") or []})
    return result, devices, read.nodes


def advertised_nodes(mod: Any, nodes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The nodes as listed (``nodes``: the plan's own read when nothing was written since; a no-op lists
    them once): allocatable (a DRA node: its ResourceSlices' devices), labels, taints."""
    dra = set(mod.params["dra_nodes"])
    slices = mod.k8s.list("ResourceSlice") if dra else []
    return [{"node": n["metadata"]["name"], "labels": n["metadata"].get("labels") or {},
             "taints": (n.get("spec") or {}).get("taints") or [],
             "resources": slice_resources(slices, n["metadata"]["name"]) if n["metadata"]["name"] in dra else
             {r: int(v) for r, v in ((n.get("status") or {}).get("allocatable") or {}).items()
              if r.startswith("nvidia.com/") and str(v).isdigit()}}
            for n in nodes]


def read_owned(mod: Any) -> Dict[str, Dict[Tuple[str, str], Dict[str, Any]]]:
    """kind -> (namespace, name) -> every owned Kueue object."""
    selector = label_selector(dict(OWNER))
    try:
        return {kind: {object_key(o): o for o in mod.k8s.list(rt, label_selector=selector)} for kind, rt in TYPES.items()}
    except K8sError as exc:
        if exc.status != 404:
            raise
        mod.fail("Kueue's API kueue.x-k8s.io/v1beta2 is not served by this cluster: install Kueue v0.19 or later "
                 "(its CRDs) before giving gpufleet_teams; nothing was written")


def _canonical(spec: Mapping[str, Any], kind: str) -> Dict[str, Any]:
    """The fields the module owns, quantities as strings (the API server may keep either form)."""
    picked = {k: copy.deepcopy(spec[k]) for k in SPEC_FIELDS[kind] if k in spec}
    for group in picked.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                for key in QUANTITY_FIELDS:
                    if key in res:
                        res[key] = str(res[key])
    return picked


def refusals(mod: Any, bodies: Sequence[Dict[str, Any]],
             owned_objs: Mapping[str, Mapping[Tuple[str, str], Any]]) -> List[str]:
    """The planned objects that exist and are not ours; the teams' namespaces that do not exist.

    An object listed among ``owned_objs`` (this run's read, by our label) is ours and its namespace
    exists: only the others are read, so a converged run reads none."""
    problems = []
    for body in unlisted(bodies, owned_objs):
        meta = body["metadata"]
        if body["kind"] == "LocalQueue" and mod.k8s.get("Namespace", meta["namespace"]) is None:
            problems.append("team %s: namespace %s does not exist (create it first; the team's LocalQueue goes there)"
                            % (meta["name"], meta["namespace"]))
            continue
        live = mod.k8s.get(TYPES[body["kind"]], meta["name"], meta.get("namespace"))
        if live is not None and not owned(live):
            problems.append("%s %s%s exists and is not managed by gpufleet.sharing (label %s); it is left alone: "
                            "rename the team or remove that object" % (
                                body["kind"], meta.get("namespace", "") and meta["namespace"] + "/", meta["name"],
                                "app.kubernetes.io/managed-by=gpufleet.sharing"))
    return problems


def write(mod: Any, body: Dict[str, Any], live: Optional[Dict[str, Any]]) -> bool:
    """Create or update one owned object; records the diff of its spec; True when it changed."""
    kind, meta = body["kind"], body["metadata"]
    what = "%s %s%s" % (kind, meta.get("namespace", "") and meta["namespace"] + "/", meta["name"])
    before = _canonical((live or {}).get("spec") or {}, kind) if live else None
    after = _canonical(body["spec"], kind)
    if live is not None and before == after:
        return False
    if live is None:
        mod.k8s.create(body)
    else:
        mod.k8s.replace(replacement(live, body["spec"], OWNER, SPEC_FIELDS[kind]))
    return mod.changes.record(what, before, after, changed=True)


def delete(mod: Any, kind: str, key: Tuple[str, str], live: Dict[str, Any]) -> None:
    namespace, name = key
    mod.k8s.delete(TYPES[kind], name, namespace or None)
    mod.changes.record("%s %s%s" % (kind, namespace and namespace + "/", name),
                       _canonical(live.get("spec") or {}, kind), None, changed=True)
