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
  - Optionally points the ClusterPolicy's C(spec.migManager.config.name) at the ConfigMap.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
attributes:
  check_mode:
    support: full
    description: >-
      Writes are sent with server-side C(dryRun=All); nothing is stored.
  diff_mode:
    support: full
    description: >-
      Shows the rendered C(config.yaml) and the ClusterPolicy reference, before and after.
  platform:
    platforms: posix
    support: full
    description: Runs on the controller (or any host with the Python C(kubernetes) client) and talks to the API server.
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
    description: Named MIG configs (name to a list of mig-parted items) shared by all nodes.
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

from ansible.module_utils.basic import AnsibleModule

from ..module_utils._gpu_operator import PSA_LABELS
from ..module_utils._k8s import K8S_AUTH_ARGSPEC, K8sError, client_from_module
from ..module_utils._mig_operator import CONFIG_KEY, MigOperatorError, merge_host_configs, missing_selections
from ..module_utils._mig_parted import MigPartedError, merged_configs, parse_config, render_yaml


def main():
    argument_spec = dict(
        name=dict(type="str", default="gpufleet-mig-parted-config"),
        namespace=dict(type="str", default="gpu-operator"),
        configs=dict(type="dict", default={}),
        configs_by_host=dict(type="dict", default={}),
        include_default_configs=dict(type="bool", default=True),
        selected=dict(type="dict", default={}),
        cluster_policy=dict(type="str", default="cluster-policy"),
        create_namespace=dict(type="bool", default=True),
    )
    argument_spec.update(K8S_AUTH_ARGSPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    params = module.params
    name, namespace = params["name"], params["namespace"]
    result = {"changed": False, "config_map": "%s/%s" % (namespace, name), "cluster_policy_changed": False}

    # Validate everything before talking to the cluster.
    try:
        extra = merge_host_configs(params["configs"], params["configs_by_host"])
        document = merged_configs(extra) if params["include_default_configs"] else {
            "version": "v1", "mig-configs": extra}
        parse_config(document, "mig_configs")
    except (MigOperatorError, MigPartedError) as exc:
        module.fail_json(msg="invalid MIG configs: %s" % exc, problems=exc.problems, **result)
    problems = missing_selections(document["mig-configs"], params["selected"])
    if problems:
        module.fail_json(msg="; ".join(problems), problems=problems, **result)
    rendered = render_yaml(document)
    result["cluster_policy_found"] = False
    result["config_names"] = sorted(document["mig-configs"])

    k8s = client_from_module(module)
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing"}},
            "data": {CONFIG_KEY: rendered}}
    try:
        policy = k8s.get("ClusterPolicy", params["cluster_policy"]) if params["cluster_policy"] else None
        if params["create_namespace"] and k8s.get("Namespace", namespace) is None:
            k8s.ensure_namespace(namespace, PSA_LABELS, dry_run=module.check_mode)
            result["changed"] = True
            if module.check_mode:
                # A dry-run namespace does not exist, so a dry-run ConfigMap in it cannot be validated.
                result["action"] = "created"
                module.exit_json(**result)
        applied = k8s.apply(body, dry_run=module.check_mode)
        result["action"] = applied.action
        result["changed"] = result["changed"] or applied.changed
        before_text = ((applied.before or {}).get("data") or {}).get(CONFIG_KEY, "")
        current_ref = None
        result["cluster_policy_found"] = policy is not None
        if policy is not None:
            current_ref = (((policy.get("spec") or {}).get("migManager") or {}).get("config") or {}).get("name")
            if current_ref != name:
                k8s.patch("ClusterPolicy", params["cluster_policy"],
                          {"spec": {"migManager": {"config": {"name": name}}}}, patch_type="merge",
                          dry_run=module.check_mode)
                result["changed"] = True
                result["cluster_policy_changed"] = True
    except K8sError as exc:
        module.fail_json(msg=str(exc), **result)
    if module._diff:
        result["diff"] = [
            {"before_header": "configmap %s/%s %s" % (namespace, name, CONFIG_KEY), "before": before_text,
             "after_header": "configmap %s/%s %s" % (namespace, name, CONFIG_KEY), "after": rendered},
            {"before": {"migManager.config.name": current_ref}, "after": {"migManager.config.name": name}}
            if params["cluster_policy"] else {"before": {}, "after": {}},
        ]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
