"""_rollout_triage: the outcome of every kind of plan, as the rollout's plan play decided it per host."""

from __future__ import annotations

import itertools

from ansible_collections.gpufleet.sharing.plugins.module_utils._rollout_triage import summary_rows, triage


def old_rule(plan, annotated):
    """The rule the plan play applied per host in Jinja before the triage moved to one filter."""
    if plan.get("unreachable"):
        return "unreachable"
    converged = "changed_gpus" in plan and len(plan["changed_gpus"]) == 0 and "msg" not in plan and not annotated
    files_differ = plan.get("config_dest_changed", False) or plan.get("selected_config_override_changed", False)
    if converged and not files_differ:
        return "unchanged"
    files_only = len(plan.get("changed_gpus", [1])) == 0 and "msg" not in plan and not annotated
    return "files_only" if files_only else "mig_change"


def plans():
    keys = {"changed_gpus": [None, [], [0, 1]], "msg": [None, "cannot be applied"],
            "config_dest_changed": [None, False, True], "selected_config_override_changed": [None, False, True],
            "unreachable": [None, True]}
    for values in itertools.product(*keys.values()):
        yield dict((key, value) for key, value in zip(keys, values) if value is not None)


def test_every_plan_is_sorted_as_the_per_host_rule_did():
    count = 0
    for plan in plans():
        for annotated in (False, True):
            if not plan:
                continue
            assert triage(plan, annotated)["outcome"] == old_rule(plan, annotated), (plan, annotated)
            count += 1
    assert count > 200


def test_no_plan_is_unplanned():
    assert triage({}, False) == {"outcome": "unplanned", "reason": "", "gpus": []}
    assert triage(None, True)["outcome"] == "unplanned"


def test_unreachable_keeps_the_reason_and_a_change_its_gpus():
    assert triage({"unreachable": True, "msg": "ssh: timed out"}, False) == {
        "outcome": "unreachable", "reason": "ssh: timed out", "gpus": []}
    assert triage({"changed_gpus": [2, 3]}, False) == {"outcome": "mig_change", "reason": "", "gpus": [2, 3]}
    assert triage({"changed_gpus": [], "config_dest_changed": True}, False)["outcome"] == "files_only"
    assert triage({"changed_gpus": []}, True)["outcome"] == "mig_change"  # an annotated node is never settled


def test_summary_rows_prefer_the_batch_then_the_triage():
    triaged = {"a": {"outcome": "unchanged", "reason": ""}, "b": {"outcome": "unreachable", "reason": "ssh: timeout"},
               "c": {"outcome": "mig_change", "reason": ""}, "d": {"outcome": "mig_change"}}
    recorded = {"c": {"outcome": "changed", "gpus": [0, 1], "reason": ""}, "d": {}}
    assert summary_rows(["a", "b", "c", "d", "e"], recorded, triaged) == [
        {"node": "a", "outcome": "unchanged", "gpus": [], "reason": ""},
        {"node": "b", "outcome": "unreachable", "gpus": [], "reason": "ssh: timeout"},
        {"node": "c", "outcome": "changed", "gpus": [0, 1], "reason": ""},
        {"node": "d", "outcome": "not started", "gpus": [], "reason": ""},  # pending, its batch never ran
        {"node": "e", "outcome": "not started", "gpus": [], "reason": ""},
    ]
