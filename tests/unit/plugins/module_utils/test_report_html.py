"""The HTML fleet report (issue 24): every figure it shows is the JSON's, failures come first, and
the page is self-contained. The data is a real lab run (tests/fixtures/fleet-report/README.md)."""

from __future__ import annotations

import copy
import json
import os
import re

import pytest

from ansible_collections.gpufleet.sharing.plugins.filter.report_html import report_html
from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_html import render_html
from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_view import pointer

from ansible.errors import AnsibleFilterError

from report_dom import Tree, disagreements

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "fleet-report")

DRIFT = [
    {"node": "a100-inf-1", "what": "MIG layout of GPU 0", "planned": "1g.5gb x2, 2g.10gb, 3g.20gb",
     "found": "1g.5gb x4, 3g.20gb", "since": None, "converge": "ansible-playbook playbooks/site.yml --limit a100-inf-1"},
    {"node": "h200-shr-1", "what": "label nvidia.com/device-plugin.config", "planned": "h200-mps-4", "found": "absent",
     "since": "2026-12-02T01:30:00Z", "converge": "ansible-playbook playbooks/site.yml"},
]


def load(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)


@pytest.fixture(name="data")
def fixture_data():
    """The lab run's verification report with the rollout summary, as the verify role combines them."""
    report = load("verify.json")
    report["rollout"] = load("rollout-summary.json")
    return json.loads(json.dumps(report))


def test_every_figure_on_the_page_is_the_jsons(data):
    problems, shown = disagreements(render_html(data), data)
    assert problems == []
    # and the page shows them all: per node each planned resource and what it advertises, every pod,
    # every probe figure drawn, every GPU and MIG instance, every rollout outcome
    wanted = set()
    for index, node in enumerate(data["nodes"]):
        wanted.update(pointer("nodes", index, "resources", name) for name, count in node["resources"].items() if count)
    wanted.update(pointer("checks", i, "actual") for i, c in enumerate(data["checks"])
                  if c["kind"] in ("capacity", "allocatable") and not c["name"].endswith(".shared") or not c["ok"])
    wanted.update(pointer("pods", i, "seconds") for i in range(len(data["pods"])))
    wanted.update(pointer("probe", i, key) for i in range(len(data["probe"]))
                  for key in ("exclusive_tflops", "memory_allocatable_mib", "replicas"))
    wanted.update(pointer("gpus", node, n, "instances", k, "start") for node, gpus in data["gpus"].items()
                  for n, gpu in enumerate(gpus) for k in range(len(gpu["instances"])))
    wanted.update(pointer("rollout", "nodes", i, "outcome") for i in range(len(data["rollout"]["nodes"])))
    assert sorted(wanted - set(shown)) == []


def test_the_comparison_fails_when_the_page_and_the_json_disagree(data):
    html = render_html(data)
    changed = copy.deepcopy(data)
    changed["nodes"][0]["resources"][sorted(changed["nodes"][0]["resources"])[0]] += 1
    changed["probe"][0]["exclusive_tflops"] *= 2
    changed["gpus"]["a100-inf-0"][0]["instances"][0]["start"] = 6
    problems, _shown = disagreements(html, changed)
    assert len(problems) >= 3 and any("/probe/0/exclusive_tflops" in p for p in problems)
    assert any(p.startswith("figure fleet/") for p in problems)


def test_failures_come_first_and_are_marked(data):
    tree = Tree(render_html(data))
    sections = [e.attrs["data-node"] for e in tree.all("data-node", "section")]
    failed = data["summary"]["failed_nodes"]
    assert failed and sections[:len(failed)] == sorted(failed)
    assert sorted(sections) == sorted(n["node"] for n in data["nodes"])
    rows = [e for e in tree.all("data-failed", "tr") if e.attrs["data-failed"] == "true"]
    assert {e.attrs["data-node"] for e in rows if "data-node" in e.attrs} == set(failed)
    ids = [e.attrs.get("id") for e in tree.all("id")]
    assert ids.index("failures") < ids.index("fleet") < ids.index("nodes")
    assert Tree(render_html(data)).all("id", "header")[0].attrs["data-ok"] == "false"


def test_drift_rows_come_first_among_the_failures(data):
    data["drift"] = DRIFT
    html = render_html(data)
    assert disagreements(html, data)[0] == []
    tree = Tree(html)
    ids = [e.attrs.get("id") for e in tree.all("id")]
    assert ids.index("drift") < ids.index("failures")
    table = [e for e in tree.all(tag="table") if e.attrs.get("class") == "drift"][0]
    cells = [[td.text().strip() for td in tr.children if td.tag == "td"] for tr in table.children if tr.tag == "tr"][1:]
    assert cells[0] == ["a100-inf-1", "MIG layout of GPU 0", DRIFT[0]["planned"], DRIFT[0]["found"], "-", DRIFT[0]["converge"]]
    assert cells[1][4] == "2026-12-02T01:30:00Z"


def test_drift_alone_renders():
    html = render_html({"drift": DRIFT})
    assert "a100-inf-1" in html and 'data-ok="false"' in html and "Fleet at a glance" not in html


def test_a_clean_fleet_passes(data):
    for check in data["checks"]:
        check["ok"] = True
    data["summary"].update(ok=True, failed=0, failed_nodes=[])
    data["rollout"]["nodes"] = [dict(r, outcome="changed", reason="") for r in data["rollout"]["nodes"]]
    tree = Tree(render_html(data))
    assert tree.all("id", "header")[0].attrs["data-ok"] == "true"
    assert not [e for e in tree.all("data-failed", "section") if e.attrs["data-failed"] == "true"]


def test_the_page_is_self_contained_and_prints(data):
    data["drift"] = DRIFT
    html = render_html(data)
    assert not re.search(r"(?i)https?:|//[a-z0-9]|<script|@import|url\(|<link|<img|<iframe", html)
    assert all(e.attrs["href"].startswith("#") for e in Tree(html).all("href"))
    assert "@media print" in html and "<svg" in html


def test_text_from_the_cluster_is_escaped(data):
    data["checks"][0].update(ok=False, message="<script>alert(1)</script>", actual='"><b>')
    html = render_html(data)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_mig_instances_are_drawn_with_their_uuids(data):
    html = render_html(data)
    for gpus in data["gpus"].values():
        for gpu in gpus:
            assert gpu["uuid"] is None or gpu["uuid"] in html
            for instance in gpu["instances"] + gpu["other"]:
                assert instance["uuid"] is None or instance["uuid"] in html


def test_the_filter_refuses_what_is_not_a_report():
    with pytest.raises(AnsibleFilterError, match="expected the report data"):
        report_html(["not", "a", "report"])
    assert "GPU fleet report" in report_html({})


def test_a_rollout_alone_shows_the_nodes_left_cordoned_first():
    rollout = {"run": "20261202T011828Z-1", "stopped_early": True, "nodes": [
        {"node": "a100-inf-0", "outcome": "changed", "gpus": [0], "reason": "", "batch": 1},
        {"node": "a100-inf-1", "outcome": "failed", "gpus": [0], "batch": 2,
         "reason": "GPU 0 still runs compute processes after the drain (task: Apply the MIG layout on the host)"},
        {"node": "h100-trn-0", "outcome": "changed", "gpus": [], "reason": "left cordoned: it was cordoned before this run",
         "batch": 2},
        {"node": "h100-trn-1", "outcome": "not started", "gpus": [], "reason": ""}]}
    data = {"rollout": rollout}
    html = render_html(data)
    assert disagreements(html, data)[0] == []
    tree = Tree(html)
    cordoned = [e for e in tree.all(tag="table") if e.attrs.get("class") == "cordoned"][0]
    assert [tr.attrs["data-node"] for tr in cordoned.children if tr.tag == "tr" and "data-node" in tr.attrs] == [
        "a100-inf-1", "h100-trn-0"]
    rows = [e for e in tree.all(tag="table") if e.attrs.get("class") == "rollout"][0]
    assert [tr.attrs["data-node"] for tr in rows.children if "data-node" in tr.attrs][0] == "a100-inf-1"
    assert "stopped early" in html and "still runs compute processes" in html
    assert "/rollout/nodes/1/batch" in disagreements(html, data)[1] and ">2</span> batches" in html
    assert tree.all("id", "header")[0].attrs["data-ok"] == "false"


def test_partial_reports_render(data):
    """A check-mode run (no pods, no probe), an older JSON without ``gpus``, a node read from its labels."""
    for key in ("pods", "probe", "gpus"):
        data.pop(key)
    data["nodes"][0]["labels"] = {}
    data["rollout"]["nodes"][0].pop("gpus")
    html = render_html(data)
    assert disagreements(html, data)[0] == [] and html.count("<section") == len(data["nodes"])
