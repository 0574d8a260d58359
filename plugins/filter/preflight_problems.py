# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every problem the preflight finds on the hosts of the play, in one pass on the controller."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.filter.mig_selection_problems import mig_selection_problems
from ansible_collections.gpufleet.sharing.plugins.filter.node_plans import node_name
from ansible_collections.gpufleet.sharing.plugins.filter.node_taints import taint_report
from ansible_collections.gpufleet.sharing.plugins.module_utils.run._preflight import gpu_models, host_problems, shared_node_problems

DOCUMENTATION = r"""
name: preflight_problems
short_description: Every problem the preflight finds on the given hosts, in one pass
version_added: 0.2.0
description:
  - Per host, in this order, each message prefixed with the host's name - the GPU models its MIG
    selection (the C(mig_selection) fact) cannot be applied to, with the messages of
    M(gpufleet.sharing.mig_plan); a GPU read that found no GPU (unless C(gpufleet_gpu_model) is
    declared); the run-wide variables (C(gpufleet_mig_backend), C(gpufleet_rollout_serial),
    C(gpufleet_rollout_max_fail_percentage), C(gpufleet_verify_pods), C(mig_configs)); and its
    declared taints (C(gpufleet_node_taints)) that are invalid or that no operand tolerates.
  - Then each host that could not be checked (not in O(checked), or without a recorded MIG selection).
  - Runs once for the whole play on the controller (the preflight of C(site.yml)), with no task per host.
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
options:
  tolerations:
    description:
      - The operand tolerations the C(gpu_operator) role will add, when a host does not set
        C(gpu_operator_tolerations).
    type: list
    elements: dict
    default: []
  checked:
    description: The hosts still in play (for example C(ansible_play_hosts)); the others were not checked.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Collect the problems of every host
  ansible.builtin.set_fact:
    problems: "{{ hostvars | gpufleet.sharing.preflight_problems(ansible_play_hosts_all, checked=ansible_play_hosts) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The problems, an empty list when there is none.
  type: list
  elements: str
"""

NOT_CHECKED = "%s: not checked (unreachable or failed before planning)"


def _mig_problems(values: Mapping[str, Any]) -> List[str]:
    selection = values.get("mig_selection") or {}
    if not isinstance(selection.get("configs") or {}, Mapping):
        return []  # reported with the variables (mig_configs)
    facts = values.get("ansible_facts") or {}
    return mig_selection_problems(gpu_models(values.get("gpufleet_gpu_model"), facts.get("gpufleet_gpus") or []), selection)


def preflight_problems(hostvars: Mapping[str, Any], hosts: Sequence[str], tolerations: Optional[Sequence[Any]] = None,
                       checked: Optional[Sequence[str]] = None) -> List[str]:
    problems = shared_node_problems([(host, node_name(host, hostvars[host])) for host in hosts])
    unchecked: List[str] = []
    for host in hosts:
        values = hostvars[host]
        if (checked is not None and host not in checked) or "mig_selection" not in values:
            unchecked.append(NOT_CHECKED % host)
            continue
        problems += ["%s: %s" % (host, problem) for problem in host_problems(values, _mig_problems(values))]
        problems += taint_report(hostvars, [host], values.get("gpu_operator_tolerations", tolerations or []))
    return problems + unchecked


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"preflight_problems": preflight_problems}
