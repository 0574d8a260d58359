"""rollout_lock: a check writes nothing; a take that follows a check is refused, before any write, when the
Lease changed hands in between (issue 26: the lock is taken only when a run has something to change)."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_lock import format_time  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.modules import rollout_lock  # noqa: E402

NAME, NS = "gpufleet-sharing-rollout", "kube-system"


def _fleet(lease_age=None, live=False):
    fake = FakeK8s()
    fake.add("Node", "a", metadata={"name": "a", "annotations": {"gpufleet.sharing/rollout": "failed: x"}},
             spec={"unschedulable": True})
    fake.add("Node", "b", metadata={"name": "b", "annotations": {"gpufleet.sharing/paused-operands": "{}"}})
    if lease_age is not None:
        renewed = time.time() - lease_age
        fake.add("Lease", NAME, namespace=NS, spec={"holderIdentity": "run-0 bob@ctl", "acquireTime": format_time(renewed),
                                                    "renewTime": format_time(renewed),
                                                    "leaseDurationSeconds": 600 if live else 60})
    return fake


def test_a_check_reads_the_lock_and_the_nodes_and_writes_nothing(monkeypatch):
    for fake, message in ((_fleet(), "free"), (_fleet(lease_age=120), "expired")):
        result, failed = run(rollout_lock, {"holder": "run-1 me@ctl", "state": "checked"}, fake, monkeypatch)
        assert not failed and not result["changed"], result
        assert result["message"].startswith(message), result
        assert result["annotated_nodes"] == {"a": {"annotation": "failed: x", "unschedulable": True}}
        assert list(result["paused_nodes"]) == ["b"]
        assert "lease" not in result
        assert fake.writes == [] and fake.dry_writes == []


def test_a_check_refuses_a_live_lock_as_a_take_does(monkeypatch):
    result, failed = run(rollout_lock, {"holder": "run-1 me@ctl", "state": "checked"}, _fleet(lease_age=5, live=True),
                         monkeypatch)
    assert failed and "is held by run-0 bob@ctl since" in result["msg"]


def test_a_take_agreeing_with_its_check_takes_the_lock(monkeypatch):
    fake = _fleet(lease_age=120)
    check = run(rollout_lock, {"holder": "run-1 me@ctl", "state": "checked"}, fake, monkeypatch)[0]
    taken, failed = run(rollout_lock, {"holder": "run-1 me@ctl", "as_checked": check["message"]}, fake, monkeypatch)
    assert not failed and taken["message"].startswith("acquired (the lease of run-0 bob@ctl"), taken
    assert fake.obj("Lease", NAME, NS)["spec"]["holderIdentity"] == "run-1 me@ctl"


def test_a_take_after_the_lock_changed_hands_is_refused_before_any_write(monkeypatch):
    fake = _fleet(lease_age=120)  # checked free, but since then a run took the lock and its Lease expired
    result, failed = run(rollout_lock, {"holder": "run-1 me@ctl", "as_checked": "free"}, fake, monkeypatch)
    assert failed and "changed hands since this run checked it (checked: free; now: acquired (the lease of" in result["msg"]
    assert "run again" in result["msg"]
    assert fake.writes == [] and fake.dry_writes == []
