# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's triage of every GPU host at once, planned on the controller from this run's read."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._read_plan import read_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_read_plan import Prepared
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_triage import (
    BATCHED, UNPLANNED, readvertise, restart_selectors, steps, triage, underadvertised_nodes, with_backend)

DOCUMENTATION = r"""
name: rollout_triage
short_description: Which GPU hosts of a rollout are settled and which go through the batches
version_added: 0.2.0
description:
  - Plans each host's MIG selection (the C(mig_selection) fact of the C(mig) role's C(selection)
    tasks) against the GPUs and nvidia-mig-manager files of this run's M(gpufleet.sharing.gpu_facts)
    read (C(gpufleet_gpu_read), run with O(gpufleet.sharing.gpu_facts#module:read_files) naming the
    selection's C(config_dest) and C(selected_config_override)), with the code of
    M(gpufleet.sharing.mig_config) in check mode, and sorts the host.
  - Per host, C(outcome) is V(unchanged) (converged, files in place, no rollout annotation on the
    node), V(unreachable), V(files_only) (converged, but the nvidia-mig-manager files differ),
    V(mig_change) (anything else, a failed plan included, which the batch plans again on the host), or
    V(unplanned) when the read cannot be used (skipped, failed, unreachable, no GPU, a file not read,
    or O(use_read=false)); with C(node) (the Kubernetes node, C(gpufleet_node_name), else the host),
    C(reason), C(gpus) (the GPUs to change), C(planned_on) (V(controller) or V(host)), C(config) (the
    selected MIG config), C(plan) (the plan the host applies as it is, O(gpufleet.sharing.mig_config#module:plan))
    and C(error) (the message of a plan that failed, else empty), C(annotated), C(backend) (the host's
    C(gpufleet_gpu_backend), V(device-plugin) or V(dra)) and C(move) (the node moves between backends
    in this run, see O(moves); such a node goes through the batches even when its layout is settled).
  - The filter C(rollout_steps) in the same file turns one host's entry into the steps of its batch, in
    order (V(drain), V(pause), V(apply), V(restore), V(restart), V(backend) for a DRA node or a node that
    moves between backends (a DRA node has no V(verify), its ResourceSlices prove it), V(verify), V(uncordon); V(files) for
    V(files_only); V(refuse) for a failed plan; V(restart) and V(verify) (V(backend) on DRA) for V(readvertise);
    none for a settled host), given C(cluster), C(pause) and C(verify) (booleans, default true).
  - The filter C(rollout_readvertise) in the same file takes the triage and the registered answer of
    M(gpufleet.sharing.gpu_verify) without pods for the V(unchanged) nodes, and gives each of those whose checks
    of what it advertises failed (capacity, allocatable, a DRA node's ResourceSlices - it advertises less than its
    plan, typically a layout made by hand without restarting the device plugin) the outcome V(readvertise) -
    a batch restarts what advertises and verifies the node, with no drain; a failure leaves it cordoned with
    the reason.
  - The filter C(rollout_restart_selectors) in the same file turns the registered answer of
    M(gpufleet.sharing.gpu_operands) with O(gpufleet.sharing.gpu_operands#module:state=restored) into the
    pod selectors of the restart step, V(app=nvidia-device-plugin-daemonset) and V(app=gpu-feature-discovery)
    less those the restore waited for (paused during the apply, their pods started after it).
  - The filter C(rollout_hosts) in the same file lists the hosts of this run's triage (the C(rollout_triage)
    fact, read from the first of the given hosts that has it) whose C(outcome) is one of the given
    outcomes (by default those that go through the batches, V(files_only), V(mig_change) and V(readvertise)), in the
    given hosts' order (C(groups['all']), the inventory's), and none before a triage.
    A play's C(hosts) is chosen with it as the play starts, in C(ansible-playbook)'s own process, with no
    task - the hosts planned on their host (V(unplanned)) and the batches (V(files_only), V(mig_change)).
  - Given O(previous), the hosts it left V(unplanned) are sorted from their registered C(mig_run)
    (M(gpufleet.sharing.mig_config) run on the host in check mode).
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
options:
  annotated_nodes:
    description: Nodes carrying the rollout annotation (RV(gpufleet.sharing.rollout_lock#module:annotated_nodes)).
    type: dict
    default: {}
  use_read:
    description: Plan from the read. V(false) when the read may be stale (the rollout lock was taken over).
    type: bool
    default: true
  previous:
    description: This filter's earlier answer in the same run.
    type: dict
  moves:
    description: The hosts whose node moves between the device plugin and DRA in this run (the C(dra) role's C(rollout_plan)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Sort the hosts of the play
  ansible.builtin.set_fact:
    triage: "{{ hostvars | gpufleet.sharing.rollout_triage(ansible_play_hosts_all, rollout_lock.annotated_nodes) }}"
"""

RETURN = r"""
_value:
  description: Per host, its C(node), C(outcome), C(reason), C(gpus) and C(planned_on).
  type: dict
"""


@hostvars_once
def rollout_triage(hostvars: Mapping[str, Any], hosts: Sequence[str], annotated_nodes: Optional[Mapping[str, Any]] = None,
                   use_read: bool = True, previous: Optional[Mapping[str, Any]] = None,
                   moves: Sequence[str] = ()) -> Dict[str, Dict[str, Any]]:
    cache: Dict[Tuple[str, bool], Prepared] = {}
    answer = {}
    for host in hosts:
        done = (previous or {}).get(host)
        if done and done.get("outcome") != UNPLANNED:
            answer[host] = done
            continue
        host_vars = hostvars[host]
        node = node_name(host, host_vars)
        plan, where = (read_plan(host_vars.get("gpufleet_gpu_read"), host_vars.get("mig_selection"), cache)
                       if use_read else {}), "controller"
        if not plan and previous is not None:
            plan, where = host_vars.get("mig_run") or {}, "host"
        failed = plan.get("msg", "") if plan.get("failed") and not plan.get("unreachable") else ""
        annotated = node in (annotated_nodes or {})
        entry = dict(triage(plan, annotated), node=node, planned_on=where, annotated=annotated,
                     plan=plan.get("plan") or {}, config=plan.get("selected", ""), error=str(failed))
        answer[host] = with_backend(entry, str(host_vars.get("gpufleet_gpu_backend") or "device-plugin"), host in moves)
    return answer


@hostvars_once
def rollout_hosts(hostvars: Mapping[str, Any], hosts: Sequence[str], outcomes: Sequence[str] = BATCHED) -> List[str]:
    triage: Mapping[str, Any] = {}
    for host in hosts:
        values = hostvars[host]
        if "rollout_triage" in values:
            triage = values["rollout_triage"] or {}
            break
    return [host for host in hosts if (triage.get(host) or {}).get("outcome") in outcomes]


def rollout_steps(entry: Mapping[str, Any], cluster: bool = True, pause: bool = True, verify: bool = True) -> List[str]:
    return steps(entry or {}, bool(cluster), bool(pause), bool(verify))


def rollout_readvertise(triaged: Mapping[str, Any], verified: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The triage with the converged nodes that ``verified`` (gpu_verify's node checks, no pods) found not
    advertising their plan sent through a restart of what advertises (outcome ``readvertise``)."""
    checks = ((verified or {}).get("report") or {}).get("checks") or []
    return readvertise(triaged or {}, underadvertised_nodes(checks))


def rollout_restart_selectors(restored: Optional[Mapping[str, Any]]) -> List[str]:
    return restart_selectors(list((restored or {}).get("waited_for") or []))


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"rollout_triage": rollout_triage, "rollout_hosts": rollout_hosts, "rollout_steps": rollout_steps,
                "rollout_restart_selectors": rollout_restart_selectors, "rollout_readvertise": rollout_readvertise}
