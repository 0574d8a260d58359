"""_rollout_triage: the outcome of every kind of plan, as the rollout's plan play decided it per host."""

from __future__ import annotations

import itertools

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_triage import (
    MARK_ANNOTATED, MARK_DELETED, MARK_REFUSED, failure_message, restart_selectors, steps, summary_rows, to_annotate_again, triage,
    with_backend)


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


def test_failed_rows_say_what_happened_to_the_node():
    """Issue 21 (12, 13): a node deleted mid-run, or whose failure reason the API refused, was summarised as
    if it stayed cordoned with its reason; the reason written again at the end of the run is said too."""
    recorded = {"a": {"outcome": "failed", "reason": "apply failed", "mark": MARK_ANNOTATED},
                "b": {"outcome": "failed", "reason": "node b not found", "mark": MARK_DELETED},
                "c": {"outcome": "failed", "reason": "hook failed", "mark": MARK_REFUSED, "mark_error": "HTTP 500"},
                "d": {"outcome": "unreachable", "reason": "ssh", "mark": MARK_REFUSED, "mark_error": "HTTP 500"}}
    rows = summary_rows(["a", "b", "c", "d", "e"], recorded, {}, remarked={"c": "", "d": "HTTP 503"})
    states = [row.get("node_state") for row in rows]
    assert states[0] == "cordoned, annotated with the reason (gpufleet.sharing/rollout)"
    assert states[1].startswith("deleted during the run: no Node object to cordon or annotate")
    assert states[2] == ("cordoned, annotated with the reason at the end of the run (the first write was refused: "
                         "HTTP 500)")
    assert states[3].startswith("NOT annotated with the reason: the API refused it (HTTP 500), and again at the end "
                                "of the run (HTTP 503)")
    assert "node_state" not in rows[4]
    message = failure_message(rows)
    assert message.startswith("Rollout failed on a, b, c, d.")
    assert "b: deleted during the run" in message and "a: cordoned, annotated with the reason" in message
    assert "stay cordoned" not in message


def test_nodes_whose_reason_must_be_written_again():
    recorded = {"a": {"outcome": "failed", "reason": "x", "mark": MARK_REFUSED},
                "b": {"outcome": "failed", "reason": "y", "mark": MARK_DELETED},
                "c": {"outcome": "failed", "reason": "z", "mark": MARK_ANNOTATED}}
    assert to_annotate_again(["a", "b", "c"], recorded, {"a": "node-a"}) == [{"host": "a", "node": "node-a", "reason": "x"}]


def test_the_steps_of_a_node_follow_its_outcome():
    """The one vocabulary the rollout role reads: which of its steps a node's batch runs, in order."""
    full = ["drain", "pause", "apply", "restore", "restart", "verify", "uncordon"]
    assert steps({"outcome": "mig_change"}, cluster=True, pause=True, verify=True) == full
    assert steps({"outcome": "mig_change"}, cluster=True, pause=False, verify=False) == [
        "drain", "apply", "restart", "uncordon"]
    assert steps({"outcome": "mig_change"}, cluster=False, pause=True, verify=True) == ["apply"]
    assert steps({"outcome": "files_only"}, cluster=True, pause=True, verify=True) == ["files"]
    # A plan that failed is refused before anything changes (no drain), with its message.
    assert steps({"outcome": "mig_change", "error": "cannot be applied"}, cluster=True, pause=True, verify=True) == ["refuse"]
    for settled in ("unchanged", "unreachable", "unplanned"):
        assert steps({"outcome": settled}, cluster=True, pause=True, verify=True) == []


def test_a_node_that_moves_between_backends_goes_through_the_batches():
    """A settled layout on a node whose backend moves (device plugin <-> DRA) is still drained and switched;
    an unreachable node stays settled; a node that does not move keeps its outcome."""
    for outcome in ("unchanged", "files_only"):
        moved = with_backend({"outcome": outcome, "gpus": []}, "dra", True)
        assert moved["outcome"] == "mig_change" and moved["move"] and moved["backend"] == "dra"
        assert with_backend({"outcome": outcome}, "dra", False)["outcome"] == outcome
    assert with_backend({"outcome": "unreachable"}, "device-plugin", True)["outcome"] == "unreachable"


def test_a_dra_node_is_proven_by_its_slices_not_the_device_plugin_verify():
    dra = {"outcome": "mig_change", "backend": "dra", "move": False}
    assert steps(dra, cluster=True, pause=True, verify=True) == [
        "drain", "pause", "apply", "restore", "restart", "backend", "uncordon"]
    back = {"outcome": "mig_change", "backend": "device-plugin", "move": True}
    assert steps(back, cluster=True, pause=True, verify=True) == [
        "drain", "pause", "apply", "restore", "restart", "backend", "verify", "uncordon"]
    # Without the cluster there is no backend to switch.
    assert steps(dra, cluster=False, pause=True, verify=True) == ["apply"]
    plain = {"outcome": "mig_change", "backend": "device-plugin", "move": False}
    assert "backend" not in steps(plain, cluster=True, pause=True, verify=True)


def test_restart_selectors_skip_what_the_restore_brought_back():
    """issue 26 (2): the device plugin and GFD pods the restore started after the apply (their
    operand was paused, so their pods were gone while the layout changed) see the new devices: the
    restart step does not delete them again. What the restore did not bring back is restarted."""
    both = ["app=nvidia-device-plugin-daemonset", "app=gpu-feature-discovery"]
    assert restart_selectors([]) == both
    assert restart_selectors(["nvidia-dcgm-exporter", "nvidia-dcgm"]) == both
    assert restart_selectors(["nvidia-device-plugin-daemonset", "nvidia-dcgm"]) == ["app=gpu-feature-discovery"]
    assert restart_selectors(["nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter"]) == []


def test_a_converged_node_that_advertises_less_than_its_plan_is_readvertised():
    """Issue 43 (6): the host's layout is the plan, but its device plugin was not restarted after a change by
    hand; the node advertises the old devices. Such a node used to be settled (nothing restarted, every run
    failed verification); now it goes through a batch that restarts what advertises and verifies."""
    from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_triage import BATCHED, readvertise
    settled = {"a": {"outcome": "unchanged", "node": "gpu-a", "gpus": [], "reason": ""},
               "b": {"outcome": "unchanged", "node": "gpu-b", "gpus": [], "reason": ""},
               "c": {"outcome": "mig_change", "node": "gpu-c", "gpus": [0], "reason": ""},
               "d": {"outcome": "unreachable", "node": "gpu-d", "gpus": [], "reason": "x"}}
    answer = readvertise(settled, ["gpu-b", "gpu-c", "gpu-d"])
    assert answer["a"] == settled["a"] and answer["c"] == settled["c"] and answer["d"] == settled["d"]
    assert answer["b"]["outcome"] == "readvertise" and "readvertise" in BATCHED
    assert steps(answer["b"], cluster=True, pause=True, verify=True) == ["restart", "verify"]
    assert steps(dict(answer["b"], backend="dra"), cluster=True, pause=True, verify=True) == ["backend"]
    assert steps(answer["b"], cluster=True, pause=True, verify=False) == ["restart"]
    assert steps(answer["b"], cluster=False, pause=True, verify=True) == []


def test_only_a_failed_check_of_what_a_node_advertises_sends_it_to_readvertise():
    """A DRA node without a GPU plan in the read (a `plan` check) or a label that differs is no reason to
    restart what advertises (the DRA rerun of test_rollout_dra.py restarted its kubelet plugin for that)."""
    from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_triage import underadvertised_nodes
    checks = [{"node": "a", "kind": "capacity", "ok": False}, {"node": "b", "kind": "plan", "ok": False},
              {"node": "c", "kind": "label", "ok": False}, {"node": "d", "kind": "slice", "ok": False},
              {"node": "e", "kind": "allocatable", "ok": False}, {"node": "f", "kind": "capacity", "ok": True}]
    assert underadvertised_nodes(checks) == ["a", "d", "e"]
