# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which nodes of a rollout are settled and which go through the batches, from each node's MIG plan.

Pure. A plan is mig_config's check-mode answer, made on the controller from this run's read of the
host (``_mig_read_plan``) or on the host itself (a registered result, possibly ``unreachable``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

UNPLANNED = "unplanned"      # no usable read: the host plans itself before the triage
UNREACHABLE = "unreachable"  # settled: the host could not be planned
UNCHANGED = "unchanged"      # settled: converged, files in place, no annotation of ours
FILES_ONLY = "files_only"    # converged layout, but the nvidia-mig-manager files differ (no drain)
MIG_CHANGE = "mig_change"    # anything else: a GPU to change, a failed plan, or an annotated node
SETTLED = (UNREACHABLE, UNCHANGED)


def triage(plan: Optional[Mapping[str, Any]], annotated: bool) -> Dict[str, Any]:
    """The node's outcome, the reason when unreachable, and the GPUs its plan would change.

    ``annotated``: the node carries our rollout annotation (a failed or interrupted run's node is
    never settled). A failed plan (``msg``) goes through the batches, where it is planned again on
    the host and fails there with its message.
    """
    if not plan:
        return {"outcome": UNPLANNED, "reason": "", "gpus": []}
    if plan.get("unreachable"):
        return {"outcome": UNREACHABLE, "reason": str(plan.get("msg") or ""), "gpus": []}
    changed = plan.get("changed_gpus")
    gpus = list(changed or [])
    converged = changed is not None and not gpus and "msg" not in plan and not annotated
    if not converged:
        return {"outcome": MIG_CHANGE, "reason": "", "gpus": gpus}
    files_differ = bool(plan.get("config_dest_changed") or plan.get("selected_config_override_changed"))
    return {"outcome": FILES_ONLY if files_differ else UNCHANGED, "reason": "", "gpus": []}


def summary_rows(hosts: Sequence[str], recorded: Mapping[str, Mapping[str, Any]],
                 triaged: Mapping[str, Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The rollout summary, a row per host in order. ``recorded``: per host, what its batch set
    (``outcome``, ``gpus``, ``reason``, ``batch``, each only when set); ``triaged``: this module's triage, whose
    settled hosts never reached a batch. A host with neither was not started."""
    rows = []
    for host in hosts:
        mine = recorded.get(host) or {}
        settled = triaged.get(host) or {}
        if settled.get("outcome") not in SETTLED:
            settled = {}
        rows.append({"node": host, "outcome": mine.get("outcome", settled.get("outcome", "not started")),
                     "gpus": list(mine.get("gpus") or []), "reason": mine.get("reason", settled.get("reason", ""))})
        if mine.get("batch") is not None:  # the batch it was in (1 = the canary)
            rows[-1]["batch"] = int(mine["batch"])
    return rows
