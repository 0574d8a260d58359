# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout summary of every host, in one pass."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_triage import failure_message, summary_rows, to_annotate_again

DOCUMENTATION = r"""
name: rollout_summary
short_description: The rollout summary, a row per host
version_added: 0.2.0
description:
  - A row per host, in the given order, with C(node) (the inventory host), C(outcome), C(gpus) and C(reason), and
    C(batch) (1 for the canary) for a host that reached a batch (C(rollout_batch)).
  - What the host's batch recorded (C(rollout_outcome), C(rollout_gpus), C(rollout_reason)) wins; a host
    the plan found settled (V(unchanged) or V(unreachable) in O(triage)) never reached a batch; any
    other host is V(not started).
  - A failed or unreachable host whose batch recorded what became of its node (C(rollout_mark) is
    V(annotated), V(deleted), or V(refused) with C(rollout_mark_error)) also gets C(node_state), which
    says so - cordoned with the reason, deleted during the run, or the reason refused by the API (and
    whether writing it again at the end of the run, O(remarked), worked).
  - The filters C(rollout_annotate_again) (the hosts whose reason must be written again, each
    C({host, node, reason})) and C(rollout_failure_message) (the run's closing failure from the rows) are
    in the same file.
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
options:
  triage:
    description: The answer of the P(gpufleet.sharing.rollout_triage#filter) filter.
    type: dict
    default: {}
  remarked:
    description: The registered loop results of writing the reasons again (items from C(rollout_annotate_again)).
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Build the summary
  ansible.builtin.set_fact:
    rollout_summary: "{{ hostvars | gpufleet.sharing.rollout_summary(ansible_play_hosts_all, rollout_triage) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The rows.
  type: list
  elements: dict
"""

FIELDS = (("rollout_outcome", "outcome"), ("rollout_gpus", "gpus"), ("rollout_reason", "reason"),
          ("rollout_mark", "mark"), ("rollout_mark_error", "mark_error"), ("rollout_batch", "batch"))


def _recorded(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    return {host: dict((key, hostvars[host][name]) for name, key in FIELDS if name in hostvars[host]) for host in hosts}


@hostvars_once
def rollout_summary(hostvars: Mapping[str, Any], hosts: Sequence[str], triage: Optional[Mapping[str, Any]] = None,
                    remarked: Optional[Sequence[Mapping[str, Any]]] = None) -> List[Dict[str, Any]]:
    again = {}
    for result in remarked or []:
        item = result.get("item") or {}
        if item.get("host") and not result.get("skipped"):
            again[item["host"]] = str(result.get("msg") or "failed") if result.get("failed") else ""
    return summary_rows(hosts, _recorded(hostvars, hosts), triage or {}, again)


@hostvars_once
def rollout_annotate_again(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[Dict[str, str]]:
    return to_annotate_again(hosts, _recorded(hostvars, hosts), {host: node_name(host, hostvars[host]) for host in hosts})


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"rollout_summary": rollout_summary, "rollout_annotate_again": rollout_annotate_again,
                "rollout_failure_message": failure_message}
