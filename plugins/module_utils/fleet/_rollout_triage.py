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
READVERTISE = "readvertise"  # converged layout, but the node advertises less than its plan (issue 43)
SETTLED = (UNREACHABLE, UNCHANGED)
BATCHED = (FILES_ONLY, MIG_CHANGE, READVERTISE)  # the outcomes that go through the batches


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


# The steps of a node's batch, in order: each is a task file of the rollout role (roles/rollout/tasks/<step>.yml).
# refuse: the plan failed, the node is refused before anything changes; files: only the nvidia-mig-manager
# files (converged layout, no drain); the others change the node's MIG layout on a drained node.
# backend: a node on DRA (or moving between the device plugin and DRA) gets its kubelet plugin restarted or its
# backend switched, and is proven by its ResourceSlices there (roles/dra, docs/dra.md), not by the device
# plugin's verify.
CLUSTER_STEPS = ("drain", "pause", "apply", "restore", "restart", "backend", "verify", "uncordon")
DRA = "dra"


def with_backend(entry: Mapping[str, Any], backend: str, moves: bool) -> Dict[str, Any]:
    """The triage of a node with its GPU backend (``device-plugin`` or ``dra``) and whether it moves
    between them in this run: a node that moves goes through the batches (drain, switch, verify,
    uncordon) even when its MIG layout is settled; an unreachable node stays settled."""
    answer = dict(entry, backend=backend, move=moves)
    if moves and entry.get("outcome") in (UNCHANGED, FILES_ONLY):
        answer["outcome"] = MIG_CHANGE
    return answer


# gpu_verify's node checks of what a node advertises: the device plugin's extended resources, a DRA node's
# ResourceSlice devices. A failed check of another kind (a label, a plan that cannot be made) is no reason
# to restart what advertises.
ADVERTISED_CHECKS = ("capacity", "allocatable", "slice")


def underadvertised_nodes(checks: Sequence[Mapping[str, Any]]) -> List[str]:
    """The nodes with a failed check of what they advertise (gpu_verify's report ``checks``), sorted."""
    return sorted({str(c.get("node")) for c in checks if not c.get("ok") and c.get("kind") in ADVERTISED_CHECKS})


def readvertise(triaged: Mapping[str, Mapping[str, Any]], failed_nodes: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """The triage with each converged node (UNCHANGED) that does not advertise its plan (``failed_nodes``: the
    nodes gpu_verify's node checks failed) sent through a batch that restarts what advertises: the device
    plugin and GPU Feature Discovery, or the DRA kubelet plugin, read the GPUs only when they start, so a
    layout made by hand without a restart stays unadvertised and no other step would restart them."""
    answer = {}
    for host, entry in triaged.items():
        answer[host] = dict(entry)
        if entry.get("outcome") == UNCHANGED and entry.get("node") in failed_nodes:
            answer[host].update(outcome=READVERTISE, reason="the node advertises less than its plan (its MIG layout is "
                                                            "the plan): what advertises is restarted and verified")
    return answer


def steps(entry: Mapping[str, Any], cluster: bool, pause: bool, verify: bool) -> List[str]:
    """The steps the batch runs for a triaged node (``entry``: its triage): none for a settled node.
    ``cluster``: the nodes are managed in Kubernetes; ``pause``: the GPU operands are paused around the
    change; ``verify``: the node's advertisement is verified (not in check mode)."""
    outcome = entry.get("outcome")
    if outcome == FILES_ONLY:
        return ["files"]
    if outcome == READVERTISE:  # no drain: the pods keep their devices while the advertisers restart
        return [] if not cluster else ["backend"] if entry.get("backend") == DRA else ["restart"] + (["verify"] if verify else [])
    if outcome != MIG_CHANGE:
        return []
    if entry.get("error"):
        return ["refuse"]
    skipped = set() if cluster else set(CLUSTER_STEPS) - {"apply"}
    skipped |= set() if pause else {"pause", "restore"}
    skipped |= set() if verify else {"verify"}
    dra, moves = entry.get("backend") == DRA, bool(entry.get("move"))
    skipped |= set() if cluster and (dra or moves) else {"backend"}
    skipped |= {"verify"} if dra else set()
    return [step for step in CLUSTER_STEPS if step not in skipped]


# The restart step: the pods that must start again to see the node's new MIG devices (by app label).
RESTART_APPS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")


def restart_selectors(recreated: Sequence[str]) -> List[str]:
    """The restart step's pod selectors: the device plugin and GPU Feature Discovery, except those in
    ``recreated``, the apps whose pods the restore waited for (gpu_operands ``waited_for``): their
    operand was paused, so their pods were gone during the apply and the ones running now started
    after it, on the new devices. Deleting them again would only wait for the same start twice."""
    return ["app=%s" % app for app in RESTART_APPS if app not in recreated]


# What the failure handling of a node's batch could do to the node (issue 21, items 12 and 13).
MARK_ANNOTATED = "annotated"  # cordoned, annotated "failed: <reason>"
MARK_DELETED = "deleted"      # the Node object is gone: nothing to cordon or annotate
MARK_REFUSED = "refused"      # the API refused the write: the node may still say "in progress"
FAILED_OUTCOMES = ("failed", "unreachable")


def node_state(mark: str, error: str = "", again: Optional[str] = None) -> str:
    """What happened to a failed node. ``again``: the error of writing the reason again at the end of the
    run ("" when it worked, None when it was not tried)."""
    if mark == MARK_ANNOTATED:
        return "cordoned, annotated with the reason (gpufleet.sharing/rollout)"
    if mark == MARK_DELETED:
        return ("deleted during the run: no Node object to cordon or annotate, nothing marks it; once it is "
                "registered again it is schedulable and carries no reason: re-run the rollout for it")
    if again == "":
        return "cordoned, annotated with the reason at the end of the run (the first write was refused: %s)" % error
    return ("NOT annotated with the reason: the API refused it (%s), and again at the end of the run (%s); the node "
            "may still say 'in progress' (gpufleet.sharing/rollout): the reason is here only"
            % (error, again if again is not None else "not tried"))


def summary_rows(hosts: Sequence[str], recorded: Mapping[str, Mapping[str, Any]],
                 triaged: Mapping[str, Mapping[str, Any]], remarked: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
    """The rollout summary, a row per host in order. ``recorded``: per host, what its batch set
    (``outcome``, ``gpus``, ``reason``, ``mark``, ``mark_error``, ``batch``, each only when set); ``triaged``:
    this module's triage, whose settled hosts never reached a batch. A host with neither was not started.
    ``remarked``: per host, the error of writing its reason again at the end of the run ("" = written).
    A failed host whose batch says what became of its node (``mark``) gets ``node_state``."""
    rows = []
    for host in hosts:
        mine = recorded.get(host) or {}
        settled = triaged.get(host) or {}
        if settled.get("outcome") not in SETTLED:
            settled = {}
        row = {"node": host, "outcome": mine.get("outcome", settled.get("outcome", "not started")),
               "gpus": list(mine.get("gpus") or []), "reason": mine.get("reason", settled.get("reason", ""))}
        if mine.get("batch") is not None:  # the batch it was in (1 = the canary)
            row["batch"] = int(mine["batch"])
        if mine.get("mark") and row["outcome"] in FAILED_OUTCOMES:
            row["node_state"] = node_state(mine["mark"], str(mine.get("mark_error") or ""), (remarked or {}).get(host))
        rows.append(row)
    return rows


def to_annotate_again(hosts: Sequence[str], recorded: Mapping[str, Mapping[str, Any]],
                      nodes: Mapping[str, str]) -> List[Dict[str, str]]:
    """The failed hosts whose reason the API refused, to be written again at the end of the run."""
    return [{"host": host, "node": nodes.get(host, host), "reason": str((recorded.get(host) or {}).get("reason") or "")}
            for host in hosts if (recorded.get(host) or {}).get("mark") == MARK_REFUSED]


def failure_message(rows: Sequence[Mapping[str, Any]]) -> str:
    """The run's closing failure: the failed nodes, and for each what became of it."""
    failed = [row for row in rows if row.get("outcome") in FAILED_OUTCOMES]
    if not failed:
        return ""
    states = ["%s: %s" % (row["node"], row.get("node_state") or "see its reason in the summary") for row in failed]
    return "Rollout failed on %s. %s." % (", ".join(row["node"] for row in failed), "; ".join(states))
