# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout summary's team quota rows: before, while the nodes changed, after."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

DOCUMENTATION = r"""
name: quota_rows
short_description: The rollout summary's team quota rows, before, while the nodes changed and after
version_added: 0.4.0
description:
  - A row per team of O(_input) (the C(summary) of the last M(gpufleet.sharing.gpu_quotas) run) with C(team),
    C(before) (what the team had before the run, the C(before) of the shrink run O(shrink)), C(shrunk) (what
    it had while the nodes changed, the C(after) of the shrink run) and C(after) (units per resource).
  - A team the shrink run does not know takes the last run's C(before) for both.
options:
  _input:
    description: The C(summary) of the last C(gpu_quotas) run.
    type: list
    elements: dict
    required: true
  shrink:
    description: The C(summary) of the C(gpu_quotas) run with C(state=shrunk); empty when there was none.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Quota rows for the summary
  ansible.builtin.set_fact:
    rows: "{{ quotas_result.summary | gpufleet.sharing.quota_rows(shrink_summary) }}"
"""

RETURN = r"""
_value:
  description: The rows, C({team, before, shrunk, after}).
  type: list
  elements: dict
"""


def quota_rows(last: Optional[Sequence[Mapping[str, Any]]], shrink: Optional[Sequence[Mapping[str, Any]]] = None) -> List[Dict[str, Any]]:
    earlier = {row["team"]: row for row in shrink or []}
    rows = []
    for row in last or []:
        first = earlier.get(row["team"], {})
        rows.append({"team": row["team"], "before": first.get("before", row.get("before")),
                     "shrunk": first.get("after", row.get("before")), "after": row.get("after")})
    return rows


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"quota_rows": quota_rows}
