#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_sharing
short_description: Configure GPU time-slicing and MPS through the NVIDIA GPU Operator's device plugin
version_added: 0.1.0
description:
  - Declares named device-plugin sharing configs (time-slicing or MPS), each for a group of nodes.
  - Renders every config as a device-plugin config file (C(version) V(v1)) and keeps them, one key per
    config, in one ConfigMap (namespace O(namespace), name O(configmap_name)). The ConfigMap holds
    exactly the given configs.
  - Points the C(nvidia.com/v1) ClusterPolicy at that ConfigMap (C(spec.devicePlugin.config.name))
    and sets its default config (C(spec.devicePlugin.config.default)) when O(default_config) is given.
  - Labels each selected node with C(nvidia.com/device-plugin.config=<config name>). Nodes are chosen
    per config by name (O(configs[].nodes), for example an inventory group) and/or by a label
    selector (O(configs[].node_selector)). Nodes not selected are not touched.
  - The GPU Operator does not watch the ConfigMap, so a changed config would not take effect. This
    module restarts the device plugin (and GPU Feature Discovery, which reads the same config when it
    starts and would otherwise keep stale labels) only on the nodes whose config changed, by deleting
    that node's pods (the DaemonSets recreate them at once). It does not set a restart annotation on
    the DaemonSets, because that restarts them on every GPU node of the cluster, one node at a time,
    including nodes whose config did not change, and the operator owns those DaemonSets and may
    revert the annotation.
  - Then waits until every node in scope advertises the expected capacity and GPU Feature Discovery
    labels. The expectation is computed by the same code that M(gpufleet.sharing.gpu_verify) uses.
  - Validates everything before changing anything (replicas >= 2, MPS not on MIG-enabled GPUs, resource
    names valid for the nodes' GPU models, MIG resources time-sliced only with the mixed MIG
    strategy, config version v1); on a problem it fails naming the config, the field and the node,
    and nothing is changed.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
  - gpufleet.sharing.node_plans
attributes:
  check_mode:
    description:
      - Reads and plans as a real run; the writes go to the API server as server-side dry runs (nothing
        is stored, no pod is deleted) and nothing is waited for. The result and the diff show the ConfigMap data, the node labels and the
        ClusterPolicy patch that would be applied and the nodes whose device plugin would be restarted.
  diff_mode:
    description:
      - Three diffs, ConfigMap data, node labels and ClusterPolicy C(spec.devicePlugin.config).
options:
  configs:
    description:
      - The named sharing configs. The ConfigMap will hold exactly these (plus those of O(node_configs)).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description:
          - Config name, the ConfigMap key and the value of the node label C(nvidia.com/device-plugin.config).
          - A valid label value (at most 63 letters, digits, C(-), C(_), C(.)).
        type: str
        required: true
      strategy:
        description:
          - V(time-slicing) or V(mps) share the listed resources; V(none) shares nothing (use it to keep a
            group of nodes unshared when a default config is set).
        type: str
        choices: [time-slicing, mps, none]
        default: time-slicing
      resources:
        description:
          - Resources to share. C(nvidia.com/) is added to a name without a domain.
          - With V(mps) only C(nvidia.com/gpu) on GPUs with MIG disabled.
        type: list
        elements: dict
        default: []
        suboptions:
          name:
            description: C(nvidia.com/gpu) or C(nvidia.com/mig-<profile>) (mixed MIG strategy only).
            type: str
            required: true
          replicas:
            description:
              - How many pods may share one device; at least 2. Replicas 1 would mean sharing off,
                which is rejected with a hint to drop the resource or use strategy V(none).
            type: int
            required: true
      rename_by_default:
        description: Advertise shared resources as C(<name>.shared) (and C(<name>) as 0).
        type: bool
        default: false
      fail_requests_greater_than_one:
        description:
          - Refuse pods asking for more than one replica. Time-slicing default V(false), MPS default V(true).
          - V(false) with MPS needs device plugin V(v0.20.0) or later (GPU Operator V(v26.7.0)); older plugins
            always refuse such pods, so it is refused there, naming the version (see O(device_plugin_version)).
        type: bool
      mig_strategy:
        description:
          - Rendered as C(flags.migStrategy). The ClusterPolicy's MIG strategy takes precedence, so if set
            it must be equal to it.
          - When the ClusterPolicy leaves the strategy empty (C(gpu_operator_mig_strategy="")), each node's
            plugin runs with this value; left out, V(none) is rendered for an MPS config and V(mixed) for the
            others. MPS with V(mixed) is refused (the device plugin does not start then).
        type: str
        choices: [none, single, mixed]
      shared_devices_allocation_policy:
        description:
          - Which replicas (time-slicing, MPS) and MIG devices the device plugin prefers to hand out, rendered
            as C(flags.plugin.sharedDevicesAllocationPolicy). V(distributed) spreads them over the GPUs (the
            plugin's default), V(packed) fills the fewest GPUs first and keeps the others free for pods
            that need a whole GPU.
          - Needs device plugin V(v0.20.0) or later (GPU Operator V(v26.7.0)); refused, naming the version,
            before it (see O(device_plugin_version)). Omitted, nothing is rendered and the plugin distributes.
        type: str
        choices: [distributed, packed]
      version:
        description: Config file version; only V(v1) exists.
        type: str
        default: v1
      nodes:
        description: Nodes that use this config (for example V("{{ groups['inference'] }}")). Each must exist.
        type: list
        elements: str
        default: []
      node_selector:
        description:
          - Label selector of further nodes that use this config, a dict or C(key=value,key2=value2).
          - A node selected by two configs is an error.
        type: raw
  node_configs:
    description:
      - Per node, its sharing config (same fields as an entry of O(configs), without C(nodes)), for
        example each inventory host's C(gpu_sharing_config) group variable. Nodes naming the same
        config must give the same content; they are added to its C(nodes).
    type: dict
    default: {}
  default_config:
    description:
      - Config applied to GPU nodes without the label (ClusterPolicy C(spec.devicePlugin.config.default)).
      - Omitted, the ClusterPolicy default is left as it is. An empty string removes it.
    type: str
  configmap_name:
    description: Name of the ConfigMap holding the configs.
    type: str
    default: gpufleet-device-plugin-config
  namespace:
    description: Namespace of the GPU Operator (ConfigMap and device-plugin pods).
    type: str
    default: gpu-operator
  cluster_policy_name:
    description: Name of the ClusterPolicy. Omitted, the cluster must have exactly one.
    type: str
  restart:
    description:
      - V(changed) restarts the device plugin and GFD on nodes whose config (label or content) changed;
        V(always) on every node in scope (to recover a run interrupted before its restart);
        V(never) leaves it to you.
    type: str
    choices: [changed, always, never]
    default: changed
  restart_selectors:
    description:
      - Label selectors of the pods in O(namespace) that load the device-plugin config when they
        start; on a node whose config changed, the pods each selector finds are deleted.
      - The MPS control daemon is among them because it sets its per-client limits (active thread
        percentage, pinned device memory) only when it starts; after a restart the module checks
        that the node's new daemon runs with the planned replicas.
    type: list
    elements: str
    default: [app=nvidia-device-plugin-daemonset, app=gpu-feature-discovery, app=nvidia-device-plugin-mps-control-daemon]
  wait:
    description: Wait until every node in scope advertises the expected capacity and labels.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait.
    type: int
    default: 300
  wait_interval:
    description: >-
      Seconds between two polls (one node list per poll) (the longest pause; the first checks of a wait come sooner,
      after 0.25 s, 0.5 s, 1 s and so on).
    type: float
    default: 2.0
notes:
  - Kubernetes is reached with the C(kubernetes) Python library; run the module where it is installed
    (usually the controller; delegate the task to C(localhost)).
  - Time-slicing gives no memory or fault isolation between the pods that share a GPU. See the
    collection's C(docs/sharing.md) for measured costs and when to prefer MPS or MIG.
seealso:
  - module: gpufleet.sharing.gpu_verify
"""

EXAMPLES = r"""
- name: Time-slice the inference GPUs 4 ways, MPS on the notebook nodes
  gpufleet.sharing.gpu_sharing:
    configs:
      - name: inference-ts4
        strategy: time-slicing
        resources:
          - name: nvidia.com/gpu
            replicas: 4
        nodes: "{{ groups['gpu_inference'] }}"
      - name: notebooks-mps8
        strategy: mps
        resources:
          - name: nvidia.com/gpu
            replicas: 8
        node_selector:
          pool: notebooks
  delegate_to: localhost

- name: Time-slice MIG devices (mixed MIG strategy) on A100 nodes, nothing shared elsewhere by default
  gpufleet.sharing.gpu_sharing:
    configs:
      - name: a100-fine
        mig_strategy: mixed
        resources:
          - {name: nvidia.com/mig-1g.5gb, replicas: 2}
          - {name: nvidia.com/mig-3g.20gb, replicas: 3}
        node_selector: "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB"
      - name: unshared
        strategy: none
    default_config: unshared
  delegate_to: localhost
"""

RETURN = r"""
configmap:
  description: The ConfigMap and what happened to it (V(created), V(updated) or V(unchanged)).
  returned: always
  type: dict
  sample: {name: gpufleet-device-plugin-config, namespace: gpu-operator, action: updated, changed_keys: [inference-ts4]}
rendered:
  description: The device-plugin config file of each config, as stored in the ConfigMap.
  returned: always
  type: dict
  sample: {inference-ts4: "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: false\n..."}
assignments:
  description: Node name -> config name for every selected node.
  returned: always
  type: dict
  sample: {gpu-a: inference-ts4}
labels_changed:
  description: Nodes whose C(nvidia.com/device-plugin.config) label changed, with the old and new value.
  returned: always
  type: dict
  sample: {gpu-a: {before: null, after: inference-ts4}}
cluster_policy_patch:
  description: The merge patch sent to the ClusterPolicy (empty when it already matched).
  returned: always
  type: dict
  sample: {spec: {devicePlugin: {config: {name: gpufleet-device-plugin-config}}}}
restarted:
  description: Nodes whose device-plugin and GFD pods were deleted (would be, in check mode), with the pod names.
  returned: always
  type: dict
  sample: {gpu-a: [gpu-feature-discovery-q9d4s, nvidia-device-plugin-daemonset-x7k2p]}
expected:
  description: Per node in scope, the config in force and the expected capacity and GFD labels.
  returned: always
  type: dict
  sample: {gpu-a: {config: inference-ts4, resources: {nvidia.com/gpu: 32}, labels: {nvidia.com/gpu.replicas: "4"}}}
device_plugin:
  description:
    - The device-plugin release the plan was made for and where its version came from.
    - C(assumed) (also a warning) when O(operator_version) is not a released chart the collection knows, naming the
      released chart whose device plugin was assumed.
  returned: when the nodes were planned
  type: dict
  sample: {version: v0.20.0, source: ClusterPolicy spec.devicePlugin.version}
mps_daemons:
  description: Nodes whose restarted MPS control daemon was checked to run with the planned replicas.
  returned: when an MPS node's daemon was restarted and O(wait) is true
  type: dict
  sample: {gpu-c: {replicas: 4}}
wait:
  description: What was waited on, for how long, and the progress seen (one entry per change in what is missing).
  returned: when O(wait) is true and not in check mode
  type: dict
  sample: {nodes: [gpu-a], timeout: 300, waited: 6.1, progress: ["2s: gpu-a capacity nvidia.com/gpu is 8, the plan says 32"]}
"""

import copy
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import CONFIG_ARGSPEC, NODE_PLANS_ARGSPEC
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import (
    SCOPE_GOVERNED,
    ClusterView,
    FleetPlan,
    HostPlan,
    Intent,
    device_plugin_of,
    plan_fleet,
    read_intent,
    removal_problems,
    sharing_changes,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_io import wait_until_advertised
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing_io import read_configmaps, read_policy, restart_pods, wait_mps_daemons
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import selector_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import (
    CONFIG_LABEL,
    SharingConfig,
    parse_configs,
    release_problems,
    render_configmap_data,
    with_rendered_strategies)

Nodes = List[Dict[str, Any]]

ARGUMENT_SPEC = dict(
    configs=dict(type="list", elements="dict", options=CONFIG_ARGSPEC, default=[]),
    node_configs=dict(type="dict", default={}),
    default_config=dict(type="str"),
    configmap_name=dict(type="str", default="gpufleet-device-plugin-config"),
    namespace=dict(type="str", default="gpu-operator"),
    cluster_policy_name=dict(type="str"),
    restart=dict(type="str", choices=["changed", "always", "never"], default="changed"),
    restart_selectors=dict(type="list", elements="str",
                           default=["app=nvidia-device-plugin-daemonset", "app=gpu-feature-discovery",
                                    "app=nvidia-device-plugin-mps-control-daemon"]),
    wait=dict(type="bool", default=True),
    wait_timeout=dict(type="int", default=300),
    wait_interval=dict(type="float", default=2.0),
    **NODE_PLANS_ARGSPEC,
)


def plan(mod: ClusterModule, configs: Mapping[str, SharingConfig], plans: Mapping[str, HostPlan],
         rendered: Mapping[str, str], policy: Optional[Mapping[str, Any]], live_data: Mapping[str, str]) -> Tuple[ClusterView, FleetPlan, Nodes]:
    """Read the nodes, plan the fleet, refuse with every problem at once."""
    p = mod.params
    nodes = mod.k8s.list("Node")
    cluster = ClusterView.read(nodes, policy, list(live_data))
    with mod.failing_on("invalid node selection or version"):
        plugin = device_plugin_of(p, policy, mod.warn)
        fleet = plan_fleet(Intent(configs, p["default_config"], plans, scope=SCOPE_GOVERNED, plugin=plugin), cluster)
    mod.result.update(assignments=fleet.assignments, device_plugin=plugin.as_dict())
    problems = release_problems(configs, plugin) + removal_problems(fleet, cluster, list(rendered))
    problems += ["node %r has a GPU plan (node_plans/node_gpus) but does not exist in the cluster" % n
                 for n in fleet.missing_planned]
    problems += fleet.problems
    if problems:
        mod.fail("nothing changed: %s" % "; ".join(problems), problems=problems)
    mod.result["expected"] = {n: e.as_dict() for n, e in fleet.expectations.items()}
    return cluster, fleet, nodes


def run(mod: ClusterModule) -> None:
    mod.result.update(configmap={}, rendered={}, assignments={}, labels_changed={}, cluster_policy_patch={},
                      restarted={}, expected={})
    apply_plan(mod)
    mod.result["api_requests"] = mod.k8s.request_count


def apply_plan(mod: ClusterModule) -> None:
    """Read -> plan -> write (dry runs in check mode) -> wait (not in check mode: nothing changed)."""
    p = mod.params
    selectors = [s for s in (selector_problem("restart_selectors", item) for item in p["restart_selectors"]) if s]
    if selectors:
        mod.fail("; ".join(selectors), problems=selectors)
    with mod.failing_on("invalid sharing configs"):
        plans, raw_configs = read_intent(dict(p, configs=p["configs"] or []))
        configs = parse_configs(raw_configs, p["default_config"] or None)
    policy, exists = read_policy(mod)
    # per node (the ClusterPolicy leaves mig.strategy empty): each config carries its plugin's strategy
    configs = with_rendered_strategies(configs, ((policy.get("spec") or {}).get("mig") or {}).get("strategy") or None)
    rendered = render_configmap_data(configs)
    mod.result["rendered"] = rendered
    dp_config = ((policy.get("spec") or {}).get("devicePlugin") or {}).get("config") or {}
    if not configs and dp_config.get("name") != p["configmap_name"] and p["default_config"] is None:
        # Nothing declared and the ClusterPolicy does not use our ConfigMap: leave the cluster alone.
        mod.result["msg"] = "no sharing configs given; nothing to do"
        return
    live_cm, ours, live_data = read_configmaps(mod, dp_config.get("name"))
    cluster, fleet, nodes = plan(mod, configs, plans, rendered, policy if exists else None, live_data)
    change = sharing_changes(fleet, cluster, dp_config, p["configmap_name"], None if live_cm is None else ours,
                             rendered, live_data, p["restart"])
    pods = restart_pods(mod, change.restart_nodes)
    mod.result.update(configmap={"name": p["configmap_name"], "namespace": p["namespace"],
                                 "action": change.configmap_action, "changed_keys": list(change.changed_keys)},
                      labels_changed=change.labels_changed, cluster_policy_patch=change.cluster_policy_patch,
                      restarted=pods, changed=bool(change.configmap_action != "unchanged" or change.labels_changed
                                                   or change.cluster_policy_patch or pods))
    if mod.diff_mode:
        mod.result["diff"] = change.diff("%s/%s" % (p["namespace"], p["configmap_name"]), ours, rendered, fleet, cluster,
                                         policy["metadata"]["name"])
    if not exists:  # check mode before the operator exists: planned, nothing to dry-run against
        return
    write(mod, rendered if change.configmap_action != "unchanged" else None, policy["metadata"]["name"],
          change.cluster_policy_patch, change.labels_changed, pods)
    if p["wait"] and fleet.expectations and not mod.check_mode:
        wait(mod, fleet, None if mod.result["changed"] else nodes)  # nothing written: the plan's read is current
        wait_mps_daemons(mod, {n: e.config for n, e in fleet.expectations.items()}, configs, pods)


def write(mod: ClusterModule, data: Optional[Mapping[str, str]], policy_name: str, cp_patch: Mapping[str, Any],
          labels_changed: Mapping[str, Mapping[str, Any]], pods: Mapping[str, List[str]]) -> None:
    """ConfigMap first, then the ClusterPolicy, then labels, then restarts (dry runs in check mode)."""
    namespace = mod.params["namespace"]
    if data is not None:
        mod.k8s.apply({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": mod.params["configmap_name"], "namespace": namespace,
                                    "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing"}},
                       "data": copy.deepcopy(dict(data))})
    if cp_patch:
        mod.k8s.patch("ClusterPolicy", policy_name, cp_patch, patch_type="merge")
    for name, change in sorted(labels_changed.items()):
        mod.k8s.set_node_labels(name, {CONFIG_LABEL: change["after"]})
    for _node, names in sorted(pods.items()):
        for pod in names:
            mod.k8s.delete("Pod", pod, namespace=namespace)


def wait(mod: ClusterModule, fleet: FleetPlan, read: Optional[Nodes]) -> None:
    """Until every node in scope advertises its expectation (first judging ``read``, the plan's node
    list, when the run wrote nothing); on timeout fail naming what is missing."""
    timeout = mod.params["wait_timeout"]
    info, missing = wait_until_advertised(mod.k8s, fleet.expectations, timeout, mod.params["wait_interval"],
                                          lambda line: mod.log("gpu_sharing: " + line), read)
    mod.result["wait"] = info
    if missing:
        lines = ["%s: %s" % (n, "; ".join(m)) for n, m in sorted(missing.items())]
        mod.fail("timed out after %ds waiting for %d node(s) to advertise the planned sharing (the changes were "
                 "applied): %s" % (timeout, len(missing), " | ".join(lines)))


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


if __name__ == "__main__":
    main()
