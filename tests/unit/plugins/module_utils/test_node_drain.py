"""Unit tests for _node_drain.classify_pods, the Drainer (fake client) and _mig_operator."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_operator as migop
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _node_drain as drain
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import (
    DrainError, Drainer, blocking_message, classify_pods, planned_annotations, pod_key, pod_ready)


def pod(name, owner_kind="ReplicaSet", volumes=None, annotations=None, phase="Running", deleting=False, uid=None):
    meta = {"name": name, "namespace": "ns", "uid": uid or name + "-uid"}
    if owner_kind:
        meta["ownerReferences"] = [{"kind": owner_kind, "name": "o", "controller": True}]
    if annotations:
        meta["annotations"] = annotations
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"volumes": volumes or []}, "status": {"phase": phase}}


def test_classify_rules():
    pods = [
        pod("web"), pod("ds", owner_kind="DaemonSet"),
        pod("mirror", owner_kind=None, annotations={"kubernetes.io/config.mirror": "x"}),
        pod("scratch", volumes=[{"name": "cache", "emptyDir": {}}, {"name": "cfg", "configMap": {}}]),
        pod("bare", owner_kind=None), pod("done", owner_kind=None, phase="Succeeded"),
        pod("going", deleting=True),
    ]
    evict, skipped, blocking = classify_pods(pods)
    assert [pod_key(p) for p in evict] == ["ns/done", "ns/web"]
    assert dict((s["pod"], s["reason"]) for s in skipped) == {
        "ns/ds": "DaemonSet pod", "ns/going": "already terminating",
        "ns/mirror": "mirror pod (static pod managed by the kubelet)"}
    assert [b["pod"] for b in blocking] == ["ns/bare", "ns/scratch"]
    assert "emptyDir volume(s) cache" in blocking[1]["reason"]

    evict, _skipped, blocking = classify_pods(pods, delete_emptydir_data=True, force=True)
    assert [pod_key(p) for p in evict] == ["ns/bare", "ns/done", "ns/scratch", "ns/web"] and blocking == []


def test_non_controller_owner_counts_as_unmanaged():
    unmanaged = pod("x")
    unmanaged["metadata"]["ownerReferences"][0]["controller"] = False
    assert classify_pods([unmanaged])[2][0]["pod"] == "ns/x"


class FakeK8s:
    """Enough of K8sClient for the Drainer: evict answers from a script, pods vanish when evicted."""

    def __init__(self, refusals, dry_run=False):
        self.refusals = dict(refusals)  # pod name -> number of 429s before success
        self.dry_run = dry_run
        self.live = {}
        self.now_value = 0.0
        self.evictions = []

    def now(self):
        return self.now_value

    def evict(self, name, namespace, grace_period_seconds=None):
        self.evictions.append(name)
        if self.refusals.get(name, 0) > 0:
            self.refusals[name] -= 1
            raise K8sError("Cannot evict pod as it would violate the pod's disruption budget.", status=429)
        if name == "broken":
            raise K8sError("boom", status=500)
        self.live.pop(name, None)

    def get(self, kind, name, namespace=None):
        return self.live.get(name)

    def wait_for(self, what, probe, timeout, interval=2.0, progress=None):
        start = self.now_value
        while True:
            done, detail = probe()
            if done:
                return detail
            if self.now_value - start >= timeout:
                raise K8sError("timed out waiting for %s" % what)
            self.now_value += interval


def test_drainer_retries_429_until_allowed():
    k8s = FakeK8s({"a": 2})
    pods = [pod("a"), pod("b")]
    k8s.live = dict((p["metadata"]["name"], p) for p in pods)
    evicted = Drainer(k8s, "n", timeout=30, interval=1).evict_all(pods)
    assert [e["pod"] for e in evicted] == ["ns/b", "ns/a"]
    assert k8s.evictions == ["a", "b", "a", "a"]


def test_drainer_timeout_lists_refused_pods():
    k8s = FakeK8s({"a": 100})
    with pytest.raises(DrainError) as err:
        Drainer(k8s, "n", timeout=5, interval=1).evict_all([pod("a")])
    assert "1 pod(s) not evicted: ns/a (Cannot evict pod" in str(err.value)
    assert err.value.details == [{"pod": "ns/a", "reason": "Cannot evict pod as it would violate the pod's disruption budget."}]


def test_drainer_other_errors_stop_at_once():
    with pytest.raises(DrainError, match="eviction of ns/broken from n failed: boom"):
        Drainer(FakeK8s({}), "n", timeout=5, interval=1).evict_all([pod("broken")])


def test_drainer_waits_for_terminating_pods_by_uid():
    k8s = FakeK8s({})
    victim = pod("a")
    replacement = pod("a", uid="new-uid")  # a StatefulSet-like replacement with the same name
    original_evict = k8s.evict

    def evict(name, namespace, grace_period_seconds=None):
        original_evict(name, namespace, grace_period_seconds)
        k8s.live[name] = replacement
    k8s.evict = evict
    Drainer(k8s, "n", timeout=5, interval=1).evict_all([victim])

    stuck = FakeK8s({})
    stuck.evict = lambda name, namespace, grace_period_seconds=None: None  # accepted, never goes away
    stuck.live = {"a": victim}
    with pytest.raises(DrainError, match="did not terminate in time: ns/a"):
        Drainer(stuck, "n", timeout=3, interval=1).evict_all([victim])


def test_check_blocking():
    Drainer(FakeK8s({}), "n").check_blocking([])
    with pytest.raises(DrainError, match="cannot drain node n: ns/x why"):
        Drainer(FakeK8s({}), "n").check_blocking([{"pod": "ns/x", "reason": "why"}])


def test_dry_run_drainer_evicts_once_and_waits_for_nothing():
    k8s = FakeK8s({"a": 100}, dry_run=True)
    pods = [pod("b"), pod("a")]
    k8s.live = dict((p["metadata"]["name"], p) for p in pods)
    drainer = Drainer(k8s, "n", timeout=30, interval=1)
    planned = drainer.evict_all(pods)
    assert [e["pod"] for e in planned] == ["ns/a", "ns/b"]  # the budget's refusal is no error here
    assert k8s.evictions == ["a", "b"] and k8s.now_value == 0.0
    assert drainer.evicted == []  # nothing was evicted
    with pytest.raises(DrainError, match="eviction of ns/broken from n failed: boom"):
        Drainer(FakeK8s({}, dry_run=True), "n").evict_all([pod("broken")])


def test_blocking_message_annotations_and_ready():
    assert blocking_message("cannot drain node n", [{"pod": "ns/a", "reason": "r1"}, {"pod": "ns/b", "reason": "r2"}]) \
        == "cannot drain node n: ns/a r1; ns/b r2"
    assert planned_annotations({"a": "1", "b": "2"}, {"a": None, "c": 3}) == {"b": "2", "c": "3"}
    assert planned_annotations({"a": "1"}, None) == {"a": "1"}
    ready = {"metadata": {}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert pod_ready(ready)
    assert not pod_ready(dict(ready, metadata={"deletionTimestamp": "x"}))
    assert not pod_ready(dict(ready, status={"phase": "Pending"}))


# -- _mig_operator ---------------------------------------------------------------------------------

ITEMS_A = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]
ITEMS_B = [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.40gb": 1}}]


def test_merge_host_configs_and_conflicts():
    merged = migop.merge_host_configs({"common": ITEMS_B}, {"h1": {"halves": ITEMS_A}, "h2": {"halves": ITEMS_A}})
    assert merged == {"common": ITEMS_B, "halves": ITEMS_A}
    with pytest.raises(migop.MigOperatorError) as err:
        migop.merge_host_configs({}, {"h1": {"halves": ITEMS_A}, "h2": {"halves": ITEMS_B}})
    assert err.value.problems == ["MIG config 'halves' is defined differently by host h1 and host h2; all nodes "
                                  "share one ConfigMap, so give one of them another name"]
    with pytest.raises(migop.MigOperatorError, match="host h3: mig_configs must be a mapping"):
        migop.merge_host_configs(None, {"h3": ["x"]})
    assert migop.merge_host_configs() == {}


def test_missing_selections():
    assert migop.missing_selections({"a": 1}, {"n1": "a"}) == []
    problems = migop.missing_selections({"a": 1}, {"n2": "b", "n1": ""})
    assert problems == ["host n1: no MIG config selected (mig_config is empty)",
                        "host n2: MIG config 'b' is not defined (known: a)"]


def test_node_status_and_reason():
    node = {"metadata": {"labels": {migop.MIG_CONFIG_LABEL: "all-balanced", migop.MIG_STATE_LABEL: "success"},
                         "annotations": {"lab.gpufleet.io/mig-config-failure": "",
                                         drain.LEGACY_CORDON_MARKER: "mig-reconfiguration",
                                         drain.CORDON_OWNER: "run-1"}}}
    assert migop.node_mig_status(node) == ("all-balanced", "success")
    assert migop.node_is_configured(node, "all-balanced")
    assert not migop.node_is_configured(node, "all-1g.5gb")
    node["metadata"]["annotations"]["lab.gpufleet.io/mig-config-failure"] = "GPU 0 busy"
    events = [{"reason": "Scheduled", "message": "x"}, {"reason": "MigConfigFailed", "message": "GPU 0 busy"}]
    assert migop.failure_reason(node, events) == (
        "lab.gpufleet.io/mig-config-failure=GPU 0 busy; event MigConfigFailed: GPU 0 busy")
    assert "gave no reason" in migop.failure_reason({"metadata": {}}, [])


def test_operator_config_document_and_configmap():
    document = migop.operator_config_document({}, {"h1": {"halves": ITEMS_A}}, include_default_configs=False)
    assert document == {"version": "v1", "mig-configs": {"halves": ITEMS_A}}
    with_defaults = migop.operator_config_document(None, {"h1": {"halves": ITEMS_A}}, include_default_configs=True)
    assert "all-disabled" in with_defaults["mig-configs"] and with_defaults["mig-configs"]["halves"] == ITEMS_A
    with pytest.raises(migop.MigOperatorError):
        migop.operator_config_document({}, {"h1": {"x": ITEMS_A}, "h2": {"x": ITEMS_B}}, True)
    body = migop.config_map_body("cm", "ns", "text")
    assert body["data"] == {"config.yaml": "text"} and body["metadata"]["namespace"] == "ns"
    assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpufleet.sharing"}


def test_policy_config_name_and_undefined_config():
    assert migop.policy_config_name(None) is None
    assert migop.policy_config_name({"spec": {"migManager": {"config": {"name": "cm"}}}}) == "cm"
    assert migop.undefined_config({"mig-configs": {"a": []}}, "a", "ns/cm") is None
    assert migop.undefined_config({"mig-configs": {"b": [], "a": []}}, "c", "ns/cm") == (
        "MIG config 'c' is not defined in ConfigMap ns/cm (key config.yaml); it defines: a, b")
    assert migop.undefined_config("text", "c", "ns/cm") == "MIG config 'c' is not defined in ConfigMap ns/cm (key config.yaml)"


def test_cordon_ownership_and_relabel_step():
    assert drain.cordon_owner({"metadata": {}, "spec": {"unschedulable": True}}) is None
    legacy = {"metadata": {"annotations": {drain.LEGACY_CORDON_MARKER: "mig-reconfiguration"}},
              "spec": {"unschedulable": True}}
    assert drain.cordon_owner(legacy) == "mig-reconfiguration"
    lifted = drain.uncordon_node(legacy)
    assert lifted == {"metadata": {"annotations": {}}, "spec": {}}
    foreign = {"metadata": {}, "spec": {"unschedulable": True}}
    assert drain.cordon_node(foreign, "r1") is None and drain.uncordon_node(foreign) is None
    assert drain.uncordon_node(foreign, force=True) == {"metadata": {}, "spec": {}}
    fresh = drain.cordon_node({"metadata": {"name": "n"}}, "r1")
    assert fresh["spec"] == {"unschedulable": True} and drain.cordon_owner(fresh) == "r1"
    stale = {"metadata": {"annotations": {drain.CORDON_OWNER: "old"}}, "spec": {}}
    assert drain.uncordon_node(stale) == {"metadata": {"annotations": {}}, "spec": {}}
    assert migop.relabel_step("a", "pending", "a") == "wait"
    assert migop.relabel_step("a", "rebooting", "a") == "wait"
    assert migop.relabel_step("a", "failed", "a") == "restart"
    assert migop.relabel_step("a", None, "a") == "restart"
    assert migop.relabel_step("b", "success", "a") == "relabel"


class NodeSequence:
    """A client whose Node GETs return the given objects one after the other (time moves 1s a poll)."""

    def __init__(self, nodes, events=None):
        self.nodes = list(nodes)
        self.events = events or []
        self.clock = 0.0

    def now(self):
        return self.clock

    def get(self, kind, name, namespace=None):
        return self.nodes.pop(0)

    def events_for(self, kind, name, namespace=None):
        return self.events

    def wait_for(self, what, probe, timeout, interval=2.0, progress=None):
        while True:
            done, detail = probe()
            if done:
                return detail
            self.clock += 1.0


def mig_node(config, state, annotations=None):
    return {"metadata": {"labels": {migop.MIG_CONFIG_LABEL: config, migop.MIG_STATE_LABEL: state},
                         "annotations": annotations or {}}}


def test_wait_mig_config_history_failure_and_interference():
    history = []
    k8s = NodeSequence([mig_node("a", None), mig_node("a", "pending"), mig_node("a", "pending"), mig_node("a", "success")])
    migop.wait_mig_config(k8s, "n", "a", 60, 1, None, history)
    assert history == [{"state": None, "elapsed": 0.0}, {"state": "pending", "elapsed": 1.0},
                       {"state": "success", "elapsed": 3.0}]
    failing = NodeSequence([mig_node("a", "failed", {"example.com/mig-failure": "busy"})])
    with pytest.raises(migop.MigConfigFailed) as err:
        migop.wait_mig_config(failing, "n", "a", 60, 1, None, [])
    assert err.value.reason == "example.com/mig-failure=busy"
    assert str(err.value).startswith("the MIG manager failed to apply 'a' on n: example.com/mig-failure=busy.")
    with pytest.raises(K8sError, match="changed to 'b' by someone else"):
        migop.wait_mig_config(NodeSequence([mig_node("b", "success")]), "n", "a", 60, 1, None, [])
    with pytest.raises(K8sError, match="node n disappeared"):
        migop.wait_mig_config(NodeSequence([None]), "n", "a", 60, 1, None, [])


def test_drainer_names_a_refused_read_while_waiting():
    """A 403 while waiting for evicted pods is not a timeout: the message names the permission."""
    k8s = FakeK8s({})
    k8s.evict = lambda name, namespace, grace_period_seconds=None: None
    denied = ('GET /api/v1/namespaces/ns/pods/a: pods "a" is forbidden: User "u" cannot get resource '
              '"pods" in API group "" in the namespace "ns" (HTTP 403)')

    def get(kind, name, namespace=None):
        raise K8sError(denied, status=403)
    k8s.get = get
    with pytest.raises(DrainError) as err:
        Drainer(k8s, "n", timeout=3, interval=1).evict_all([pod("a")])
    assert "did not terminate in time" not in str(err.value)
    assert 'cannot get resource "pods" in API group "" in the namespace "ns"' in str(err.value)
