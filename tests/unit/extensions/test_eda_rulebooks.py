"""The two rulebooks of extensions/eda/rulebooks (issue 37) say the same thing: gpu_fleet.yml runs the
collection's playbooks (ansible-rulebook's run_playbook, tested against the lab in
tests/lab/tests/test_eda_rulebook.py), gpu_fleet_controller.yml starts the job templates that run
them under the EDA controller. Same sources, same conditions, the same playbook per rule, each job
limited to the event's node."""

from __future__ import annotations

import os

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULEBOOKS = os.path.join(REPO, "extensions", "eda", "rulebooks")
# The job templates docs/awx.md asks for, by the playbook each runs.
TEMPLATES = {"gpu-fleet site": "site", "gpu-fleet drift": "drift", "gpu-fleet verify": "verify"}


def rulebook(name):
    with open(os.path.join(RULEBOOKS, name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_both_rulebooks_have_the_same_sources_and_conditions():
    local, controller = rulebook("gpu_fleet.yml"), rulebook("gpu_fleet_controller.yml")
    assert [list(s) for s in local[0]["sources"]] == [list(s) for s in controller[0]["sources"]]
    assert [(r["name"], r["condition"]) for r in local[0]["rules"]] == \
        [(r["name"], r["condition"]) for r in controller[0]["rules"]]


def test_each_rule_runs_the_same_playbook_on_the_events_node():
    local, controller = rulebook("gpu_fleet.yml"), rulebook("gpu_fleet_controller.yml")
    for mine, theirs in zip(local[0]["rules"], controller[0]["rules"]):
        playbook = mine["action"]["run_playbook"]["name"]
        assert playbook.startswith("gpufleet.sharing.")
        assert os.path.isfile(os.path.join(REPO, "playbooks", playbook.rsplit(".", 1)[1] + ".yml")), playbook
        job = theirs["action"]["run_job_template"]
        assert "gpufleet.sharing." + TEMPLATES[job["name"]] == playbook, mine["name"]
        assert job["job_args"]["limit"] == "{{ event.gpufleet.node }}", mine["name"]
        # run_playbook takes its --limit from the event's meta.hosts; both keep the verification on that node.
        assert mine["action"]["run_playbook"]["extra_vars"]["verify_nodes"] == "{{ event.meta.hosts }}"
        assert job["job_args"]["extra_vars"]["verify_nodes"] == ["{{ event.gpufleet.node }}"]
        extra = {k: v for k, v in mine["action"]["run_playbook"]["extra_vars"].items() if k != "verify_nodes"}
        assert extra == {k: v for k, v in job["job_args"]["extra_vars"].items() if k != "verify_nodes"}


def test_the_sources_are_the_collections_own():
    for source in rulebook("gpu_fleet.yml")[0]["sources"]:
        plugin = [key for key in source if key != "name"][0]
        assert plugin.startswith("gpufleet.sharing.")
        assert os.path.isfile(os.path.join(REPO, "extensions", "eda", "plugins", "event_source",
                                           plugin.rsplit(".", 1)[1] + ".py")), plugin
