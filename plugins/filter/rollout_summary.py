# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout summary of every host, in one pass."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils._rollout_triage import summary_rows

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
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
options:
  triage:
    description: The answer of the P(gpufleet.sharing.rollout_triage#filter) filter.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Build the summary
  ansible.builtin.set_fact:
    rollout_summary: "{{ hostvars | gpufleet.sharing.rollout_summary(ansible_play_hosts_all, hostvars['localhost'].rollout_triage) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: The rows.
  type: list
  elements: dict
"""

FIELDS = (("rollout_outcome", "outcome"), ("rollout_gpus", "gpus"), ("rollout_reason", "reason"), ("rollout_batch", "batch"))


def rollout_summary(hostvars: Mapping[str, Any], hosts: Sequence[str],
                    triage: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
    recorded = {}
    for host in hosts:
        values = hostvars[host]
        recorded[host] = dict((key, values[name]) for name, key in FIELDS if name in values)
    return summary_rows(hosts, recorded, triage or {})


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"rollout_summary": rollout_summary}
