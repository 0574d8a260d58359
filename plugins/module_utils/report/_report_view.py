# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the HTML report shows, computed from the report data (the JSON's dict): pure, no I/O.

Every figure the page shows carries where it comes from: ``src``, a JSON pointer (RFC 6901) into
the report data, or, for a sum over the fleet, ``fig`` (a name the consistency test recomputes).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

FAILED_OUTCOMES = ("failed", "unreachable")


def pointer(*parts: Any) -> str:
    """A JSON pointer: '/nodes/0/resources/nvidia.com~1gpu'."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _int(value: Any) -> Optional[int]:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def resource_rows(index: int, node: Mapping[str, Any], checks: Mapping[Tuple[str, str, str], Tuple[int, Mapping[str, Any]]]
                  ) -> List[Dict[str, Any]]:
    """Per resource type of one node: physical units, replicas, planned, and what it advertises."""
    resources, labels = node.get("resources") or {}, node.get("labels") or {}
    rows = []
    for name in sorted(r for r in resources if not r.endswith(".shared")):
        shared = name + ".shared" if name + ".shared" in resources else None
        planned_name = shared if shared and not resources[name] else name
        row = {"resource": name, "planned_name": planned_name, "planned": resources[planned_name],
               "planned_src": pointer("nodes", index, "resources", planned_name),
               "count": _int(labels.get(name + ".count")), "count_src": pointer("nodes", index, "labels", name + ".count"),
               "replicas": _int(labels.get(name + ".replicas")),
               "replicas_src": pointer("nodes", index, "labels", name + ".replicas"),
               "strategy": labels.get(name + ".sharing-strategy", "none"), "ok": True}
        for kind in ("capacity", "allocatable"):
            found = checks.get((node["node"], kind, planned_name))
            row[kind] = None if found is None else found[1]["actual"]
            row[kind + "_src"] = None if found is None else pointer("checks", found[0], "actual")
            row[kind + "_ok"] = found is None or bool(found[1]["ok"])
            row["ok"] = row["ok"] and row[kind + "_ok"]
        rows.append(row)
    return rows


Indexed = Dict[Any, List[Tuple[int, Mapping[str, Any]]]]


def _by_node(rows: Sequence[Mapping[str, Any]]) -> Indexed:
    """``(index, row)`` of each row, grouped by its ``node`` (in the report's order)."""
    grouped: Indexed = {}
    for index, row in enumerate(rows):
        grouped.setdefault(row.get("node"), []).append((index, row))
    return grouped


def _pods(node: str, pods: Indexed, checks: Mapping[Tuple[str, str, str], Tuple[int, Mapping[str, Any]]]) -> List[Dict[str, Any]]:
    rows = []
    for index, pod in pods.get(node, []):
        check = checks.get((node, "pod", pod.get("resource")))
        rows.append(dict(pod, src=pointer("pods", index), saw=check[1]["actual"] if check else None,
                         saw_src=pointer("checks", check[0], "actual") if check else None))
    return rows


def _probe(node: str, probe: Indexed) -> List[Dict[str, Any]]:
    rows = []
    for index, row in probe.get(node, []):
        whole = row.get("baseline_tflops") or row.get("exclusive_tflops") or 0
        fair = whole / max(1, row.get("replicas") or 1)
        rows.append(dict(row, src=pointer("probe", index), fair_tflops=fair,
                         memory_fair_mib=(row.get("memory_total_mib") or 0) / max(1, row.get("replicas") or 1)))
    return rows


def node_views(report: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """One view per verified node, the failing ones first. The checks, pods and probe rows are grouped
    by node once: a view per node that scanned them all made the page quadratic in the fleet (2.3 s
    of a no-op site.yml at 200 hosts, docs/benchmarks.md, "Fifth pass")."""
    checks_list = report.get("checks") or []
    checks = {(c["node"], c["kind"], c["name"]): (i, c) for i, c in enumerate(checks_list)}
    checks_by_node = _by_node(checks_list)
    pods, probe = _by_node(report.get("pods") or []), _by_node(report.get("probe") or [])
    failed = set((report.get("summary") or {}).get("failed_nodes") or [])
    gpus = report.get("gpus") or {}
    views = []
    for index, node in enumerate(report.get("nodes") or []):
        name = node["node"]
        node_checks = checks_by_node.get(name, [])
        views.append({
            "name": name, "index": index, "src": pointer("nodes", index), "ok": name not in failed,
            "config": node.get("config"), "sharing": node.get("sharing"), "mig_strategy": node.get("mig_strategy"),
            "product": (node.get("gpus") or {}).get("product"), "resources": resource_rows(index, node, checks),
            "gpus": [dict(g, src=pointer("gpus", name, n)) for n, g in enumerate(gpus.get(name) or [])],
            "failed_checks": [dict(c, src=pointer("checks", i)) for i, c in node_checks if not c["ok"]],
            "passed": sum(1 for _i, c in node_checks if c["ok"]), "total": len(node_checks),
            "pods": _pods(name, pods, checks), "probe": _probe(name, probe)})
    return sorted(views, key=lambda v: (v["ok"], v["name"]))


def fleet_resources(nodes: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Per resource type over the fleet: nodes, physical units, units after sharing, advertised."""
    totals: Dict[str, Dict[str, Any]] = {}
    for view in nodes:
        for row in view["resources"]:
            entry = totals.setdefault(row["resource"], {"resource": row["resource"], "nodes": 0, "before": 0,
                                                        "after": 0, "advertised": 0, "ok": True})
            entry["nodes"] += 1
            entry["before"] += row["count"] if row["count"] is not None else row["planned"]
            entry["after"] += row["planned"]
            entry["advertised"] += _int(row["capacity"]) or 0
            entry["ok"] = entry["ok"] and row["ok"]
    return [totals[k] for k in sorted(totals)]


def rollout_view(rollout: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The rollout summary: rows failing first, and the nodes left cordoned with why."""
    if not rollout:
        return None
    rows = [dict(r, src=pointer("rollout", "nodes", i), failed=r.get("outcome") in FAILED_OUTCOMES)
            for i, r in enumerate(rollout.get("nodes") or [])]
    cordoned = [r for r in rows if r["failed"] or "left cordoned" in (r.get("reason") or "")]
    outcomes: Dict[str, int] = {}
    for row in rows:
        outcomes[row.get("outcome") or "?"] = outcomes.get(row.get("outcome") or "?", 0) + 1
    return {"run": rollout.get("run"), "stopped_early": bool(rollout.get("stopped_early")),
            "batches": len({r["batch"] for r in rows if r.get("batch") is not None}),
            "rows": sorted(rows, key=lambda r: (not r["failed"], r.get("batch") or 1e9, r.get("node") or "")), "cordoned": cordoned,
            "outcomes": sorted(outcomes.items())}


def view(report: Mapping[str, Any]) -> Dict[str, Any]:
    """Everything the template needs."""
    nodes = node_views(report)
    summary = report.get("summary") or {}
    rollout = rollout_view(report.get("rollout"))
    drift = [dict(r, src=pointer("drift", i)) for i, r in enumerate(report.get("drift") or [])]
    failed_checks = sorted((dict(c, src=pointer("checks", i)) for i, c in enumerate(report.get("checks") or []) if not c["ok"]),
                           key=lambda c: c["node"])  # grouped by node, in the order they were checked
    ok = (not drift and not failed_checks and not (rollout and (rollout["cordoned"] or rollout["stopped_early"]))
          and summary.get("ok", True) is not False)
    return {"run_id": report.get("run_id"), "generated": report.get("generated"), "title": report.get("title"),
            "summary": summary, "has_verify": "summary" in report, "ok": ok, "nodes": nodes,
            "gpu_count": sum(len(v["gpus"]) for v in nodes), "fleet": fleet_resources(nodes),
            "failed_checks": failed_checks, "drift": drift, "rollout": rollout}
