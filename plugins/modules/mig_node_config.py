#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_node_config
short_description: Have the GPU Operator's MIG manager apply a MIG config to one node, safely
version_added: 0.1.0
description:
  - For clusters where the GPU Operator's MIG manager changes MIG layouts (operator-managed MIG).
  - Does nothing when the node label C(nvidia.com/mig.config) already names O(config) and
    C(nvidia.com/mig.config.state) is C(success).
  - Otherwise cordons the node, drains it through the Eviction API (the MIG manager itself never
    evicts workloads, and it needs GPUs without user processes), sets C(nvidia.com/mig.config),
    waits until the MIG manager reports C(success), and uncordons the node.
  - When the MIG manager reports C(failed), the module fails with the reason found in the node's
    annotations and events, and leaves the node cordoned so that no workload lands on GPUs in an
    unknown layout. Running the module again retries (restarting the node's MIG manager pod, which
    then applies the label again); the cordon it set is lifted after success.
  - The cordon it sets is marked with the annotation C(gpufleet.sharing/cordoned-by) (O(run_id));
    only such a cordon (or the older marker C(gpufleet.sharing/cordoned-for)) is lifted. A node
    that was already cordoned before (by someone else) is changed but stays cordoned
    (RV(left_cordoned)).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
attributes:
  check_mode:
    description:
      - Reads and plans as a real run; the cordon, the evictions and the label change are sent as
        server-side dry runs (C(dryRun=All)), so nothing is changed, and nothing is waited for.
        RV(would_evict) lists the pods that would be evicted.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  config:
    description: Name of the MIG config (a key of the mig-parted ConfigMap), for example V(all-1g.10gb).
    type: str
    required: true
  config_map:
    description:
      - Name of the mig-parted ConfigMap the MIG manager uses. When given, the module checks that
        O(config) is defined in it before changing anything.
    type: str
  config_map_namespace:
    description: Namespace of O(config_map).
    type: str
    default: gpu-operator
  drain:
    description:
      - Cordon and drain the node before the change, and uncordon it after success.
      - Turn it off only when you know that no pod uses the node's GPUs.
    type: bool
    default: true
  delete_emptydir_data:
    description: Evict pods with C(emptyDir) volumes (their data is lost).
    type: bool
    default: false
  force:
    description: Evict pods that no controller manages.
    type: bool
    default: false
  drain_timeout:
    description: Seconds for the drain (PodDisruptionBudget retries included).
    type: int
    default: 600
  timeout:
    description: Seconds to wait for C(nvidia.com/mig.config.state=success).
    type: int
    default: 900
  poll_interval:
    description: Seconds between two checks (the longest pause; the first checks of a wait come sooner, after 0.25 s, 0.5 s, 1 s and so on).
    type: float
    default: 5
  mig_manager_namespace:
    description: Namespace of the MIG manager pods (the operator's namespace).
    type: str
    default: gpu-operator
  mig_manager_selector:
    description:
      - Label selector of the MIG manager pods. A node without such a pod fails the task before
        anything is changed (nobody would act on the label).
      - When the node already asks for O(config) but the
        state is not C(success) (for example C(failed) in an earlier run), the MIG manager pod on
        the node is restarted, because the MIG manager applies the label again only when it
        changes or when it starts.
    type: str
    default: app=nvidia-mig-manager
  run_id:
    description:
      - Id of this run, written to the annotation C(gpufleet.sharing/cordoned-by) when the module
        cordons the node. Default C(mig_node_config-<UTC time>).
    type: str
"""

EXAMPLES = r"""
- name: Reconfigure MIG on this node through the operator's MIG manager
  gpufleet.sharing.mig_node_config:
    node: "{{ inventory_hostname }}"
    config: all-1g.10gb
    config_map: gpufleet-mig-parted-config
    delete_emptydir_data: true
  delegate_to: localhost
"""

RETURN = r"""
node:
  description: Name of the node.
  returned: always
  type: str
  sample: gpu-node-07
config:
  description: The requested MIG config.
  returned: always
  type: str
  sample: all-1g.10gb
previous_config:
  description: Value of C(nvidia.com/mig.config) before the run.
  returned: always
  type: str
  sample: all-disabled
state:
  description: Value of C(nvidia.com/mig.config.state) at the end.
  returned: always
  type: str
  sample: success
evicted:
  description: Pods evicted before the change.
  returned: always
  type: list
  elements: str
would_evict:
  description: Pods that would be evicted (check mode).
  returned: in check mode, when a change is needed
  type: list
  elements: str
state_history:
  description: MIG states seen while waiting, with the seconds elapsed.
  returned: when the module waited
  type: list
  elements: dict
  sample: [{state: pending, elapsed: 0.0}, {state: success, elapsed: 31.5}]
uncordoned:
  description: Whether the module lifted its own cordon at the end.
  returned: always
  type: bool
left_cordoned:
  description: The node stays cordoned at the end because someone else cordoned it.
  returned: when the node is in the requested config at the end
  type: bool
restarted_mig_manager:
  description: Whether the MIG manager pod of the node was restarted to retry the same config.
  returned: when it was restarted
  type: bool
reason:
  description: The MIG manager's reason for a C(failed) state.
  returned: on failure of the MIG manager
  type: str
"""

from typing import Any, Dict

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_node_io import MigNodeConfig
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_operator import option_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import object_name_problems, selector_problem

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    node=dict(type="str", required=True),
    config=dict(type="str", required=True),
    config_map=dict(type="str"),
    config_map_namespace=dict(type="str", default="gpu-operator"),
    drain=dict(type="bool", default=True),
    delete_emptydir_data=dict(type="bool", default=False),
    force=dict(type="bool", default=False),
    drain_timeout=dict(type="int", default=600),
    timeout=dict(type="int", default=900),
    poll_interval=dict(type="float", default=5),
    mig_manager_namespace=dict(type="str", default="gpu-operator"),
    mig_manager_selector=dict(type="str", default="app=nvidia-mig-manager"),
    run_id=dict(type="str"),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    params = mod.params
    problems = option_problems(params["config"], params["timeout"], params["drain_timeout"], params["poll_interval"])
    # Every name and the selector too, before the first read: a node already configured used to be
    # uncordoned without them ever being checked (issue 21, the audit of item 2).
    problems += object_name_problems([("node", "Node", params["node"]), ("config_map", "ConfigMap", params["config_map"] or None),
                                      ("config_map_namespace", "Namespace", params["config_map_namespace"]),
                                      ("mig_manager_namespace", "Namespace", params["mig_manager_namespace"])])
    problems += [p for p in [selector_problem("mig_manager_selector", params["mig_manager_selector"])] if p]
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    MigNodeConfig(mod).run()


if __name__ == "__main__":
    main()
