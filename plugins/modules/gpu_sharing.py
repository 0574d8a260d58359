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
attributes:
  check_mode:
    support: full
    description:
      - Nothing is written, no pod is deleted and nothing is waited for. The result and the diff
        show the ConfigMap data, the node labels and the ClusterPolicy patch that would be applied
        and the nodes whose device plugin would be restarted.
  diff_mode:
    support: full
    description:
      - Three diffs, ConfigMap data, node labels and ClusterPolicy C(spec.devicePlugin.config).
  platform:
    platforms: posix
    support: full
    description: Talks to the Kubernetes API from wherever it runs, usually the controller.
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
          - Time-slicing only; refuse pods asking for more than one replica. MPS always refuses them.
        type: bool
      mig_strategy:
        description:
          - Rendered as C(flags.migStrategy). The ClusterPolicy's MIG strategy takes precedence, so if set
            it must be equal to it.
        type: str
        choices: [none, single, mixed]
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
  node_gpus:
    description:
      - Planned GPUs per node, used to validate the configs and compute the expected capacity, as
        M(gpufleet.sharing.gpu_verify) takes them. A dict node name -> list of C(model), C(count),
        C(mig) (layout as profile -> count; omitted = MIG disabled) and C(product); or node name ->
        C({gpu_facts, mig_config, mig_configs}), the host's C(gpufleet_gpus) facts and its C(mig) role
        selection, from which each GPU's planned layout is derived.
      - Nodes without an entry are read from their GPU Feature Discovery labels (physical GPU count,
        product and MIG devices).
    type: dict
    default: {}
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
    type: list
    elements: str
    default: [app=nvidia-device-plugin-daemonset, app=gpu-feature-discovery]
  wait:
    description: Wait until every node in scope advertises the expected capacity and labels.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait.
    type: int
    default: 300
  wait_interval:
    description: Seconds between two polls (one node list per poll).
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
wait:
  description: What was waited on, for how long, and the progress seen (one entry per change in what is missing).
  returned: when O(wait) is true and not in check mode
  type: dict
  sample: {nodes: [gpu-a], timeout: 300, waited: 6.1, progress: ["2s: gpu-a capacity nvidia.com/gpu is 8, the plan says 32"]}
"""

import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sharing.plugins.module_utils._k8s import (
    K8S_AUTH_ARGSPEC,
    K8sError,
    K8sTimeout,
    client_from_module,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils._sharing import (
    CONFIG_LABEL,
    SharingError,
    assign_nodes,
    configs_from_nodes,
    effective_config_name,
    expected_node,
    node_gpus_for,
    parse_configs,
    render_configmap_data,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils._verify import compare_node

GPU_NODE_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.count")


def _labels(obj):
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def _yaml_block(mapping):
    """Readable, stable text for the diff: one 'key: value' block per entry."""
    lines = []
    for key in sorted(mapping):
        value = mapping[key]
        if isinstance(value, str) and "\n" in value:
            lines.append("%s: |" % key)
            lines.extend("  " + line for line in value.rstrip("\n").split("\n"))
        else:
            lines.append("%s: %s" % (key, value))
    return "\n".join(lines) + ("\n" if lines else "")


class GpuSharing(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.result = dict(changed=False, configmap={}, rendered={}, assignments={}, labels_changed={},
                           cluster_policy_patch={}, restarted={}, expected={})

    def fail(self, msg, **extra):
        self.result.update(extra)
        self.module.fail_json(msg=msg, **self.result)

    # -- reading -----------------------------------------------------------------------------

    def cluster_policy(self, k8s):
        name = self.params["cluster_policy_name"]
        if name:
            policy = k8s.get("ClusterPolicy", name)
            if policy is None:
                self.fail("ClusterPolicy %s not found: install the GPU Operator first (gpufleet.sharing.gpu_operator)" % name)
            return policy
        policies = k8s.list("ClusterPolicy")
        if len(policies) != 1:
            self.fail("found %d ClusterPolicies (%s); set cluster_policy_name" % (
                len(policies), ", ".join(p["metadata"]["name"] for p in policies) or "none: install the GPU Operator first"))
        return policies[0]

    # -- the run -------------------------------------------------------------------------------

    def run(self):
        params = self.params
        check = self.module.check_mode
        try:
            raw_configs = configs_from_nodes(params["node_configs"], params["configs"])
            configs = parse_configs(raw_configs, params["default_config"] or None)
        except SharingError as exc:
            self.fail("invalid sharing configs: %s" % exc, problems=exc.problems)
        rendered = render_configmap_data(configs)
        self.result["rendered"] = rendered

        k8s = client_from_module(self.module)
        try:
            self._run(k8s, configs, rendered, check)
        except K8sError as exc:
            self.fail(str(exc))
        self.result["api_requests"] = k8s.request_count
        self.module.exit_json(**self.result)

    def _run(self, k8s, configs, rendered, check):
        params = self.params
        namespace, cm_name = params["namespace"], params["configmap_name"]
        policy = self.cluster_policy(k8s)
        policy_name = policy["metadata"]["name"]
        spec = policy.get("spec") or {}
        # An unset strategy means the chart default, single (SPECS 7.2).
        mig_strategy = ((spec.get("mig") or {}).get("strategy")) or "single"
        dp_config = (spec.get("devicePlugin") or {}).get("config") or {}
        if not configs and dp_config.get("name") != cm_name and params["default_config"] is None:
            # Nothing declared and the ClusterPolicy does not use our ConfigMap: leave the cluster alone.
            self.result["msg"] = "no sharing configs given; nothing to do"
            return
        current_default = dp_config.get("default") or None
        want_default = current_default if params["default_config"] is None else (params["default_config"] or None)
        live_cm = k8s.get("ConfigMap", cm_name, namespace)
        live_cm_data = dict((live_cm or {}).get("data") or {})
        # The configs the plugins load today: from the ConfigMap the ClusterPolicy names now, which
        # may be another one (it is left in place; only the ClusterPolicy stops pointing at it).
        old_cm_name = dp_config.get("name")
        if old_cm_name == cm_name:
            live_data = live_cm_data
        elif old_cm_name:
            live_data = dict((k8s.get("ConfigMap", old_cm_name, namespace) or {}).get("data") or {})
        else:
            live_data = {}
        nodes = dict((n["metadata"]["name"], n) for n in k8s.list("Node"))
        node_labels = dict((name, _labels(obj)) for name, obj in nodes.items())

        try:
            assignments = assign_nodes(configs, node_labels)
        except SharingError as exc:
            self.fail("invalid node selection: %s" % exc, problems=exc.problems)
        self.result["assignments"] = assignments

        problems = []
        # Nothing may point at a config this run removes.
        if want_default and want_default not in rendered:
            problems.append("the ClusterPolicy default config %r is not one of the configs; set default_config" % want_default)
        for name, labels in sorted(node_labels.items()):
            label = labels.get(CONFIG_LABEL)
            if name not in assignments and label and label in live_data and label not in rendered:
                problems.append("node %r uses config %r (label %s, ConfigMap %s), which this run would remove; "
                                "select the node in a config or keep %r" % (name, label, CONFIG_LABEL, old_cm_name, label))

        # Nodes in scope: the selected ones, and unlabelled GPU nodes when a default is set.
        after_labels = {}
        for name, labels in node_labels.items():
            new = dict(labels)
            if name in assignments:
                new[CONFIG_LABEL] = assignments[name]
            after_labels[name] = new
        scope = {}
        for name in sorted(nodes):
            labels = after_labels[name]
            is_gpu = any(key in labels for key in GPU_NODE_LABELS) or name in params["node_gpus"]
            if name in assignments or (is_gpu and want_default and CONFIG_LABEL not in labels):
                scope[name] = effective_config_name(labels, list(rendered), want_default)
        for name in params["node_gpus"]:
            if name not in nodes:
                problems.append("node_gpus: node %r does not exist in the cluster" % name)
        expectations = {}
        for name, config_name in sorted(scope.items()):
            try:
                gpus = node_gpus_for(name, params["node_gpus"].get(name), node_labels[name], mig_strategy)
                expectations[name] = expected_node(name, gpus, mig_strategy, configs.get(config_name) if config_name else None,
                                                   labelled=name in assignments)
            except SharingError as exc:
                problems.extend(exc.problems)
        if problems:
            self.fail("nothing changed: %s" % "; ".join(problems), problems=problems)
        self.result["expected"] = dict((n, e.as_dict()) for n, e in expectations.items())

        # What changes.
        changed_keys = sorted(k for k in set(rendered) | set(live_data) if rendered.get(k) != live_data.get(k))
        labels_changed = {}
        for name, config_name in sorted(assignments.items()):
            before = node_labels[name].get(CONFIG_LABEL)
            if before != config_name:
                labels_changed[name] = {"before": before, "after": config_name}
        wanted_dp = {"name": cm_name}
        if want_default != current_default:
            wanted_dp["default"] = want_default or ""
        patch_config = dict((k, v) for k, v in wanted_dp.items() if (dp_config.get(k) or "") != (v or ""))
        cp_patch = {"spec": {"devicePlugin": {"config": patch_config}}} if patch_config else {}
        cm_action = "unchanged"
        if live_cm is None:
            cm_action = "created"
        elif live_cm_data != rendered:
            cm_action = "updated"
        self.result["configmap"] = {"name": cm_name, "namespace": namespace, "action": cm_action, "changed_keys": changed_keys}
        self.result["labels_changed"] = labels_changed
        self.result["cluster_policy_patch"] = cp_patch

        # Restart where the config in force changed (name or content).
        before_effective = dict((n, effective_config_name(node_labels[n], list(live_data), current_default)) for n in scope)
        restart_nodes = set()
        if params["restart"] == "always":
            restart_nodes = set(scope)
        elif params["restart"] == "changed":
            for name, config_name in scope.items():
                if config_name != before_effective.get(name) or (config_name and config_name in changed_keys):
                    restart_nodes.add(name)
        plugin_pods = {}
        if restart_nodes:
            for selector in params["restart_selectors"]:
                for pod in k8s.list("Pod", namespace=namespace, label_selector=selector):
                    node = (pod.get("spec") or {}).get("nodeName")
                    if node in restart_nodes and not (pod.get("metadata") or {}).get("deletionTimestamp"):
                        plugin_pods.setdefault(node, []).append(pod["metadata"]["name"])
        self.result["restarted"] = dict((n, sorted(p)) for n, p in sorted(plugin_pods.items()))

        changed = bool(cm_action != "unchanged" or labels_changed or cp_patch or plugin_pods)
        self.result["changed"] = changed
        if self.module._diff:
            self.result["diff"] = [
                {"before_header": "ConfigMap %s/%s data" % (namespace, cm_name), "after_header": "ConfigMap %s/%s data" % (namespace, cm_name),
                 "before": _yaml_block(live_cm_data), "after": _yaml_block(rendered)},
                {"before_header": "node labels %s" % CONFIG_LABEL, "after_header": "node labels %s" % CONFIG_LABEL,
                 "before": _yaml_block(dict((n, node_labels[n].get(CONFIG_LABEL)) for n in sorted(assignments))),
                 "after": _yaml_block(dict(assignments))},
                {"before_header": "ClusterPolicy %s spec.devicePlugin.config" % policy_name,
                 "after_header": "ClusterPolicy %s spec.devicePlugin.config" % policy_name,
                 "before": _yaml_block(dict((k, dp_config.get(k)) for k in ("name", "default"))),
                 "after": _yaml_block(dict((k, wanted_dp.get(k, dp_config.get(k))) for k in ("name", "default")))},
            ]
        if check:
            return

        # Apply: ConfigMap first, then the ClusterPolicy, then labels, then restarts.
        if cm_action != "unchanged":
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": cm_name, "namespace": namespace,
                                 "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing"}},
                    "data": copy.deepcopy(rendered)}
            k8s.apply(body)
        if cp_patch:
            k8s.patch("ClusterPolicy", policy_name, cp_patch, patch_type="merge")
        for name, change in sorted(labels_changed.items()):
            k8s.set_node_labels(name, {CONFIG_LABEL: change["after"]})
        for node, pods in sorted(plugin_pods.items()):
            for pod in pods:
                k8s.delete("Pod", pod, namespace=namespace)

        if self.params["wait"] and expectations:
            self.wait(k8s, expectations)

    def wait(self, k8s, expectations):
        timeout = self.params["wait_timeout"]
        progress_log = []
        last = {}
        start = k8s.now()
        info = {"nodes": sorted(expectations), "timeout": timeout,
                "waiting_for": "capacity, allocatable and GFD labels as planned (see expected)"}
        self.result["wait"] = info

        def probe():
            live = dict((n["metadata"]["name"], n) for n in k8s.list("Node"))
            missing = {}
            for name, exp in expectations.items():
                failed = [c.message for c in compare_node(exp, live.get(name)) if not c.ok]
                if failed:
                    missing[name] = failed
            return not missing, missing

        def progress(what, elapsed, detail):
            summary = "; ".join("%s %s" % (n, m[0]) + (" (+%d)" % (len(m) - 1) if len(m) > 1 else "")
                                for n, m in sorted(detail.items()))
            if summary != last.get("summary"):
                last["summary"] = summary
                entry = "%.0fs: waiting for %d node(s): %s" % (elapsed, len(detail), summary)
                progress_log.append(entry)
                self.module.log("gpu_sharing: " + entry)

        try:
            k8s.wait_for("nodes to advertise the planned sharing", probe, timeout=timeout,
                         interval=self.params["wait_interval"], progress=progress)
        except K8sTimeout as exc:
            info.update(waited=round(exc.elapsed, 1), progress=progress_log, not_ready=exc.detail)
            lines = ["%s: %s" % (n, "; ".join(m)) for n, m in sorted((exc.detail or {}).items())]
            self.fail("timed out after %ds waiting for %d node(s) to advertise the planned sharing (the changes were "
                      "applied): %s" % (timeout, len(exc.detail or {}), " | ".join(lines)))
        info.update(waited=round(k8s.now() - start, 1), progress=progress_log)


def main():
    resource_spec = dict(name=dict(type="str", required=True), replicas=dict(type="int", required=True))
    config_spec = dict(
        name=dict(type="str", required=True),
        strategy=dict(type="str", choices=["time-slicing", "mps", "none"], default="time-slicing"),
        resources=dict(type="list", elements="dict", options=resource_spec, default=[]),
        rename_by_default=dict(type="bool", default=False),
        fail_requests_greater_than_one=dict(type="bool"),
        mig_strategy=dict(type="str", choices=["none", "single", "mixed"]),
        version=dict(type="str", default="v1"),
        nodes=dict(type="list", elements="str", default=[]),
        node_selector=dict(type="raw"),
    )
    argument_spec = dict(
        configs=dict(type="list", elements="dict", options=config_spec, default=[]),
        node_configs=dict(type="dict", default={}),
        default_config=dict(type="str"),
        configmap_name=dict(type="str", default="gpufleet-device-plugin-config"),
        namespace=dict(type="str", default="gpu-operator"),
        cluster_policy_name=dict(type="str"),
        node_gpus=dict(type="dict", default={}),
        restart=dict(type="str", choices=["changed", "always", "never"], default="changed"),
        restart_selectors=dict(type="list", elements="str",
                               default=["app=nvidia-device-plugin-daemonset", "app=gpu-feature-discovery"]),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=300),
        wait_interval=dict(type="float", default=2.0),
    )
    argument_spec.update(K8S_AUTH_ARGSPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    GpuSharing(module).run()


if __name__ == "__main__":
    main()
