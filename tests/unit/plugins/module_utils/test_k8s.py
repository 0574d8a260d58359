"""Unit tests for _k8s: retry/backoff, 409 handling, apply/update semantics, paths, waits.

The transport is a fake DynamicClient (no network); the real HTTP path is covered by the lab tests
in tests/lab/tests/test_cluster_modules_operator*.py.
"""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _k8s
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._apply import object_key, unlisted
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _resources
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import ResourceType
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._apply import desired_differs, is_subset, merge_desired


class FakeApiException(_k8s._ApiException):
    def __init__(self, status, message="boom", reason=None, headers=None):  # pylint: disable=super-init-not-called
        self.status = status
        self.reason = reason or "Reason"
        self.headers = headers or {}
        self.body = json.dumps({"kind": "Status", "status": "Failure", "message": message,
                                "reason": reason or "Reason", "code": status})


class FakeResponse:
    def __init__(self, payload):
        self.data = json.dumps(payload).encode()


class FakeDynamic:
    """Scripted server: a queue of responses (dict payload or exception) per call, plus a log."""

    def __init__(self, script=None, handler=None):
        self.script = list(script or [])
        self.handler = handler
        self.calls = []

    def request(self, method, path, body=None, **kwargs):
        self.calls.append({"method": method, "path": path, "body": copy.deepcopy(body),
                           "query": dict(kwargs.get("query_params") or []),
                           "content_type": kwargs.get("content_type")})
        if self.handler is not None:
            result = self.handler(method, path, body, kwargs)
        else:
            result = self.script.pop(0)
        if isinstance(result, Exception):
            raise result
        return FakeResponse(result)


def make_client(dynamic, **kwargs):
    sleeps = []
    client = K8sClient(dynamic, sleep=sleeps.append, **kwargs)
    return client, sleeps


NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-a", "resourceVersion": "7", "labels": {"x": "1"}},
        "spec": {}}


# -- pure helpers ---------------------------------------------------------------------------------

def test_paths_for_core_group_namespaced_and_subresource():
    pod = _resources.BUILTIN_TYPES["Pod"]
    assert pod.path("p", "ns", "eviction") == "/api/v1/namespaces/ns/pods/p/eviction"
    assert pod.path(namespace=None) == "/api/v1/pods"
    assert _resources.BUILTIN_TYPES["ClusterPolicy"].path("cluster-policy") == \
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy"
    assert _resources.BUILTIN_TYPES["DaemonSet"].path(namespace="gpu-operator") == \
        "/apis/apps/v1/namespaces/gpu-operator/daemonsets"
    with pytest.raises(K8sError, match="namespace is required"):
        pod.path("p")


def test_resource_type_unknown_kind_and_wrong_version():
    with pytest.raises(K8sError, match="unknown resource kind 'Widget'"):
        _resources.resource_type_of("Widget")
    with pytest.raises(K8sError, match="unknown resource kind"):
        _resources.resource_type_of("Node", "v2")
    custom = ResourceType("example.com/v1", "Widget", "widgets", True)
    assert _resources.resource_type_of(custom) is custom


def test_is_subset():
    assert is_subset({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3})
    assert not is_subset({"a": {"b": 1}}, {"a": {"b": 2}})
    assert not is_subset({"a": [1]}, {"a": [1, 2]})
    assert is_subset({"v": [{"name": "v1"}]}, {"v": [{"name": "v1", "served": True}]})
    assert not is_subset({"v": [{"name": "v1"}]}, {"v": {"name": "v1"}})
    assert not is_subset({"a": 1}, None)
    assert is_subset({}, {})


def test_desired_differs_exact_and_subset():
    live = {"metadata": {"labels": {"a": "1", "extra": "x"}}, "data": {"k": "v", "old": "o"}}
    assert desired_differs({"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}}, live)
    assert not desired_differs({"metadata": {"labels": {"a": "1"}}, "data": {"k": "v"}}, live, "subset")
    assert not desired_differs({"data": {"k": "v", "old": "o"}}, live)
    assert desired_differs({"metadata": {"labels": {"a": "2"}}}, live)
    with pytest.raises(ValueError):
        desired_differs({}, {}, "fuzzy")


def test_merge_desired_keeps_resource_version_and_extra_labels():
    live = {"apiVersion": "v1", "kind": "ConfigMap", "status": {"x": 1},
            "metadata": {"name": "c", "resourceVersion": "5", "labels": {"keep": "1"}},
            "data": {"old": "1"}}
    merged = merge_desired({"metadata": {"name": "c", "labels": {"new": "2"}}, "data": {"k": "v"}}, live)
    assert merged["metadata"]["resourceVersion"] == "5"
    assert merged["metadata"]["labels"] == {"keep": "1", "new": "2"}
    assert merged["data"] == {"k": "v"}
    assert "status" not in merged
    assert live["data"] == {"old": "1"}  # input untouched


def test_status_message_variants():
    assert _k8s.status_message(b'{"message": "nope", "reason": "Conflict"}', "fb")[:2] == ("nope", "Conflict")
    assert _k8s.status_message("plain text", "fb")[0] == "plain text"
    assert _k8s.status_message(None, "fb") == ("fb", None, None)


def test_backoff_grows_and_is_capped():
    assert _k8s.backoff_delay(0, base=1, jitter=0) == 1
    assert _k8s.backoff_delay(3, base=1, jitter=0) == 8
    assert _k8s.backoff_delay(10, base=1, cap=5, jitter=0) == 5


def test_label_selector():
    assert _resources.label_selector({"b": "2", "a": None}) == "a,b=2"


# -- transport / retries --------------------------------------------------------------------------

def test_get_returns_none_on_404_and_counts_requests():
    client, _sleeps = make_client(FakeDynamic([FakeApiException(404, "nodes \"x\" not found", "NotFound")]))
    assert client.get("Node", "x") is None
    assert client.request_count == 1


def test_5xx_retried_with_backoff_then_success():
    dyn = FakeDynamic([FakeApiException(500), FakeApiException(503), NODE])
    client, sleeps = make_client(dyn, backoff_base=0.5)
    assert client.get("Node", "gpu-a")["metadata"]["name"] == "gpu-a"
    assert client.request_count == 3 and client.retry_count == 2
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0]


def test_5xx_bounded_then_error_with_status_message():
    dyn = FakeDynamic([FakeApiException(500, "etcd down")] * 3)
    client, _sleeps = make_client(dyn, retries=2)
    with pytest.raises(K8sError) as err:
        client.get("Node", "gpu-a")
    assert err.value.status == 500 and "etcd down" in str(err.value) and "/api/v1/nodes/gpu-a" in str(err.value)
    assert client.request_count == 3


def test_transport_errors_retried():
    dyn = FakeDynamic([ConnectionResetError("reset"), NODE])
    client, sleeps = make_client(dyn)
    assert client.get("Node", "gpu-a") is not None
    assert len(sleeps) == 1


def test_transport_error_bounded():
    dyn = FakeDynamic([ConnectionRefusedError("refused")] * 2)
    client, _sleeps = make_client(dyn, retries=1)
    with pytest.raises(K8sError, match="cannot reach the API server"):
        client.get("Node", "gpu-a")


def test_429_honours_retry_after():
    dyn = FakeDynamic([FakeApiException(429, headers={"Retry-After": "3"}), NODE])
    client, sleeps = make_client(dyn)
    client.get("Node", "gpu-a")
    assert sleeps == [3.0]


def test_4xx_not_retried():
    dyn = FakeDynamic([FakeApiException(422, "spec.x: Invalid value", "Invalid")])
    client, sleeps = make_client(dyn)
    with pytest.raises(K8sError) as err:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
    assert err.value.status == 422 and err.value.reason == "Invalid" and sleeps == []


# -- CRUD ------------------------------------------------------------------------------------------

def test_list_follows_pages_and_sets_kind():
    pages = [{"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "tok"}},
             {"items": [{"metadata": {"name": "b"}}], "metadata": {}}]
    dyn = FakeDynamic(pages)
    client, _sleeps = make_client(dyn)
    items = client.list("Pod", namespace="ns", label_selector="app=x", field_selector="spec.nodeName=n")
    assert [i["metadata"]["name"] for i in items] == ["a", "b"]
    assert items[0]["kind"] == "Pod" and items[0]["apiVersion"] == "v1"
    assert dyn.calls[0]["query"]["labelSelector"] == "app=x"
    assert dyn.calls[0]["query"]["fieldSelector"] == "spec.nodeName=n"
    assert dyn.calls[1]["query"]["continue"] == "tok"
    assert dyn.calls[0]["path"] == "/api/v1/namespaces/ns/pods"


def test_patch_content_types_and_dry_run():
    dyn = FakeDynamic([NODE, NODE, NODE])
    client, _sleeps = make_client(dyn)
    client.patch("Node", "gpu-a", {"metadata": {}}, patch_type="merge")
    client.patch("Node", "gpu-a", {"metadata": {}}, patch_type="strategic", dry_run=True)
    client.patch("Node", "gpu-a", [{"op": "add", "path": "/x", "value": 1}], patch_type="json")
    assert [c["content_type"] for c in dyn.calls] == [
        "application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json"]
    assert "dryRun" not in dyn.calls[0]["query"] and dyn.calls[1]["query"]["dryRun"] == "All"
    with pytest.raises(K8sError, match="list of operations"):
        client.patch("Node", "gpu-a", {}, patch_type="json")
    with pytest.raises(K8sError, match="patch_type"):
        client.patch("Node", "gpu-a", {}, patch_type="apply")


def test_create_requires_namespace_for_namespaced_kind():
    client, _sleeps = make_client(FakeDynamic([]))
    with pytest.raises(K8sError, match="namespace is required"):
        client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})


def test_delete_absent_is_false_and_dry_run_passes_options():
    dyn = FakeDynamic([FakeApiException(404), {}])
    client, _sleeps = make_client(dyn)
    assert client.delete("ConfigMap", "c", namespace="ns") is False
    assert client.delete("ConfigMap", "c", namespace="ns", dry_run=True) is True
    assert dyn.calls[1]["body"]["dryRun"] == ["All"] and dyn.calls[1]["query"]["dryRun"] == "All"


# -- apply / update / 409 --------------------------------------------------------------------------

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "v"}}


def test_apply_creates_when_absent():
    dyn = FakeDynamic([FakeApiException(404), dict(CM, metadata=dict(CM["metadata"], resourceVersion="1"))])
    client, _sleeps = make_client(dyn)
    result = client.apply(CM)
    assert result.action == "created" and result.changed
    assert dyn.calls[1]["method"] == "POST" and dyn.calls[1]["path"] == "/api/v1/namespaces/ns/configmaps"


def test_apply_unchanged_sends_no_write():
    live = dict(CM, metadata=dict(CM["metadata"], resourceVersion="3"))
    dyn = FakeDynamic([live])
    client, _sleeps = make_client(dyn)
    result = client.apply(CM)
    assert result.action == "unchanged" and not result.changed
    assert [c["method"] for c in dyn.calls] == ["GET"]


def test_apply_update_rereads_on_409():
    live1 = dict(CM, metadata=dict(CM["metadata"], resourceVersion="3"), data={"k": "old"})
    live2 = dict(CM, metadata=dict(CM["metadata"], resourceVersion="4"), data={"k": "older"})
    dyn = FakeDynamic([live1, FakeApiException(409, "the object has been modified", "Conflict"), live2,
                       dict(CM, metadata=dict(CM["metadata"], resourceVersion="5"))])
    client, _sleeps = make_client(dyn)
    result = client.apply(CM)
    assert result.action == "updated"
    puts = [c for c in dyn.calls if c["method"] == "PUT"]
    assert [p["body"]["metadata"]["resourceVersion"] for p in puts] == ["3", "4"]
    assert puts[-1]["body"]["data"] == {"k": "v"}


def test_apply_create_race_409_then_compare():
    live = dict(CM, metadata=dict(CM["metadata"], resourceVersion="9"))
    dyn = FakeDynamic([FakeApiException(404), FakeApiException(409, "already exists", "AlreadyExists"), live])
    client, _sleeps = make_client(dyn)
    assert client.apply(CM).action == "unchanged"


def test_update_conflict_bounded():
    def handler(method, path, body, kwargs):
        if method == "GET":
            return NODE
        return FakeApiException(409, "modified", "Conflict")
    client, _sleeps = make_client(FakeDynamic(handler=handler), conflict_retries=2)
    with pytest.raises(K8sError, match="still conflicting after 3 attempts") as err:
        client.set_node_labels("gpu-a", {"x": "2"})
    assert err.value.status == 409


def test_set_node_labels_idempotent_and_removal():
    dyn = FakeDynamic([NODE])
    client, _sleeps = make_client(dyn)
    changed, _node = client.set_node_labels("gpu-a", {"x": "1", "absent": None})
    assert not changed and [c["method"] for c in dyn.calls] == ["GET"]

    updated = copy.deepcopy(NODE)
    updated["metadata"]["labels"] = {"y": "2"}
    dyn = FakeDynamic([NODE, updated])
    client, _sleeps = make_client(dyn)
    changed, node = client.set_node_labels("gpu-a", {"x": None, "y": 2})
    assert changed and node["metadata"]["labels"] == {"y": "2"}
    assert dyn.calls[1]["body"]["metadata"]["labels"] == {"y": "2"}


def test_update_missing_object_is_404():
    client, _sleeps = make_client(FakeDynamic([FakeApiException(404)]))
    with pytest.raises(K8sError) as err:
        client.set_unschedulable("nope", True)
    assert err.value.status == 404 and "Node nope not found" in str(err.value)


def test_set_unschedulable_cordon_uncordon():
    cordoned = copy.deepcopy(NODE)
    cordoned["spec"]["unschedulable"] = True
    dyn = FakeDynamic([NODE, cordoned, cordoned, NODE])
    client, _sleeps = make_client(dyn)
    assert client.set_unschedulable("gpu-a", True)[0]
    assert dyn.calls[1]["body"]["spec"]["unschedulable"] is True
    assert client.set_unschedulable("gpu-a", False)[0]
    assert "unschedulable" not in dyn.calls[3]["body"]["spec"]


def test_evict_429_not_retried_404_ok():
    dyn = FakeDynamic([FakeApiException(429, "Cannot evict pod as it would violate the pod's disruption budget."),
                       FakeApiException(404), {}])
    client, sleeps = make_client(dyn)
    with pytest.raises(K8sError) as err:
        client.evict("p", "ns")
    assert err.value.status == 429 and sleeps == []
    client.evict("p", "ns")
    client.evict("p", "ns", dry_run=True)
    assert dyn.calls[0]["path"] == "/api/v1/namespaces/ns/pods/p/eviction"
    assert dyn.calls[0]["body"]["apiVersion"] == "policy/v1"
    assert dyn.calls[2]["body"]["deleteOptions"] == {"dryRun": ["All"]}


def test_events_for_sorted():
    dyn = FakeDynamic([{"items": [{"lastTimestamp": "2026-01-02T00:00:00Z", "message": "b"},
                                  {"lastTimestamp": "2026-01-01T00:00:00Z", "message": "a"}], "metadata": {}}])
    client, _sleeps = make_client(dyn)
    assert [e["message"] for e in client.events_for("Node", "gpu-a")] == ["a", "b"]
    assert dyn.calls[0]["query"]["fieldSelector"] == "involvedObject.kind=Node,involvedObject.name=gpu-a"


# -- waits ----------------------------------------------------------------------------------------

class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_wait_for_progress_and_success():
    clock = FakeClock()
    client = K8sClient(FakeDynamic([]), sleep=clock.sleep, clock=clock)
    states = iter([(False, "pending"), (False, "pending"), (True, "success")])
    seen = []
    assert client.wait_for("mig", lambda: next(states), timeout=60, interval=5,
                           progress=lambda what, elapsed, detail: seen.append((what, elapsed, detail))) == "success"
    assert seen == [("mig", 0.0, "pending"), ("mig", 0.25, "pending")]


def test_wait_for_polls_soon_then_every_interval():
    """issue 26 (2): a wait that ends within a second no longer waits a whole interval: the polls
    come 0.25 s, 0.5 s, 1 s ... apart, never more than ``interval``."""
    clock = FakeClock()
    client = K8sClient(FakeDynamic([]), sleep=clock.sleep, clock=clock)
    polls = []

    def probe():
        polls.append(clock.now)
        return len(polls) == 7, None
    client.wait_for("pods", probe, timeout=60, interval=2)
    assert polls == [0.0, 0.25, 0.75, 1.75, 3.75, 5.75, 7.75]


def test_wait_for_short_interval_is_kept():
    clock = FakeClock()
    client = K8sClient(FakeDynamic([]), sleep=clock.sleep, clock=clock)
    polls = []

    def probe():
        polls.append(clock.now)
        return len(polls) == 4, None
    client.wait_for("pods", probe, timeout=60, interval=0.1)
    assert polls == pytest.approx([0.0, 0.1, 0.2, 0.3])


@pytest.mark.parametrize("polls, interval, delay", [
    (1, 2.0, 0.25), (2, 2.0, 0.5), (3, 2.0, 1.0), (4, 2.0, 2.0), (9, 2.0, 2.0), (1, 0.1, 0.1), (3, 5.0, 1.0), (6, 5.0, 5.0)])
def test_poll_delay(polls, interval, delay):
    assert _k8s.poll_delay(polls, interval) == delay


def test_wait_for_timeout_carries_last_detail():
    clock = FakeClock()
    client = K8sClient(FakeDynamic([]), sleep=clock.sleep, clock=clock)
    with pytest.raises(K8sTimeout) as err:
        client.wait_for("ClusterPolicy ready", lambda: (False, {"state": "notReady"}), timeout=10, interval=3)
    assert err.value.detail == {"state": "notReady"}
    assert "timed out after 10s waiting for ClusterPolicy ready" in str(err.value)
    assert clock.now == 10


def test_wait_for_probe_can_abort():
    client = K8sClient(FakeDynamic([]), sleep=lambda s: None)

    def probe():
        raise K8sError("MIG manager reported failed")
    with pytest.raises(K8sError, match="failed"):
        client.wait_for("x", probe, timeout=5)


# -- configuration ----------------------------------------------------------------------------------

def test_build_configuration_host_token_and_tls(tmp_path):
    cfg = _k8s.build_configuration(host="https://127.0.0.1:6443", api_key="s3cret", validate_certs=False,
                                   ca_cert="/ca.pem")
    assert cfg.host == "https://127.0.0.1:6443"
    assert cfg.api_key == {"authorization": "Bearer s3cret"}
    assert cfg.verify_ssl is False and cfg.ssl_ca_cert == "/ca.pem"


def test_build_configuration_missing_kubeconfig(tmp_path):
    with pytest.raises(K8sError, match="does not exist"):
        _k8s.build_configuration(kubeconfig=str(tmp_path / "nope"))


def test_build_configuration_bad_context(tmp_path):
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u}\n"
        "current-context: ctx\n")
    cfg = _k8s.build_configuration(kubeconfig=str(kubeconfig))
    assert cfg.host == "http://127.0.0.1:1"
    # issue 21 (11): the missing context is named, with the ones the file has
    with pytest.raises(K8sError, match=r"context 'other' is not in kubeconfig .*kc \(it has: ctx\)"):
        _k8s.build_configuration(kubeconfig=str(kubeconfig), context="other")


def test_auth_argspec_marks_secret_no_log():
    assert _k8s.K8S_AUTH_ARGSPEC["api_key"]["no_log"] is True


class FailingModule:
    def __init__(self, params=None):
        self.params = params or {}

    def fail_json(self, **kwargs):
        raise SystemExit(kwargs)


def test_missing_kubernetes_library_is_a_clean_failure(monkeypatch):
    monkeypatch.setattr(_k8s, "HAS_KUBERNETES", False)
    monkeypatch.setattr(_k8s, "KUBERNETES_IMPORT_ERROR", "Traceback: No module named 'kubernetes'")
    with pytest.raises(SystemExit) as exited:
        _k8s.client_from_module(FailingModule())
    failure = exited.value.args[0]
    assert "kubernetes" in failure["msg"] and "required" in failure["msg"]
    assert failure["exception"] == "Traceback: No module named 'kubernetes'"


def test_bad_kubeconfig_is_a_clean_failure(tmp_path):
    broken = tmp_path / "kubeconfig"
    broken.write_text("this: [is not a kubeconfig")
    with pytest.raises(SystemExit) as exited:
        _k8s.client_from_module(FailingModule({"kubeconfig": str(broken)}))
    assert exited.value.args[0]["msg"].startswith("cannot load Kubernetes client configuration from %s" % broken)


class TextResponse:
    def __init__(self, text):
        self.data = text.encode()


def test_pod_log_is_text_and_retried():
    calls = []

    class Dyn:
        def request(self, method, path, body=None, **kwargs):
            calls.append((path, dict(kwargs.get("query_params") or [])))
            if len(calls) == 1:
                raise FakeApiException(503)
            return TextResponse("GPU 0: NVIDIA A100 (UUID: GPU-1)\n{not json")
    client = K8sClient(Dyn(), sleep=lambda s: None)
    assert client.pod_log("p", "ns", container="c", tail_lines=5) == "GPU 0: NVIDIA A100 (UUID: GPU-1)\n{not json"
    assert calls[-1] == ("/api/v1/namespaces/ns/pods/p/log", {"container": "c", "tailLines": 5})
    assert client.request_count == 2


# -- client-level dry run --------------------------------------------------------------------------

def _echo_handler(method, path, body, kwargs):
    """A server that answers every GET with 404 and every write with the body it got."""
    if method == "GET":
        return FakeApiException(404)
    return body if isinstance(body, dict) else {}


def test_client_dry_run_applies_to_every_write_without_its_own_setting():
    dyn = FakeDynamic(handler=_echo_handler)
    client, _sleeps = make_client(dyn, dry_run=True)
    assert client.dry_run is True
    client.create(CM)
    client.replace(CM)
    client.patch("Node", "gpu-a", {"metadata": {}})
    client.delete("ConfigMap", "c", namespace="ns")
    client.evict("p", "ns")
    assert [c["query"].get("dryRun") for c in dyn.calls] == ["All"] * 5
    assert dyn.calls[3]["body"]["dryRun"] == ["All"] and dyn.calls[4]["body"]["deleteOptions"] == {"dryRun": ["All"]}


def test_per_call_dry_run_overrides_the_client_setting():
    dyn = FakeDynamic(handler=_echo_handler)
    client, _sleeps = make_client(dyn, dry_run=True)
    client.create(CM, dry_run=False)
    client.patch("Node", "gpu-a", {"metadata": {}}, dry_run=False)
    assert [c["query"].get("dryRun") for c in dyn.calls] == [None, None]
    dyn = FakeDynamic(handler=_echo_handler)
    client, _sleeps = make_client(dyn)
    assert client.dry_run is False
    client.create(CM)
    client.create(CM, dry_run=True)
    assert [c["query"].get("dryRun") for c in dyn.calls] == [None, "All"]


def test_client_dry_run_reaches_apply_update_and_node_helpers():
    dyn = FakeDynamic([FakeApiException(404), CM, NODE, NODE])
    client, _sleeps = make_client(dyn, dry_run=True)
    client.apply(CM)
    client.set_node_labels("gpu-a", {"x": "2"})
    assert [(c["method"], c["query"].get("dryRun")) for c in dyn.calls] == [
        ("GET", None), ("POST", "All"), ("GET", None), ("PUT", "All")]


def test_creates_into_a_dry_run_namespace_are_answered_by_the_client():
    dyn = FakeDynamic(handler=_echo_handler)
    client, _sleeps = make_client(dyn, dry_run=True)
    assert client.ensure_namespace("ns", {"a": "b"}).action == "created"
    assert client.dry_run_namespaces == {"ns"}
    result = client.apply(dict(CM, metadata={"name": "c", "namespace": "ns"}))
    assert result.action == "created" and result.after["metadata"]["namespace"] == "ns"
    assert result.after["data"] == {"k": "v"}
    # the namespace's GET and dry-run POST, then only the ConfigMap's GET: its create is answered locally
    assert [(c["method"], c["path"]) for c in dyn.calls] == [
        ("GET", "/api/v1/namespaces/ns"), ("POST", "/api/v1/namespaces"),
        ("GET", "/api/v1/namespaces/ns/configmaps/c")]
    assert client.request_count == 3
    # other namespaces and real writes still go to the server
    client.create(dict(CM, metadata={"name": "c", "namespace": "other"}))
    client.create(dict(CM, metadata={"name": "d", "namespace": "ns"}), dry_run=False)
    assert [c["path"] for c in dyn.calls[3:]] == [
        "/api/v1/namespaces/other/configmaps", "/api/v1/namespaces/ns/configmaps"]


def test_real_namespace_create_is_not_remembered():
    dyn = FakeDynamic(handler=_echo_handler)
    client, _sleeps = make_client(dyn)
    client.ensure_namespace("ns")
    assert client.dry_run_namespaces == set()


def test_client_from_module_passes_dry_run(monkeypatch):
    seen = {}

    def connect(params, dry_run=False, **options):
        seen.update(params=params, dry_run=dry_run, options=options)
        return "client"
    monkeypatch.setattr(_k8s, "HAS_KUBERNETES", True)
    monkeypatch.setattr(_k8s.K8sClient, "connect", staticmethod(connect))
    assert _k8s.client_from_module(FailingModule({"host": "https://h"}), dry_run=True) == "client"
    assert seen["dry_run"] is True and seen["params"]["host"] == "https://h"
    _k8s.client_from_module(FailingModule())
    assert seen["dry_run"] is False


def test_connect_sets_dry_run(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u}\n"
        "current-context: ctx\n")
    assert K8sClient.connect({"kubeconfig": str(kubeconfig)}, dry_run=True).dry_run is True
    assert K8sClient.connect({"kubeconfig": str(kubeconfig)}).dry_run is False


def test_unlisted_keeps_the_planned_objects_missing_from_the_list_by_namespace_and_name():
    listed = {"LocalQueue": {("team-a", "q"): {}}, "ClusterQueue": {("", "q"): {}}}
    bodies = [{"kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team-a"}},
              {"kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team-b"}},
              {"kind": "ClusterQueue", "metadata": {"name": "q"}},
              {"kind": "ClusterQueue", "metadata": {"name": "other", "namespace": None}}]
    assert unlisted(bodies, listed) == [bodies[1], bodies[3]]
    assert object_key(bodies[3]) == ("", "other")
