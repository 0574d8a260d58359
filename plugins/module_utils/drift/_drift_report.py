# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift report's files (pure): JSON with the ``drift`` rows, JUnit with one testcase per checked
item (a passing one when the item has no row, a failing one per row), and a text table."""

from __future__ import annotations

import json
from typing import Any, List, Mapping, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.drift._drift import CLUSTER, Row
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check, render_junit

# (item, prefixes of a row's ``what``), per GPU node and for the cluster; the first match wins.
NODE_ITEMS = (
    ("host read and MIG plan", ("host read", "MIG plan")),
    ("MIG mode and layout", ("MIG GPU",)),
    ("nvidia-mig-manager files", ("nvidia-mig-manager file",)),
    ("device-plugin config label", ("label nvidia.com/device-plugin.config",)),
    ("operator state labels", ("label nvidia.com/mig.config.state", "label nvidia.com/gpu-driver-upgrade-state")),
    ("annotations and cordon", ("annotation ", "cordon ")),
    ("advertised resources and labels", ("advertised ", "label ", "node ")),
)
CLUSTER_ITEMS = (
    ("GPU Operator release and values", ("GPU Operator",)),
    ("sharing configs", ("device-plugin ConfigMap", "ClusterPolicy", "sharing plan")),
    ("rollout lock", ("rollout lock",)),
    ("Kueue team quotas", ("Kueue ",)),
)
SUITE = "gpufleet.sharing.drift"


def item_of(row: Row) -> str:
    for item, prefixes in CLUSTER_ITEMS if row["node"] == CLUSTER else NODE_ITEMS:
        if row["what"].startswith(prefixes):
            return item
    return "other"


def junit(rows: Sequence[Row], nodes: Sequence[str]) -> str:
    checks: List[Check] = []
    for node, items in [(CLUSTER, CLUSTER_ITEMS)] + [(node, NODE_ITEMS) for node in nodes]:
        mine = [r for r in rows if r["node"] == node]
        for item, _prefixes in items + (("other", ()),):
            found = [r for r in mine if item_of(r) == item]
            if item != "other" and not found:
                checks.append(Check(node, "drift", item, "as planned", "as planned", True))
            checks.extend(Check(node, "drift", "%s: %s" % (item, r["what"]), r["planned"], r["found"], False,
                                "%s: %s, planned %s (converge: %s)" % (r["what"], r["found"], r["planned"], r["converge"]))
                          for r in found)
    return render_junit(checks, SUITE)


def table(rows: Sequence[Row]) -> str:
    if not rows:
        return "No drift: the fleet is as planned."
    header = ("NODE", "WHAT", "PLANNED", "FOUND", "SINCE")
    lines = [header] + [(r["node"], r["what"], r["planned"], r["found"], r["since"] or "-") for r in rows]
    widths = [min(60, max(len(str(line[i])) for line in lines)) for i in range(len(header))]
    return "\n".join("  ".join(str(cell)[:60].ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines)


def report_json(result: Mapping[str, Any], nodes: Sequence[str]) -> str:
    return json.dumps({"drift": list(result["drift"]), "summary": dict(result["summary"]), "nodes": list(nodes)},
                      indent=2, sort_keys=True) + "\n"
