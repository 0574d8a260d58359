"""The HTML report's node views read the report's rows once, not once per node (issue 26, fifth pass).

At 200 nodes a view per node that scanned every check, pod and probe row made the page quadratic in
the fleet: 2.3 s of a no-op site.yml, through Ansible's lazy containers. Counted, not timed.
"""

from __future__ import annotations

import copy
import json
import os

from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_view import node_views, pointer

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "fleet-report")


class Row(dict):
    """A report row counting how often its node is read."""

    reads = 0

    def __getitem__(self, key):
        if key == "node":
            Row.reads += 1
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        if key == "node":
            Row.reads += 1
        return dict.get(self, key, default)


def fleet(nodes):
    """The lab fixture's report, its nodes repeated under new names to ``nodes`` nodes."""
    with open(os.path.join(FIXTURES, "verify.json")) as handle:
        base = json.load(handle)
    report = dict(base, nodes=[], checks=[], pods=[], probe=[], gpus={})
    for copy_index in range(nodes // len(base["nodes"]) + 1):
        for node in base["nodes"]:
            if len(report["nodes"]) == nodes:
                break
            name = "%s-%d" % (node["node"], copy_index)
            report["nodes"].append(dict(copy.deepcopy(node), node=name))
            for key in ("checks", "pods", "probe"):
                report[key] += [Row(copy.deepcopy(row), node=name) for row in base.get(key) or [] if row.get("node") == node["node"]]
            report["gpus"][name] = copy.deepcopy((base.get("gpus") or {}).get(node["node"]) or [])
    return report


def reference(report):
    """The views as the report defines them, one node at a time (the old, quadratic way)."""
    views = {}
    for index, node in enumerate(report["nodes"]):
        name = node["node"]
        node_checks = [(i, c) for i, c in enumerate(report["checks"]) if dict.get(c, "node") == name]
        pod_checks = {(dict.get(c, "node"), c["name"]): (i, c) for i, c in enumerate(report["checks"]) if c.get("kind") == "pod"}
        pods = []
        for i, pod in enumerate(report["pods"]):
            if dict.get(pod, "node") == name:
                check = pod_checks.get((name, pod.get("resource")))
                pods.append(dict(pod, src=pointer("pods", i), saw=check[1]["actual"] if check else None,
                                 saw_src=pointer("checks", check[0], "actual") if check else None))
        views[name] = {"index": index, "total": len(node_checks), "passed": sum(1 for _i, c in node_checks if c["ok"]),
                       "failed_checks": [dict(c, src=pointer("checks", i)) for i, c in node_checks if not c["ok"]],
                       "pods": pods, "probe": [i for i, row in enumerate(report["probe"]) if dict.get(row, "node") == name]}
    return views


def test_the_views_equal_the_per_node_reading():
    report = fleet(12)
    expected = reference(report)
    views = node_views(report)
    assert sorted(v["name"] for v in views) == sorted(expected)
    for view in views:
        want = expected[view["name"]]
        assert (view["index"], view["total"], view["passed"]) == (want["index"], want["total"], want["passed"])
        assert view["failed_checks"] == want["failed_checks"] and view["pods"] == want["pods"]
        assert [row["src"] for row in view["probe"]] == [pointer("probe", i) for i in want["probe"]]
    assert any(view["failed_checks"] for view in views) and any(view["pods"] for view in views)


def test_the_rows_are_read_a_fixed_number_of_times_whatever_the_fleet():
    reads = {}
    for nodes in (6, 60):
        report = fleet(nodes)
        rows = sum(len(report[key]) for key in ("checks", "pods", "probe"))
        Row.reads = 0
        node_views(report)
        reads[nodes] = Row.reads / rows
    # Each row's node is read a few times in all (grouping, the check index), not once per node.
    assert reads[60] <= reads[6] * 1.1 and reads[60] < 6, reads
