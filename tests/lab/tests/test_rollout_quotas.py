"""Team quotas follow a MIG change in a rollout (issue 23): shrink before the nodes change, grow after
they verify, summary before/after per team, a re-run changes nothing.

Two A100-40GB hosts + the virtual cluster (rollout_lab); site.yml installs the operator and lays out
all-1g.5gb (7 x nvidia.com/mig-1g.5gb per node); rollout.yml then moves both to all-balanced
(2 x 1g.5gb, 1 x 2g.10gb, 1 x 3g.20gb per node).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from gpulab import hosts

from rollout_lab import flat, start_lab

pytestmark = pytest.mark.lab_hosts

MIG1, MIG2, MIG3 = "nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-3g.20gb"
TEAMS = [{"name": "vision", "namespaces": ["vision"], "cohort": "lab", "shares": {MIG1: "50%", MIG2: "50%", MIG3: "50%"}},
         {"name": "nlp", "namespaces": ["nlp"], "cohort": "lab", "lending_limit": 1, "shares": {MIG1: "25%", MIG3: "50%"}}]


def totals(lab, team):
    cq = lab.k8s.get("ClusterQueue", team)
    sums = {}
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for res in flavor["resources"]:
                sums[res["name"]] = sums.get(res["name"], 0) + int(res["nominalQuota"])
    return sums


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    lab = start_lab(str(tmp_path_factory.mktemp("quotalab")))
    try:
        for ns in ("vision", "nlp"):
            lab.k8s.ensure_namespace(ns)
        lab.site = lab.play("site.yml", mig_config="all-1g.5gb", gpufleet_teams=TEAMS)
        assert lab.site.returncode == 0, flat(lab.site.stdout + lab.site.stderr)[-4000:]
        lab.first = {t["name"]: totals(lab, t["name"]) for t in TEAMS}
        lab.change = lab.play("rollout.yml", mig_config="all-balanced", gpufleet_teams=TEAMS)
        lab.second = {t["name"]: totals(lab, t["name"]) for t in TEAMS}
        with open(os.path.join(lab.report_dir, "rollout-summary.json"), encoding="utf-8") as handle:
            lab.change_quotas = {row["team"]: row for row in json.load(handle)["quotas"]}
        lab.rerun = lab.play("rollout.yml", mig_config="all-balanced", gpufleet_teams=TEAMS)
        yield lab
    finally:
        hosts.down(lab.dir)


def test_site_gives_each_team_its_share_of_the_layout(fleet):
    assert fleet.first == {"vision": {MIG1: 7}, "nlp": {MIG1: 3}}


def test_the_rollout_shrinks_before_the_batches_and_grows_after(fleet):
    output = fleet.change.stdout
    assert fleet.change.returncode == 0, flat(output + fleet.change.stderr)[-4000:]
    shrink = output.index("TASK [gpufleet.sharing.quotas : Team quotas from the fleet plan (shrunk)]")
    batches = output.index("PLAY [Rollout - MIG changes on GPU hosts in batches]")
    grow = output.index("TASK [gpufleet.sharing.quotas : Team quotas from the fleet plan (present)]")
    assert shrink < batches < grow
    assert fleet.second == {"vision": {MIG1: 2, MIG2: 1, MIG3: 1}, "nlp": {MIG1: 1, MIG3: 1}}
    quotas = fleet.change_quotas
    # while the nodes changed: the smaller of before (7 x 1g.5gb) and after, per resource
    assert quotas["vision"] == {"team": "vision", "before": {MIG1: 7}, "shrunk": {MIG1: 2, MIG2: 0, MIG3: 0},
                                "after": {MIG1: 2, MIG2: 1, MIG3: 1}}
    assert quotas["nlp"] == {"team": "nlp", "before": {MIG1: 3}, "shrunk": {MIG1: 1, MIG3: 0}, "after": {MIG1: 1, MIG3: 1}}
    assert output.count("Team quotas from the fleet plan (present)]") == 1
    assert re.search(r'vision +\{\\?"nvidia.com/mig-1g.5gb\\?": 7\} +\{', flat(output[grow:])), flat(output[grow:])[:3000]


def test_a_rerun_changes_nothing(fleet):
    output = flat(fleet.rerun.stdout + fleet.rerun.stderr)
    assert fleet.rerun.returncode == 0, output[-4000:]
    assert re.findall(r"(flt-\d) *: ok=\d+ +changed=(\d+)", output) == [("flt-0", "0"), ("flt-1", "0")], output[-3000:]
    assert {t["name"]: totals(fleet, t["name"]) for t in TEAMS} == fleet.second
    with open(os.path.join(fleet.report_dir, "rollout-summary.json"), encoding="utf-8") as handle:
        rows = json.load(handle)["quotas"]
    assert all(row["before"] == row["shrunk"] == row["after"] for row in rows) and len(rows) == 2
