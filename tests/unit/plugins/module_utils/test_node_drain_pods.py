"""A drain restricted to some pods (issue 38: evict only the pods that hold a device of the GPUs
that change): the others stay on the node with the reason; kubectl's rules still apply to the chosen."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import classify_pods, pod_key

from test_node_drain import pod


def test_only_the_chosen_pods_are_evicted_and_the_others_stay_with_the_reason():
    pods = [pod("gpu0"), pod("gpu1"), pod("bare", owner_kind=None), pod("ds", owner_kind="DaemonSet")]
    evict, skipped, blocking = classify_pods(pods, only_uids={"gpu1-uid"})
    assert [pod_key(p) for p in evict] == ["ns/gpu1"]
    assert blocking == []  # the unmanaged pod holds no changing GPU: not ours to judge
    assert dict((s["pod"], s["reason"]) for s in skipped) == {
        "ns/gpu0": "holds no device of the GPUs that change", "ns/bare": "holds no device of the GPUs that change",
        "ns/ds": "holds no device of the GPUs that change"}


def test_the_drain_rules_still_apply_to_a_chosen_pod():
    evict, _skipped, blocking = classify_pods([pod("bare", owner_kind=None), pod("ds", owner_kind="DaemonSet")],
                                              only_uids={"bare-uid", "ds-uid"})
    assert evict == [] and [b["pod"] for b in blocking] == ["ns/bare"]


def test_an_empty_choice_evicts_nothing_and_none_evicts_all():
    pods = [pod("a"), pod("b")]
    assert classify_pods(pods, only_uids=set())[0] == []
    assert [pod_key(p) for p in classify_pods(pods, only_uids=None)[0]] == ["ns/a", "ns/b"]
