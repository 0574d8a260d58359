# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift: the live fleet against the inventory's plan, one row per difference.

Pure (no I/O). A row is ``{node, what, planned, found, since, converge}``: ``since`` is a time the
cluster gave (a taint's ``timeAdded``, the lock's ``renewTime``), else None; ``converge`` is the
command that converges the row. The host side comes from mig_config's check-mode answer computed
from the run's one gpu_facts read (``_mig_read_plan``); the cluster side is in ``_drift_cluster``.
``merge_rows`` keeps one row per difference: what a node advertises follows from its MIG layout,
its sharing label and the fleet's operator and sharing configs, so an advertised difference is
reported only when none of those explains it.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

Row = Dict[str, Any]
CLUSTER = "(cluster)"
ROLLOUT = "ansible-playbook playbooks/rollout.yml --limit %s"
SITE = "ansible-playbook playbooks/site.yml"
# What a node advertises follows from these: a node (or the cluster) with one of them gets no advertised row.
CAUSES = ("MIG ", "nvidia-mig-manager file", "MIG plan", "host read", "label nvidia.com/device-plugin.config")
CLUSTER_CAUSES = ("GPU Operator", "device-plugin ConfigMap", "ClusterPolicy")
ADVERTISED_KINDS = ("capacity", "allocatable", "label", "node")


def row(node: str, what: str, planned: Any, found: Any, converge: str, since: Optional[str] = None) -> Row:
    return {"node": node, "what": what, "planned": _text(planned), "found": _text(found), "since": since,
            "converge": converge}


def _text(value: Any) -> str:
    return "absent" if value is None else str(value)


def layout_text(layout: Mapping[str, Any]) -> str:
    """"MIG disabled", "MIG enabled: 1g.5gb x7" or "MIG enabled (pending: disabled): ..."."""
    enabled = bool(layout.get("mig_enabled"))
    text = "MIG %s" % ("enabled" if enabled else "disabled")
    if bool(layout.get("mig_pending")) != enabled:
        text += " (pending: %s)" % ("enabled" if layout.get("mig_pending") else "disabled")
    devices = layout.get("mig_devices") or {}
    if devices:
        text += ": " + ", ".join("%s x%d" % (profile, count) for profile, count in sorted(devices.items()))
    elif enabled:
        text += ": no instance"
    return text


def host_rows(host: str, node: str, read: Mapping[str, Any], plan: Mapping[str, Any],
              files_read: Mapping[str, Mapping[str, Any]], operator_mig: bool = False) -> List[Row]:
    """The rows of one GPU host: its read, its MIG plan (``plan``: mig_config's check-mode answer,
    {} when the read cannot be used), per GPU its mode and layout, per file its state.
    ``operator_mig``: the operator's MIG manager configures the host (site.yml converges it)."""
    converge = (SITE + " --limit %s" if operator_mig else ROLLOUT) % host
    if read.get("unreachable") or read.get("failed") or not plan:
        found = read.get("msg") or ("unreachable" if read.get("unreachable") else "no usable read")
        return [row(node, "host read", "GPUs and nvidia-mig-manager files read", found, converge)]
    if plan.get("failed"):
        return [row(node, "MIG plan", plan.get("selected") or "the selected MIG config", plan.get("msg"), converge)]
    rows = []
    before = dict((layout["index"], layout) for layout in plan.get("before") or [])
    for layout in plan.get("after") or []:
        if layout["index"] in (plan.get("changed_gpus") or []):
            found = before.get(layout["index"]) or {}
            rows.append(row(node, "MIG GPU %d" % layout["index"], "%s (config %s)" % (layout_text(layout), plan.get("selected")),
                            layout_text(found), converge))
    for state in plan.get("files") or []:
        if state.get("changed"):
            rows.append(row(node, "nvidia-mig-manager file %s" % state["path"], "as rendered for config %s" % plan.get("selected"),
                            file_found(files_read.get(state["path"]) or {}), converge))
    return rows


def file_found(state: Mapping[str, Any]) -> str:
    if state.get("content") is None:
        return "missing or unreadable"
    mode = state.get("mode")
    return "content or mode differs (mode %s)" % (oct(mode) if isinstance(mode, int) else mode)


def advertised_rows(checks: Iterable[Mapping[str, Any]], hosts_by_node: Mapping[str, str]) -> List[Row]:
    """The failed node checks of gpu_verify (without pods), one row per node and resource or label:
    capacity and allocatable of one resource are one difference."""
    rows: Dict[tuple, Row] = {}
    for check in checks:
        if check.get("ok") or check.get("kind") not in ADVERTISED_KINDS:
            continue
        node, kind, name = check["node"], check["kind"], check["name"]
        what = ("label %s" if kind == "label" else "node %s" if kind == "node" else "advertised %s") % name
        found = check.get("actual") if kind in ("label", "node") else "%s %s" % (kind, check.get("actual"))
        key = (node, what)
        if key in rows:
            rows[key]["found"] += ", " + found
            continue
        host = hosts_by_node.get(node, node)
        rows[key] = row(node, what, check.get("expected"), found, SITE + " --limit %s" % host)
    return list(rows.values())


def merge_rows(causes: Sequence[Row], advertised: Sequence[Row]) -> List[Row]:
    """One row per difference, sorted by node then what: the advertised rows a cause explains are left out."""
    explained = set(r["node"] for r in causes if r["what"].startswith(CAUSES))
    fleet_wide = any(r["node"] == CLUSTER and r["what"].startswith(CLUSTER_CAUSES) for r in causes)
    kept = [r for r in advertised if not fleet_wide and r["node"] not in explained]
    unique: Dict[tuple, Row] = {}
    for item in list(causes) + kept:
        unique.setdefault((item["node"], item["what"]), item)
    return sorted(unique.values(), key=lambda r: (r["node"] != CLUSTER, r["node"], r["what"]))
