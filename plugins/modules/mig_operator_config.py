#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_operator_config
short_description: The mig-parted ConfigMap of the GPU Operator's MIG manager
version_added: 0.1.0
description:
  - For operator-managed MIG. Builds the nvidia-mig-parted C(version v1) config from the same
    layout variables as the host C(mig) role (C(mig_configs) plus the default named configs),
    validates it, and stores it in a ConfigMap under the key C(config.yaml).
  - Checks that every node's selected config exists before changing anything.
  - Refuses to change the items of a config that a node's C(nvidia.com/mig.config) label names, because
    the MIG manager would apply them on that node, without a drain, the next time its pod restarts. A
    changed layout gets a new name, and the rollout drains each node before labelling it.
  - Optionally points the ClusterPolicy's C(spec.migManager.config.name) at the ConfigMap.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
options:
  name:
    description: Name of the ConfigMap.
    type: str
    default: gpufleet-mig-parted-config
  namespace:
    description: Namespace of the ConfigMap (the operator's namespace).
    type: str
    default: gpu-operator
  configs:
    description:
      - Named MIG configs (name to a list of mig-parted items) shared by all nodes.
      - Names must be Kubernetes label values (the MIG manager selects a config with the node label
        C(nvidia.com/mig.config)). Every profile is checked against the MIG catalog; an item with a
        C(device-filter) must fit every GPU model the filter names, one without must fit at least one
        MIG-capable model. Nothing is written when a check fails.
    type: dict
    default: {}
  configs_by_host:
    description:
      - Each host's own C(mig_configs), keyed by host. They are merged into one ConfigMap; the same
        name with different items on two hosts is an error.
    type: dict
    default: {}
  include_default_configs:
    description: Add the default named configs (C(all-disabled), C(all-balanced), C(all-<profile>) ...).
    type: bool
    default: true
  selected:
    description:
      - The config each node will ask for (node name to config name). Every one must exist;
        otherwise nothing is changed and the error lists the nodes.
    type: dict
    default: {}
  cluster_policy:
    description:
      - Name of the ClusterPolicy whose C(spec.migManager.config.name) must name this ConfigMap.
        Empty to leave the ClusterPolicy alone.
      - When the ClusterPolicy does not exist yet (the ConfigMap is created before the operator
        is installed), it is left to the operator's Helm values (M(gpufleet.sharing.gpu_operator)
        O(gpufleet.sharing.gpu_operator#module:mig_manager_config)).
    type: str
    default: cluster-policy
  create_namespace:
    description:
      - Create the namespace when it is missing, with the Pod Security label
        C(pod-security.kubernetes.io/enforce=privileged) the operator's operands need.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: MIG configs for the operator's MIG manager
  gpufleet.sharing.mig_operator_config:
    configs_by_host: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'mig_configs'))) }}"
    selected: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'mig_config'))) }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
config_map:
  description: Namespace and name of the ConfigMap.
  returned: always
  type: str
  sample: gpu-operator/gpufleet-mig-parted-config
action:
  description: What happened to the ConfigMap.
  returned: always
  type: str
  choices: [created, updated, unchanged]
config_names:
  description: Names of the configs in the ConfigMap.
  returned: always
  type: list
  elements: str
cluster_policy_changed:
  description: Whether C(spec.migManager.config.name) of the ClusterPolicy was changed.
  returned: always
  type: bool
cluster_policy_found:
  description: Whether the ClusterPolicy exists (when it does not, nothing points at the ConfigMap yet).
  returned: always
  type: bool
"""

from typing import Any, Dict

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._gpu_operator import PSA_LABELS
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_operator import (
    CONFIG_KEY, MIG_CONFIG_LABEL, MigOperatorError, changed_in_use, config_map_body, missing_selections,
    operator_config_document, policy_config_name)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import MigPartedError, render_yaml
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import object_name_problems

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    name=dict(type="str", default="gpufleet-mig-parted-config"),
    namespace=dict(type="str", default="gpu-operator"),
    configs=dict(type="dict", default={}),
    configs_by_host=dict(type="dict", default={}),
    include_default_configs=dict(type="bool", default=True),
    selected=dict(type="dict", default={}),
    cluster_policy=dict(type="str", default="cluster-policy"),
    create_namespace=dict(type="bool", default=True),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    params = mod.params
    name, namespace = params["name"], params["namespace"]
    mod.result.update(config_map="%s/%s" % (namespace, name), cluster_policy_changed=False)

    # Validate everything before talking to the cluster.
    problems = object_name_problems([("name", "ConfigMap", name), ("namespace", "Namespace", namespace),
                                     ("cluster_policy", "ClusterPolicy", params["cluster_policy"] or None)]
                                    + [("selected", "Node", host) for host in params["selected"]])
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    try:
        document = operator_config_document(params["configs"], params["configs_by_host"],
                                            params["include_default_configs"])
    except (MigOperatorError, MigPartedError) as exc:
        mod.fail("invalid MIG configs: %s" % exc, problems=exc.problems)
    problems = missing_selections(document["mig-configs"], params["selected"])
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    rendered = render_yaml(document)
    mod.result.update(cluster_policy_found=False, config_names=sorted(document["mig-configs"]))

    k8s = mod.k8s
    policy = k8s.get("ClusterPolicy", params["cluster_policy"]) if params["cluster_policy"] else None
    stored = ((k8s.get("ConfigMap", name, namespace) or {}).get("data") or {}).get(CONFIG_KEY)
    problems = changed_in_use(stored, rendered, k8s.list("Node", label_selector=MIG_CONFIG_LABEL),
                              "%s/%s" % (namespace, name))
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    if params["create_namespace"] and k8s.get("Namespace", namespace) is None:
        k8s.ensure_namespace(namespace, PSA_LABELS)
        mod.changes.mark()
    applied = k8s.apply(config_map_body(name, namespace, rendered))
    mod.result["action"] = applied.action
    what = "configmap %s/%s %s" % (namespace, name, CONFIG_KEY)
    mod.changes.record(what, ((applied.before or {}).get("data") or {}).get(CONFIG_KEY, ""), rendered,
                       changed=applied.changed)
    mod.result["cluster_policy_found"] = policy is not None
    current_ref = policy_config_name(policy)
    if policy is not None and current_ref != name:
        k8s.patch("ClusterPolicy", params["cluster_policy"], {"spec": {"migManager": {"config": {"name": name}}}},
                  patch_type="merge")
        mod.changes.record("clusterpolicy %s" % params["cluster_policy"], {"migManager.config.name": current_ref},
                           {"migManager.config.name": name})
        mod.result["cluster_policy_changed"] = True


if __name__ == "__main__":
    main()
