"""Contract tests of the lab's virtual Kubernetes API server, through the real `kubernetes`
Python client (CoreV1Api, AppsV1Api, PolicyV1Api, CustomObjectsApi, DynamicClient)."""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest
from kubernetes import client, config, dynamic, watch

from gpulab.cluster import faults, server
from gpulab.cluster.errors import ApiError
from gpulab.cluster.store import Store

HOSTS = [
    {"name": "gpu-a", "state_file": "/nonexistent/gpu-a.json", "labels": {"pool": "a100"}},
    {"name": "gpu-b", "state_file": "/nonexistent/gpu-b.json", "labels": {"pool": "h100"}},
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("cluster"))
    registry = faults.FaultRegistry()
    started = time.monotonic()
    running = server.serve_in_thread(lab_dir, HOSTS, fault_registry=registry)
    running.startup_seconds = time.monotonic() - started
    yield running
    running.stop()


@pytest.fixture(scope="module")
def api_client(lab):
    return config.new_client_from_config(config_file=lab.kubeconfig)


@pytest.fixture(scope="module")
def core(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def apps(api_client):
    return client.AppsV1Api(api_client)


@pytest.fixture(scope="module")
def policy(api_client):
    return client.PolicyV1Api(api_client)


@pytest.fixture(scope="module")
def custom(api_client):
    return client.CustomObjectsApi(api_client)


@pytest.fixture(scope="module")
def dyn(api_client):
    return dynamic.DynamicClient(api_client)


@pytest.fixture
def ns(core, request):
    name = "t-" + request.node.name.lower().replace("_", "-")[:50]
    core.create_namespace({"metadata": {"name": name}})
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException:
        pass


def _status(exc: client.ApiException) -> dict:
    return json.loads(exc.body)


def _raw(lab, method, path, body=None, content_type="application/json", token=True, accept=None):
    headers = {"Content-Type": content_type}
    if accept:
        headers["Accept"] = accept
    if token:
        headers["Authorization"] = "Bearer " + lab.token
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(lab.url + path, data=data, method=method, headers=headers)
    context = ssl.create_default_context(cafile=lab.ca_file)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _pod(name, labels=None, node=None, gpus=None, image="registry.example/app:1.0"):
    container = {"name": "main", "image": image, "env": [{"name": "A", "value": "1"}]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    spec = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def _set_running(lab, namespace, name, ready=True):
    def mutate(pod):
        pod["status"]["phase"] = "Running"
        pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    lab.store.controller_update("v1/pods", namespace, name, mutate, subresource="status")


# ------------------------------------------------------------------ discovery / nodes

def test_starts_fast_and_kubeconfig_is_private(lab):
    assert lab.startup_seconds < 10
    assert os.stat(lab.kubeconfig).st_mode & 0o077 == 0
    config.load_kube_config(config_file=lab.kubeconfig)  # the client accepts the file


def test_discovery_serves_every_group(lab, dyn):
    status, body = _raw(lab, "GET", "/version")
    assert status == 200 and json.loads(body)["major"] == "1"
    groups = {g["name"] for g in json.loads(_raw(lab, "GET", "/apis")[1])["groups"]}
    assert {"apps", "policy", "nvidia.com", "apiextensions.k8s.io"} <= groups
    core_names = {r["name"] for r in json.loads(_raw(lab, "GET", "/api/v1")[1])["resources"]}
    assert {"pods", "pods/log", "pods/eviction", "pods/status", "nodes/status", "events",
            "configmaps", "secrets", "namespaces"} <= core_names
    for api_version, kind in (("v1", "Pod"), ("apps/v1", "DaemonSet"),
                              ("policy/v1", "PodDisruptionBudget"),
                              ("nvidia.com/v1", "ClusterPolicy"),
                              ("apiextensions.k8s.io/v1", "CustomResourceDefinition")):
        assert dyn.resources.get(api_version=api_version, kind=kind).kind == kind


def test_unknown_token_is_401(lab):
    status, body = _raw(lab, "GET", "/api/v1/nodes", token=False)
    assert status == 401 and json.loads(body)["reason"] == "Unauthorized"


def test_hosts_become_nodes(core):
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert set(nodes) == {"gpu-a", "gpu-b"}
    node = nodes["gpu-a"]
    assert node.metadata.labels["pool"] == "a100"
    assert node.metadata.labels["kubernetes.io/hostname"] == "gpu-a"
    assert node.metadata.annotations[server.NODE_STATE_ANNOTATION] == "/nonexistent/gpu-a.json"
    assert [c.status for c in node.status.conditions if c.type == "Ready"] == ["True"]


# -------------------------------------------------------------------------- CRUD

def test_crud_semantics_and_status_bodies(core, ns):
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"},
                                                     "data": {"a": "1"}})
    meta = created.metadata
    assert meta.uid and meta.resource_version and meta.creation_timestamp
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}})
    body = _status(info.value)
    assert info.value.status == 409 and body["reason"] == "AlreadyExists"
    assert body["kind"] == "Status" and body["details"] == {"name": "cfg", "kind": "configmaps"}

    current = core.read_namespaced_config_map("cfg", ns)
    current.data["a"] = "2"
    updated = core.replace_namespaced_config_map("cfg", ns, current)
    assert int(updated.metadata.resource_version) > int(meta.resource_version)
    current.data["a"] = "3"  # still carries the old resourceVersion
    with pytest.raises(client.ApiException) as info:
        core.replace_namespaced_config_map("cfg", ns, current)
    assert info.value.status == 409 and _status(info.value)["reason"] == "Conflict"
    assert "the object has been modified" in _status(info.value)["message"]

    core.delete_namespaced_config_map("cfg", ns)
    with pytest.raises(client.ApiException) as info:
        core.read_namespaced_config_map("cfg", ns)
    assert info.value.status == 404
    assert _status(info.value)["message"] == 'configmaps "cfg" not found'


def test_invalid_objects_are_422_with_causes(core, ns):
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(ns, {"metadata": {"name": "Bad_Name"},
                                        "spec": {"containers": [{"name": "c"}]}})
    body = _status(info.value)
    assert info.value.status == 422 and body["reason"] == "Invalid"
    fields = {c["field"] for c in body["details"]["causes"]}
    assert {"metadata.name", "spec.containers[0].image"} <= fields
    # extended resources cannot be overcommitted: requests without limits are invalid
    pod = _pod("gpu-req")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(ns, pod)
    assert info.value.status == 422


def test_missing_namespace_is_404(core):
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_config_map("does-not-exist", {"metadata": {"name": "x"}})
    assert info.value.status == 404
    assert _status(info.value)["details"] == {"name": "does-not-exist", "kind": "namespaces"}


def test_generation_moves_on_spec_changes_only(apps, ns, lab):
    ds = {"metadata": {"name": "plugin", "labels": {"app": "plugin"}},
          "spec": {"selector": {"matchLabels": {"app": "plugin"}},
                   "template": {"metadata": {"labels": {"app": "plugin"}},
                                "spec": {"containers": [{"name": "p", "image": "plugin:1"}]}}}}
    created = apps.create_namespaced_daemon_set(ns, ds)
    assert created.metadata.generation == 1
    labelled = apps.patch_namespaced_daemon_set("plugin", ns, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    lab.store.controller_update("apps/v1/daemonsets", ns, "plugin",
                                lambda o: o["status"].update(numberReady=2),
                                subresource="status")
    assert apps.read_namespaced_daemon_set("plugin", ns).metadata.generation == 1
    changed = apps.patch_namespaced_daemon_set(
        "plugin", ns, {"spec": {"template": {"spec": {"containers": [
            {"name": "p", "image": "plugin:2"}]}}}})
    assert changed.metadata.generation == 2
    # status sent to the main resource is ignored (status subresource)
    changed.status.number_ready = 99
    replaced = apps.replace_namespaced_daemon_set("plugin", ns, changed)
    assert replaced.status.number_ready == 2
    # selector is immutable
    with pytest.raises(client.ApiException) as info:
        apps.patch_namespaced_daemon_set("plugin", ns, {"spec": {"selector": {
            "matchLabels": {"app": "other"}}, "template": {"metadata": {"labels": {
                "app": "other"}}}}})
    assert info.value.status == 422


def test_noop_update_keeps_resource_version(core, ns):
    created = core.create_namespaced_config_map(ns, {"metadata": {"name": "same"},
                                                     "data": {"k": "v"}})
    again = core.patch_namespaced_config_map("same", ns, {"data": {"k": "v"}})
    assert again.metadata.resource_version == created.metadata.resource_version


def test_secret_string_data_is_encoded(core, ns):
    secret = core.create_namespaced_secret(ns, {"metadata": {"name": "s"},
                                                "stringData": {"token": "abc"}})
    assert secret.data == {"token": "YWJj"} and secret.type == "Opaque"


# ------------------------------------------------------------------ list / selectors

def test_list_kind_metadata_and_selectors(core, ns, lab):
    for name, labels, node in (("a1", {"app": "a", "tier": "gpu"}, "gpu-a"),
                               ("a2", {"app": "a"}, "gpu-b"),
                               ("b1", {"app": "b", "tier": "cpu"}, None)):
        core.create_namespaced_pod(ns, _pod(name, labels, node))
    _set_running(lab, ns, "a1")
    status, body = _raw(lab, "GET", "/api/v1/namespaces/%s/pods" % ns)
    listing = json.loads(body)
    assert listing["kind"] == "PodList" and listing["apiVersion"] == "v1"
    assert int(listing["metadata"]["resourceVersion"]) >= 1

    def names(**kwargs):
        return sorted(p.metadata.name for p in core.list_namespaced_pod(ns, **kwargs).items)

    assert names(label_selector="app=a") == ["a1", "a2"]
    assert names(label_selector="app==a,tier") == ["a1"]
    assert names(label_selector="app!=a") == ["b1"]
    assert names(label_selector="tier in (gpu,cpu)") == ["a1", "b1"]
    assert names(label_selector="tier notin (gpu)") == ["a2", "b1"]
    assert names(label_selector="!tier") == ["a2"]
    assert names(field_selector="spec.nodeName=gpu-a") == ["a1"]
    assert names(field_selector="status.phase=Running") == ["a1"]
    assert names(field_selector="status.phase!=Running,metadata.name!=a2") == ["b1"]
    assert names(field_selector="metadata.name=b1") == ["b1"]
    everywhere = core.list_pod_for_all_namespaces(field_selector="metadata.namespace=%s" % ns)
    assert len(everywhere.items) == 3
    with pytest.raises(client.ApiException) as info:
        core.list_namespaced_pod(ns, field_selector="spec.containers=x")
    assert info.value.status == 400
    with pytest.raises(client.ApiException) as info:
        core.list_namespaced_pod(ns, label_selector="app in (a")
    assert info.value.status == 400
    first = core.list_namespaced_pod(ns, limit=2)
    assert len(first.items) == 2 and first.metadata._continue
    rest = core.list_namespaced_pod(ns, limit=2, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["b1"]


# ------------------------------------------------------------------------- patches

def test_strategic_merge_patch_merges_named_lists(core, apps, ns):
    template = {"metadata": {"labels": {"app": "s"}}, "spec": {
        "containers": [{"name": "main", "image": "app:1",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                       {"name": "side", "image": "side:1"}],
        "volumes": [{"name": "cfg", "configMap": {"name": "c"}}]}}
    apps.create_namespaced_daemon_set(ns, {"metadata": {"name": "s"}, "spec": {
        "selector": {"matchLabels": {"app": "s"}}, "template": template}})
    patched = apps.patch_namespaced_daemon_set("s", ns, {"spec": {"template": {"spec": {
        "containers": [{"name": "main", "image": "app:2",
                        "env": [{"name": "A", "value": "9"}, {"name": "B", "$patch": "delete"},
                                {"name": "C", "value": "3"}]}],
        "volumes": [{"name": "extra", "emptyDir": {}}]}}}})
    spec = patched.spec.template.spec
    containers = {c.name: c for c in spec.containers}
    assert set(containers) == {"main", "side"}
    assert containers["main"].image == "app:2"
    assert [(e.name, e.value) for e in containers["main"].env] == [("A", "9"), ("C", "3")]
    assert [v.name for v in spec.volumes] == ["cfg", "extra"]
    # a pod's spec is immutable except images (and a few fields), like the real API
    core.create_namespaced_pod(ns, _pod("p"))
    assert core.patch_namespaced_pod("p", ns, {"spec": {"containers": [
        {"name": "main", "image": "app:3"}]}}).spec.containers[0].image == "app:3"
    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_pod("p", ns, {"spec": {"restartPolicy": "Never"}})
    assert info.value.status == 422 and "Forbidden" in _status(info.value)["message"]


def test_merge_and_json_patch(core, ns, lab):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "m", "labels": {"a": "1"}},
                                           "data": {"x": "1", "y": "2"}})
    merged = core.patch_namespaced_config_map(
        "m", ns, {"data": {"x": None, "z": "3"}, "metadata": {"labels": {"b": "2"}}},
        _content_type="application/merge-patch+json")
    assert merged.data == {"y": "2", "z": "3"}
    assert merged.metadata.labels == {"a": "1", "b": "2"}
    patched = core.patch_namespaced_config_map(
        "m", ns, [{"op": "add", "path": "/data/w", "value": "4"},
                  {"op": "remove", "path": "/data/y"},
                  {"op": "test", "path": "/data/z", "value": "3"}],
        _content_type="application/json-patch+json")
    assert patched.data == {"z": "3", "w": "4"}
    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_config_map(
            "m", ns, [{"op": "test", "path": "/data/z", "value": "nope"}],
            _content_type="application/json-patch+json")
    assert info.value.status == 422
    # a patch carrying a stale resourceVersion is a conflict
    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_config_map("m", ns, {"metadata": {"resourceVersion": "1"}})
    assert info.value.status == 409


def test_server_side_apply_prunes_what_the_manager_dropped(lab, ns):
    path = "/api/v1/namespaces/%s/configmaps/applied?fieldManager=tool" % ns
    first = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"},
             "data": {"a": "1", "b": "2"}}
    status, _body = _raw(lab, "PATCH", path, first, "application/apply-patch+yaml")
    assert status == 201
    lab.store.patch("v1/configmaps", ns, "applied", {"data": {"other": "x"}}, "merge",
                    field_manager="someone-else")
    second = dict(first, data={"a": "3"})
    status, body = _raw(lab, "PATCH", path, second, "application/apply-patch+yaml")
    assert status == 200 and json.loads(body)["data"] == {"a": "3", "other": "x"}
    lab.store.patch("v1/configmaps", ns, "applied", {"data": {"a": "4"}}, "merge",
                    field_manager="someone-else")
    status, body = _raw(lab, "PATCH", path, second, "application/apply-patch+yaml")
    assert status == 409 and json.loads(body)["reason"] == "Conflict"
    status, body = _raw(lab, "PATCH", path + "&force=true", second, "application/apply-patch+yaml")
    assert status == 200 and json.loads(body)["data"]["a"] == "3"


def test_custom_resources_reject_strategic_merge(lab):
    lab.store.create("nvidia.com/v1/clusterpolicies", {"metadata": {"name": "smp-test"},
                                                       "spec": {}})
    status, body = _raw(lab, "PATCH", "/apis/nvidia.com/v1/clusterpolicies/smp-test",
                        {"spec": {"x": 1}}, "application/strategic-merge-patch+json")
    assert status == 415
    lab.store.delete("nvidia.com/v1/clusterpolicies", None, "smp-test")


# -------------------------------------------------------------------------- dryRun

def test_dry_run_changes_nothing(core, ns, lab):
    before = lab.store.resource_version()
    dry = core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
    assert dry.metadata.name == "dry" and dry.metadata.uid
    assert lab.store.resource_version() == before
    with pytest.raises(client.ApiException):
        core.read_namespaced_config_map("dry", ns)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "real"}, "data": {"a": "1"}})
    before = lab.store.resource_version()
    patched = core.patch_namespaced_config_map("real", ns, {"data": {"a": "2"}}, dry_run="All")
    assert patched.data == {"a": "2"}
    core.delete_namespaced_config_map("real", ns, dry_run="All")
    assert core.read_namespaced_config_map("real", ns).data == {"a": "1"}
    assert lab.store.resource_version() == before
    with pytest.raises(client.ApiException) as info:  # still validated
        core.create_namespaced_config_map(ns, {"metadata": {"name": "BAD"}}, dry_run="All")
    assert info.value.status == 422


# --------------------------------------------------------------------------- watch

def test_watch_streams_changes_with_selectors_and_resume(core, ns, lab):
    start_rv = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, _pod("w1", {"app": "w"}))
    core.create_namespaced_pod(ns, _pod("other", {"app": "x"}))
    core.patch_namespaced_pod("w1", ns, {"metadata": {"labels": {"app": "gone"}}})
    seen = []
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_pod, ns, label_selector="app=w",
                               resource_version=start_rv, timeout_seconds=1):
        seen.append((event["type"], event["object"].metadata.name))
    # resumed from start_rv; leaving the selector is a DELETED event, like the real server
    assert seen == [("ADDED", "w1"), ("DELETED", "w1")]

    events = []

    def follow():
        for event in watch.Watch().stream(core.list_node, timeout_seconds=2):
            events.append((event["type"], event["object"].metadata.name))
    thread = threading.Thread(target=follow)
    started = time.monotonic()
    thread.start()
    time.sleep(0.3)
    core.patch_node("gpu-b", {"metadata": {"labels": {"watched": "yes"}}})
    thread.join(5)
    assert ("ADDED", "gpu-a") in events and ("MODIFIED", "gpu-b") in events
    assert time.monotonic() - started < 4  # timeoutSeconds ends the stream


def test_watch_too_old_resource_version_is_410():
    class SmallStore(Store):
        HISTORY = 3
    store = SmallStore()
    for index in range(6):
        store.create("v1/configmaps", {"metadata": {"name": "c%d" % index}})
    with pytest.raises(ApiError) as info:
        store.watch("v1/configmaps", None, "2", lambda event: None)
    assert info.value.code == 410 and info.value.reason == "Expired"
    replay, unsubscribe, snapshot = store.watch("v1/configmaps", "default", None, print)
    assert [e.object["metadata"]["name"] for e in replay] == ["c%d" % i for i in range(6)]
    assert snapshot == store.resource_version()
    unsubscribe()


def test_watch_list_ends_initial_events_with_a_bookmark(lab, ns, core):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    status, body = _raw(lab, "GET", "/api/v1/namespaces/%s/configmaps?watch=true"
                        "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                        "&allowWatchBookmarks=true&timeoutSeconds=1" % ns)
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert status == 200 and [e["type"] for e in lines] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


# ---------------------------------------------------------- deletion / eviction / logs

def test_graceful_pod_deletion(core, ns, lab):
    core.create_namespaced_pod(ns, _pod("bound", node="gpu-a"))
    _set_running(lab, ns, "bound")
    core.delete_namespaced_pod("bound", ns)
    pod = core.read_namespaced_pod("bound", ns)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    # the kubelet's final delete
    lab.store.delete("v1/pods", ns, "bound", grace_period_seconds=0)
    with pytest.raises(client.ApiException):
        core.read_namespaced_pod("bound", ns)
    core.create_namespaced_pod(ns, _pod("unbound"))
    core.delete_namespaced_pod("unbound", ns)  # never scheduled: removed at once
    with pytest.raises(client.ApiException):
        core.read_namespaced_pod("unbound", ns)


def test_eviction_honours_pdb(core, policy, ns, lab):
    for name in ("e1", "e2"):
        core.create_namespaced_pod(ns, _pod(name, {"app": "e"}, node="gpu-a"))
        _set_running(lab, ns, name)
    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "e-pdb"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "e"}}}})
    status = policy.read_namespaced_pod_disruption_budget("e-pdb", ns).status
    assert (status.current_healthy, status.desired_healthy, status.disruptions_allowed,
            status.expected_pods) == (2, 2, 0, 2)
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="e1", namespace=ns))
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod_eviction("e1", ns, eviction)
    body = _status(info.value)
    assert info.value.status == 429 and body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert info.value.headers.get("Retry-After")
    policy.patch_namespaced_pod_disruption_budget("e-pdb", ns, {"spec": {"minAvailable": 1}})
    assert policy.read_namespaced_pod_disruption_budget(
        "e-pdb", ns).status.disruptions_allowed == 1
    core.create_namespaced_pod_eviction("e1", ns, eviction)
    assert core.read_namespaced_pod("e1", ns).metadata.deletion_timestamp is not None
    # e1 is terminating, so e2 is now protected
    eviction2 = client.V1Eviction(metadata=client.V1ObjectMeta(name="e2", namespace=ns))
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod_eviction("e2", ns, eviction2)
    assert info.value.status == 429


def test_pod_log(core, ns, lab):
    core.create_namespaced_pod(ns, _pod("logger"))
    with pytest.raises(client.ApiException) as info:
        core.read_namespaced_pod_log("logger", ns)
    assert info.value.status == 400 and "waiting to start" in _status(info.value)["message"]
    lab.store.bind(ns, "logger", "gpu-b")
    _set_running(lab, ns, "logger")
    lab.store.set_pod_log(ns, "logger", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n")
    assert core.read_namespaced_pod_log("logger", ns).startswith("GPU 0: NVIDIA H100")


def test_namespace_deletion_removes_its_objects(core):
    core.create_namespace({"metadata": {"name": "short-lived"}})
    core.create_namespaced_config_map("short-lived", {"metadata": {"name": "c"}})
    core.delete_namespace("short-lived")
    with pytest.raises(client.ApiException):
        core.read_namespace("short-lived")
    assert not core.list_config_map_for_all_namespaces(
        field_selector="metadata.namespace=short-lived").items
    with pytest.raises(client.ApiException) as info:
        core.delete_namespace("default")
    assert info.value.status == 403


# ----------------------------------------------------------------- CRDs / ClusterPolicy

def test_cluster_policy_status_subresource(custom, lab):
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"}, "spec": {"mig": {"strategy": "single"}},
        "status": {"state": "ready"}})
    obj = custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies",
                                           "cluster-policy")
    assert "status" not in obj  # status is not set through the main resource
    custom.patch_cluster_custom_object_status("nvidia.com", "v1", "clusterpolicies",
                                              "cluster-policy", {"status": {"state": "notReady"}})
    obj = custom.patch_cluster_custom_object("nvidia.com", "v1", "clusterpolicies",
                                             "cluster-policy", {"spec": {"mig": {
                                                 "strategy": "mixed"}}})
    assert obj["status"] == {"state": "notReady"} and obj["metadata"]["generation"] == 2
    custom.delete_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")


def test_crd_serves_new_resources(lab, custom, dyn):
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1",
                             kind="CustomResourceDefinition")
    crds.create(body={
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.lab.example"},
        "spec": {"group": "lab.example", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "additionalPrinterColumns": [
                                   {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "size": {"type": "integer", "maximum": 8}}}}}}}]}})
    crd = crds.get(name="widgets.lab.example")
    assert {c["type"]: c["status"] for c in crd.status.conditions}["Established"] == "True"
    created = custom.create_namespaced_custom_object("lab.example", "v1", "default", "widgets", {
        "apiVersion": "lab.example/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 2, "typo": True}})
    assert created["spec"] == {"size": 2}  # unknown fields are pruned, like the API server
    assert len(custom.list_namespaced_custom_object("lab.example", "v1", "default",
                                                    "widgets")["items"]) == 1
    with pytest.raises(client.ApiException) as info:
        custom.patch_namespaced_custom_object("lab.example", "v1", "default", "widgets", "w",
                                              {"spec": {"size": 9}})
    body = _status(info.value)
    assert info.value.status == 422 and body["details"]["causes"][0]["field"] == "spec.size"
    status, table = _raw(lab, "GET", "/apis/lab.example/v1/namespaces/default/widgets",
                         accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    table = json.loads(table)
    assert status == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Age"]
    assert table["rows"][0]["cells"][:2] == ["w", 2]
    crds.delete(name="widgets.lab.example")
    status, _body = _raw(lab, "GET", "/apis/lab.example/v1/namespaces/default/widgets")
    assert status == 404


# ----------------------------------------------------------------- faults / metrics

def test_fault_injection_errors_conflicts_and_hangs(lab, core, ns):
    registry = lab.faults
    registry.add("error", verb="list", resource="configmaps", count=2, status=503)
    for _attempt in range(2):
        with pytest.raises(client.ApiException) as info:
            core.list_namespaced_config_map(ns)
        assert info.value.status == 503
    core.list_namespaced_config_map(ns)  # used up
    registry.add("conflict", verb="patch", resource="v1/nodes", name="gpu-a")
    with pytest.raises(client.ApiException) as info:
        core.patch_node("gpu-a", {"metadata": {"labels": {"f": "1"}}})
    assert info.value.status == 409 and _status(info.value)["reason"] == "Conflict"
    registry.add("hang", verb="get", resource="nodes", seconds=2)
    started = time.monotonic()
    request = urllib.request.Request(lab.url + "/api/v1/nodes/gpu-b",
                                     headers={"Authorization": "Bearer " + lab.token})
    with pytest.raises((TimeoutError, urllib.error.URLError)):  # the client times out
        urllib.request.urlopen(request, timeout=0.5,
                               context=ssl.create_default_context(cafile=lab.ca_file))
    assert time.monotonic() - started < 2
    assert core.read_node("gpu-b").metadata.name == "gpu-b"  # one request only
    registry.add("named", condition="clusterpolicy-never-ready", count=None,
                 params={"reason": "test"})
    assert registry.active("clusterpolicy-never-ready").params == {"reason": "test"}
    registry.clear(condition="clusterpolicy-never-ready")
    assert registry.active("clusterpolicy-never-ready") is None
    time.sleep(1.6)  # let the hung request finish before the next test


def test_in_process_server_answers_remote_helpers(lab, core):
    fault = faults.add_remote(lab.dir, "error", verb="get", resource="v1/nodes", name="gpu-b")
    assert [f["id"] for f in faults.list_remote(lab.dir)] == [fault["id"]]
    with pytest.raises(client.ApiException):
        core.read_node("gpu-b")
    assert server.metrics(lab.dir)["requests"]["get v1/nodes"] >= 1
    assert not server.stop(lab.dir)  # never signals the test process itself


def test_fault_endpoint_and_metrics(lab, core):
    status, body = _raw(lab, "POST", "/lab/faults", {"kind": "error", "verb": "get",
                                                     "resource": "namespaces", "status": 500})
    assert status == 201 and json.loads(body)["id"]
    with pytest.raises(client.ApiException) as info:
        core.read_namespace("default")
    assert info.value.status == 500 and _status(info.value)["reason"] == "InternalError"
    status, body = _raw(lab, "POST", "/lab/faults", {"kind": "bogus"})
    assert status == 400
    _raw(lab, "POST", "/lab/metrics/reset")
    core.list_node()
    core.list_node()
    core.read_node("gpu-a")
    metrics = json.loads(_raw(lab, "GET", "/lab/metrics")[1])
    assert metrics["requests"]["list v1/nodes"] == 2
    assert metrics["requests"]["get v1/nodes"] == 1
    assert metrics["total"] == 3


# ------------------------------------------------------------------------ subprocess

def test_standalone_server_subprocess(tmp_path):
    started = time.monotonic()
    pid, url = server.start(str(tmp_path), [{"name": "solo", "state_file": "/x.json"}],
                            controllers=False)
    try:
        assert time.monotonic() - started < 10 and url.startswith("https://127.0.0.1:")
        api_client = config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        assert [n.metadata.name for n in client.CoreV1Api(api_client).list_node().items] == \
            ["solo"]
        added = faults.add_remote(str(tmp_path), "named", condition="mig-manager-fails",
                                  count=None)
        assert faults.list_remote(str(tmp_path))[0]["id"] == added["id"]
        assert faults.clear_remote(str(tmp_path)) == 1
        assert faults.main(["--dir", str(tmp_path), "add", "error", "--verb", "list",
                            "--resource", "nodes", "--status", "503"]) == 0
        assert server.metrics(str(tmp_path), reset=True)["total"] == 0
        with pytest.raises(client.ApiException) as info:
            client.CoreV1Api(api_client).list_node()
        assert info.value.status == 503
        assert server.metrics(str(tmp_path))["requests"] == {"list v1/nodes": 1}
    finally:
        assert server.stop(str(tmp_path))
    assert not os.path.exists("/proc/%d/cmdline" % pid) or \
        b"gpulab.cluster.server" not in open("/proc/%d/cmdline" % pid, "rb").read()
    assert "lab API server on" in (tmp_path / "cluster.log").read_text()
