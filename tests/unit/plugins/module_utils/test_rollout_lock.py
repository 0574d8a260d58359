"""The rollout lock's pure Lease logic (module_utils/fleet/_rollout_lock.py), with an injected clock."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_lock import (
    LeaseDecision, decide, format_time, parse_time, taken_as_checked)

T0 = 1_800_000_000.0
ME = "run-1 alice@ctl"
OTHER = "run-0 bob@ctl2"


def _lease(holder: str, acquired: float, renewed: float, duration: int = 600) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "gpufleet-sharing-rollout", "namespace": "kube-system", "resourceVersion": "7"},
            "spec": {"holderIdentity": holder, "acquireTime": format_time(acquired),
                     "renewTime": format_time(renewed), "leaseDurationSeconds": duration,
                     "leaseTransitions": 2}}


def test_time_round_trip():
    assert format_time(T0) == "2027-01-15T08:00:00.000000Z"
    assert parse_time(format_time(T0 + 0.25)) == T0 + 0.25


def test_acquire_creates_a_missing_lease():
    result = decide(None, "acquired", ME, 600, T0)
    assert result.action == "create"
    assert result.spec == {"holderIdentity": ME, "acquireTime": format_time(T0), "renewTime": format_time(T0),
                           "leaseDurationSeconds": 600, "leaseTransitions": 0}


def test_acquire_refuses_a_live_lease_of_another_run():
    result = decide(_lease(OTHER, T0 - 100, T0 - 10), "acquired", ME, 600, T0)
    assert result.action == "refuse"
    assert result.message == ("held by %s since %s (expires %s)"
                              % (OTHER, format_time(T0 - 100), format_time(T0 - 10 + 600)))


def test_acquire_takes_an_expired_lease_over():
    result = decide(_lease(OTHER, T0 - 2000, T0 - 601), "acquired", ME, 300, T0)
    assert result.action == "update"
    assert result.spec["holderIdentity"] == ME
    assert result.spec["leaseTransitions"] == 3
    assert result.spec["leaseDurationSeconds"] == 300
    assert "expired" in result.message and OTHER in result.message


def test_acquire_of_our_own_lease_renews_it():
    result = decide(_lease(ME, T0 - 100, T0 - 50), "acquired", ME, 600, T0)
    assert result.action == "update"
    assert result.spec["acquireTime"] == format_time(T0 - 100)
    assert result.spec["renewTime"] == format_time(T0)
    assert result.spec["leaseTransitions"] == 2


def test_renew_refuses_when_another_run_holds_it():
    assert decide(_lease(OTHER, T0, T0), "renewed", ME, 600, T0).action == "refuse"
    assert decide(None, "renewed", ME, 600, T0).action == "refuse"


def test_release_deletes_only_our_lease():
    assert decide(_lease(ME, T0, T0), "released", ME, 600, T0).action == "delete"
    assert decide(None, "released", ME, 600, T0) == LeaseDecision("none", "not held", None)
    other = decide(_lease(OTHER, T0, T0), "released", ME, 600, T0)
    assert other.action == "none" and OTHER in other.message


def test_check_writes_nothing_and_says_whether_the_lock_is_free():
    """``checked`` (issue 26: the lock is taken only when something must change) reads and decides, never writes."""
    assert decide(None, "checked", ME, 600, T0) == LeaseDecision("none", "free", None)
    released = _lease("", T0 - 100, T0 - 100)  # a Lease without a holder: free, as for a take
    assert decide(released, "checked", ME, 600, T0) == LeaseDecision("none", "free", None)
    expired = decide(_lease(OTHER, T0 - 2000, T0 - 601), "checked", ME, 600, T0)
    assert expired.action == "none" and expired.spec is None
    assert expired.message == "expired (the lease of %s had expired)" % (
        "%s since %s (expires %s)" % (OTHER, format_time(T0 - 2000), format_time(T0 - 1)))


def test_check_refuses_a_live_lease_of_another_run_as_a_take_does():
    live = _lease(OTHER, T0 - 100, T0 - 10)
    assert decide(live, "checked", ME, 600, T0) == decide(live, "acquired", ME, 600, T0)


def test_a_take_after_a_check_agrees_with_it_or_the_lock_changed_hands():
    """The take's message matches the check's when nobody touched the Lease in between."""
    expired = _lease(OTHER, T0 - 2000, T0 - 601)
    check, take = decide(expired, "checked", ME, 600, T0), decide(expired, "acquired", ME, 600, T0 + 1)
    assert taken_as_checked(check.message, take.message)
    assert taken_as_checked(decide(None, "checked", ME, 600, T0).message, decide(None, "acquired", ME, 600, T0).message)
    assert not taken_as_checked("free", take.message)  # someone held it in between, then it expired
    assert not taken_as_checked(check.message, "acquired")  # the expired Lease went away in between


def test_check_is_the_take_without_its_write_even_for_its_own_holder():
    """The check is derived from the take's decision, so the two cannot disagree; it never writes."""
    ours = decide(_lease(ME, T0 - 100, T0 - 50), "checked", ME, 600, T0)
    assert ours.action == "none" and ours.spec is None
