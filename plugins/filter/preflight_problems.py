# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every problem the preflight finds on the hosts of the play, in one pass on the controller."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._report_dir import report_dir_problem
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._mig_selection import mig_selection_problems, unread_index_notes
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._taints import taint_report
from ansible_collections.gpufleet.sharing.plugins.module_utils.run._preflight import (
    fleet_team_problems, gpu_models, host_problems, shared_node_problems)

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
  - The selection is also checked against the GPUs the host's read found (C(gpufleet_gpus), when
    C(gpufleet_gpu_model) is not declared) - an item whose C(devices) name no GPU the host has, a config
    selecting none of its MIG-capable GPUs.
  - Then what concerns the whole fleet - a team's share (C(gpufleet_teams)) of a MIG profile that no GPU model of
    the checked hosts has, and M(gpufleet.sharing.gpu_quotas)' own plan over the planned hosts. Judged only when
    every host of O(fleet) is checked in this play (a C(--limit) leaves these checks to M(gpufleet.sharing.gpu_quotas),
    which also reads the nodes the play does not plan).
  - Then each host that could not be checked (not in O(checked), or without a recorded MIG selection).
  - The companion filter C(preflight_notes) (same input, no options) lists what could not be checked - GPU
    indexes named on a host whose model is declared (no read).
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
  fleet:
    description:
      - Every GPU host of the inventory (for example C(groups['gpu_hosts']), which C(--limit) does not narrow). The
        fleet-wide team checks run only when all of them are checked in this play. When omitted, the hosts given
        are the fleet.
    type: list
    elements: str
  report_dir:
    description:
      - The directory the run writes its reports to (C(gpufleet_report_dir) or its default); a problem when it
        cannot be written (not a directory, not writable, or no writable directory to create it in). Not checked
        when omitted.
    type: str
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
    declared = values.get("gpufleet_gpu_model")
    gpus = facts.get("gpufleet_gpus") or []
    # A declared model means no read in this run (facts may be a cache's): only the models are checked.
    return mig_selection_problems(gpu_models(declared, gpus), selection, gpus=[] if declared is not None else gpus)


@hostvars_once
def preflight_problems(hostvars: Mapping[str, Any], hosts: Sequence[str], tolerations: Optional[Sequence[Any]] = None,
                       checked: Optional[Sequence[str]] = None, report_dir: Any = None,
                       fleet: Optional[Sequence[str]] = None) -> List[str]:
    problems = [p for p in [report_dir_problem(report_dir)] if p] if report_dir is not None else []
    problems += shared_node_problems([(host, node_name(host, hostvars[host])) for host in hosts])
    unchecked: List[str] = []
    for host in hosts:
        values = hostvars[host]
        if (checked is not None and host not in checked) or "mig_selection" not in values:
            unchecked.append(NOT_CHECKED % host)
            continue
        problems += ["%s: %s" % (host, problem) for problem in host_problems(values, _mig_problems(values))]
        problems += taint_report(hostvars, [host], values.get("gpu_operator_tolerations", tolerations or []))
    judged = [h for h in hosts if NOT_CHECKED % h not in unchecked]
    if set(fleet if fleet is not None else hosts) <= set(judged):  # the whole fleet, or its teams are not judged here
        problems += fleet_team_problems([hostvars[h] for h in judged])
    return problems + unchecked


@hostvars_once
def preflight_notes(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[str]:
    """What preflight could not check, per host (not a problem): the GPU indexes a selection names on a host
    whose model is declared, so not read."""
    notes: List[str] = []
    for host in hosts:
        values = hostvars[host]
        selection = values.get("mig_selection")
        if values.get("gpufleet_gpu_model") is None or not isinstance(selection, Mapping) \
                or not isinstance(selection.get("configs") or {}, Mapping):
            continue
        notes += ["%s: %s" % (host, note) for note in unread_index_notes(selection)]
    return notes


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"preflight_problems": preflight_problems, "preflight_notes": preflight_notes}
