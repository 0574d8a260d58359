#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_quotas
short_description: Kueue flavors and team queues derived from what the GPU nodes will advertise
version_added: 0.4.0
description:
  - Computes, with the same plan as M(gpufleet.sharing.gpu_verify), what every GPU node will advertise; groups
    the nodes into flavors (GPU product label and the scheduling taints they carry), sums each flavor's
    capacity per resource and gives every team of O(teams) its nominal quota (a fraction is floored, a count
    is split over the flavors in proportion to their capacity). The teams' quotas of a flavor never add up
    to more than its capacity unless O(overcommit=true). See docs/quotas.md.
  - O(state=present) applies Kueue C(kueue.x-k8s.io/v1beta2) C(ResourceFlavor)s (C(nodeLabels), C(nodeTaints),
    C(tolerations)), one C(ClusterQueue) per team (resource groups, nominal quotas, C(cohortName), borrowing and
    lending limits, a C(namespaceSelector) on the team's namespaces) and a C(LocalQueue) named after the team in
    each of its namespaces, and deletes the objects of ours the plan no longer names. Resource groups of the
    user's own in a team's C(ClusterQueue) (no C(nvidia.com/) resource, no C(gpufleet-) flavor, for example
    C(cpu) and C(memory), so that pods asking for them are admitted) are kept as they are.
  - O(state=shrunk) applies per team, flavor and resource the smaller of the live and the planned quota, and
    deletes nothing (the step before nodes change in a rollout). O(state=verified) changes nothing and
    returns the proof rows (RV(checks)).
  - Objects carry C(app.kubernetes.io/managed-by=gpufleet.sharing). A planned object that exists without
    that label is refused by name before anything is written; objects without it are never changed or deleted.
  - Bad input (O(teams), a sum over capacity, a team namespace that does not exist, a cluster without Kueue's
    API, a share of a MIG profile no GPU model of the fleet has, a Kueue C(deviceClassMappings) name that is not
    a label key) fails naming the team, the resource and the reason, before anything is written. A share of a
    resource no planned node advertises now gives no quota, with a warning.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
  - gpufleet.sharing.node_plans
  - gpufleet.sharing.fleet
options:
  teams:
    description:
      - The teams (the C(gpufleet_teams) inventory variable), each C({name, namespaces, shares, cohort,
        borrowing_limit, lending_limit}); C(shares) maps a resource name to a fraction (V(0.5)),
        a percentage (V(50%)) or a count of units (V(3)).
    type: list
    elements: raw
    required: true
  overcommit:
    description: Allow the teams' quotas of a flavor to add up to more than its capacity.
    type: bool
    default: false
  state:
    description: V(present) applies the plan, V(shrunk) the smaller of live and planned, V(verified) only compares.
    type: str
    choices: [present, shrunk, verified]
    default: present
  dra_nodes:
    description:
      - The nodes on the DRA backend (C(gpufleet_gpu_backend=dra)). Each offers, per resource name, the devices its
        plan gives (a MIG device or a full GPU each, as M(gpufleet.sharing.gpu_claim_templates) plans them) instead
        of what a device plugin would advertise; with O(state=verified) what its ResourceSlices list now.
      - Their device kinds give RV(kueue_device_class_mappings). Each needs its GPU plan (O(node_plans)).
    type: list
    elements: str
    default: []
  fail_on_mismatch:
    description: With O(state=verified), fail when a proof row is not ok.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Team quotas from the fleet plan
  gpufleet.sharing.gpu_quotas:
    teams:
      - name: vision
        namespaces: [vision-train]
        shares: {nvidia.com/mig-1g.10gb: "50%"}
        cohort: research
        borrowing_limit: 4
      - name: nlp
        namespaces: [nlp]
        shares: {nvidia.com/mig-1g.10gb: 7}
    node_plans: "{{ hostvars | gpufleet.sharing.node_plans(groups['gpu_hosts']) }}"
  delegate_to: localhost
"""

RETURN = r"""
flavors:
  description: The flavors of the plan, each with its product, nodes and capacity per resource.
  returned: always
  type: list
  elements: dict
  sample: [{name: gpufleet-nvidia-h100-80gb-hbm3, product: NVIDIA-H100-80GB-HBM3, nodes: [gpu-a], capacity: {nvidia.com/mig-1g.10gb: 14}}]
quotas:
  description: Per team, flavor and resource the nominal quota applied (or planned with O(state=verified)).
  returned: always
  type: dict
  sample: {vision: {gpufleet-nvidia-h100-80gb-hbm3: {nvidia.com/mig-1g.10gb: 7}}}
summary:
  description: Per team the units per resource before (live) and after this run.
  returned: always
  type: list
  elements: dict
  sample: [{team: vision, before: {nvidia.com/mig-1g.10gb: 14}, after: {nvidia.com/mig-1g.10gb: 7}}]
kueue_device_class_mappings:
  description:
    - Kueue's C(resources.deviceClassMappings) for the DRA nodes' device kinds, each DeviceClass charged to the
      device plugin's resource name, so the teams' shares mean the same on both backends (empty without O(dra_nodes)).
    - The module does not write Kueue's Configuration (the C(controller_manager_config.yaml) key of the ConfigMap
      C(kueue-manager-config), Kueue's chart); Kueue reads it only when it starts, so after a change put
      RV(kueue_config) there and restart Kueue's controller manager. See docs/quotas.md.
  returned: always
  type: list
  elements: dict
  sample: [{name: nvidia.com/mig-1g.10gb, deviceClassNames: [mig-1g-10gb.gpufleet.sharing]}]
kueue_config:
  description: The Kueue Configuration fragment (C(config.kueue.x-k8s.io/v1beta2)) that carries RV(kueue_device_class_mappings).
  returned: always
  type: dict
  sample: {apiVersion: config.kueue.x-k8s.io/v1beta2, kind: Configuration, resources: {deviceClassMappings: []}}
checks:
  description: With O(state=verified), the proof rows (node, kind, name, expected, actual, ok, message).
  returned: when state is verified
  type: list
  elements: dict
"""

from typing import Any, Dict, List

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import FLEET_ARGSPEC
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import fleet_kinds
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_objects import (
    KUEUE_CONFIG_API, device_class_mappings, mapping_problems, with_mappings)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_io import (
    advertised_nodes, delete, planned_nodes, read_owned, refusals, write)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_objects import (
    cluster_queue, live_quotas, local_queue, quota_checks, resource_flavor, summary, users_groups, with_quotas)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_plan import (
    flavors_of, group_problems, plan_quotas, resource_groups, shrunk)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import parse_teams

ARGUMENT_SPEC: Dict[str, Any] = dict(
    teams=dict(type="list", elements="raw", required=True),
    overcommit=dict(type="bool", default=False),
    state=dict(type="str", choices=["present", "shrunk", "verified"], default="present"),
    dra_nodes=dict(type="list", elements="str", default=[]),
    fail_on_mismatch=dict(type="bool", default=True),
    **FLEET_ARGSPEC,
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC, supports_check_mode=True).run(run)


def run(mod: ClusterModule) -> None:
    p = mod.params
    teams, problems = parse_teams(p["teams"])
    if problems:
        mod.fail("invalid gpufleet_teams: %s" % "; ".join(problems), problems=problems)
    nodes, devices, listed = planned_nodes(mod, teams)
    mappings = device_class_mappings(list(fleet_kinds(devices).values()))
    mod.result.update(kueue_device_class_mappings=mappings,
                      kueue_config=with_mappings({"apiVersion": KUEUE_CONFIG_API, "kind": "Configuration"}, mappings))
    plan = plan_quotas(nodes, teams, p["overcommit"])
    for warning in plan.warnings:
        mod.warn(warning)
    owned_objs = read_owned(mod)
    live = {t.name: owned_objs["ClusterQueue"].get(("", t.name)) for t in teams}
    before = {name: live_quotas(cq) for name, cq in live.items()}
    if p["state"] == "shrunk":
        plan = with_quotas(plan, {t.name: shrunk(plan.quotas[t.name], before[t.name]) for t in teams})
    problems = plan.problems + mapping_problems(mappings)
    problems += [m for t in teams for m in group_problems(t.name, resource_groups(plan.quotas[t.name]), users_groups(live[t.name]))]
    if problems:
        mod.fail("the team quotas cannot be applied: %s" % "; ".join(problems), problems=problems)
    mod.result.update(flavors=[{"name": f.name, "product": f.product, "nodes": list(f.nodes), "capacity": dict(f.capacity)}
                               for f in plan.flavors], quotas=plan.quotas, summary=summary(before, plan.quotas))
    if p["state"] == "verified":
        verify(mod, plan, teams, live, listed)  # nothing written: the plan's node list is current
        return
    flavors = [resource_flavor(f) for f in plan.flavors]
    if p["state"] == "shrunk":  # flavors of the layout being left stay until the quotas on them are gone
        planned_names = {f["metadata"]["name"] for f in flavors}
        flavors += [o for (_ns, name), o in sorted(owned_objs["ResourceFlavor"].items()) if name not in planned_names]
    queues = [cluster_queue(t, plan.quotas[t.name], users_groups(live[t.name])) for t in teams]  # the user's groups kept
    locals_ = [local_queue(t, ns) for t in teams for ns in t.namespaces]
    refused = refusals(mod, flavors + queues + locals_, owned_objs)
    if refused:
        mod.fail("refused, nothing was written: %s" % "; ".join(refused), problems=refused)
    apply_all(mod, owned_objs, flavors, queues, locals_, prune=p["state"] == "present")


def apply_all(mod: ClusterModule, owned_objs: Dict[str, Any], flavors: List[Dict[str, Any]],
              queues: List[Dict[str, Any]], locals_: List[Dict[str, Any]], prune: bool) -> None:
    """Flavors, then queues, then local queues; the stale ones in the reverse order."""
    for body in flavors + queues + locals_:
        meta = body["metadata"]
        write(mod, body, owned_objs[body["kind"]].get((meta.get("namespace", ""), meta["name"])))
    if not prune:
        return
    keep = {(b["kind"], b["metadata"].get("namespace", ""), b["metadata"]["name"]) for b in flavors + queues + locals_}
    for kind in ("LocalQueue", "ClusterQueue", "ResourceFlavor"):
        for key, obj in sorted(owned_objs[kind].items()):
            if (kind,) + key not in keep:
                delete(mod, kind, key, obj)


def verify(mod: ClusterModule, plan: Any, teams: List[Any], live: Dict[str, Any], listed: List[Dict[str, Any]]) -> None:
    """Live quotas against the plan, and against what the nodes advertise now (``listed``, this run's read)."""
    now = advertised_nodes(mod, listed)
    flavors, _problems = flavors_of(now)
    by_node = {node: f.name for f in flavors for node in f.nodes}
    advertised = {n["node"]: (by_node[n["node"]], n["resources"]) for n in now if n["node"] in by_node}
    checks = quota_checks(plan, teams, live, advertised)
    mod.result["checks"] = [c.as_dict() for c in checks]
    bad = [c for c in checks if not c.ok]
    if bad and mod.params["fail_on_mismatch"]:
        mod.fail("%d quota check(s) failed: %s" % (len(bad), "; ".join("%s %s: expected %s, got %s (%s)" % (
            c.node, c.name, c.expected, c.actual, c.message) for c in bad)), checks=mod.result["checks"])


if __name__ == "__main__":
    main()
