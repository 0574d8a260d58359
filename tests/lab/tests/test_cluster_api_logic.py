"""Pure pieces of the virtual cluster: selectors, patches, protobuf envelope, fault registry, store."""

from __future__ import annotations

import base64
import copy

import pytest

from gpulab.cluster import faults, patch, protobuf, selectors
from gpulab.cluster.errors import ApiError
from gpulab.cluster.objects import clone
from gpulab.cluster.store import Store
from gpulab.cluster import schema


# ----------------------------------------------------------------------- selectors

@pytest.mark.parametrize("text,labels,expected", [
    ("a=1", {"a": "1"}, True),
    ("a==1", {"a": "2"}, False),
    ("a!=1", {}, True),  # absent key matches !=
    ("a!=1", {"a": "1"}, False),
    ("a in (1, 2)", {"a": "2"}, True),
    ("a in (1,2)", {}, False),
    ("a notin (1,2)", {}, True),
    ("a notin (1,2)", {"a": "1"}, False),
    ("a", {"a": ""}, True),
    ("!a", {"a": "x"}, False),
    ("a=1,b in (x),!c", {"a": "1", "b": "x"}, True),
    ("nvidia.com/gpu.present=true", {"nvidia.com/gpu.present": "true"}, True),
    ("", {"x": "y"}, True),
])
def test_label_selector_strings(text, labels, expected):
    assert selectors.matches(selectors.parse_label_selector(text), labels) is expected


@pytest.mark.parametrize("text", ["a in (1", "a=b=c d", "=x", "a in ()", "a b"])
def test_bad_label_selectors(text):
    with pytest.raises(selectors.SelectorError):
        selectors.parse_label_selector(text)


def test_label_selector_objects():
    selector = selectors.from_label_selector({
        "matchLabels": {"app": "x"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                             {"key": "skip", "operator": "DoesNotExist"}]})
    assert selectors.matches(selector, {"app": "x", "tier": "b"})
    assert not selectors.matches(selector, {"app": "x", "tier": "b", "skip": "1"})
    assert not selectors.matches(selectors.from_label_selector(None), {"a": "b"})
    assert selectors.matches(selectors.from_label_selector({}), {"a": "b"})
    assert selectors.label_selector_errors(
        {"matchExpressions": [{"key": "a", "operator": "In"}]}, "spec.selector")


def test_field_selectors():
    parsed = selectors.parse_field_selector("spec.nodeName=n1,status.phase!=Failed",
                                            ["spec.nodeName", "status.phase"])
    assert selectors.field_matches(parsed, {"spec": {"nodeName": "n1"},
                                            "status": {"phase": "Running"}})
    assert not selectors.field_matches(parsed, {"spec": {"nodeName": "n2"}})
    assert selectors.field_matches(selectors.parse_field_selector("spec.nodeName=", [
        "spec.nodeName"]), {"spec": {}})  # unbound pods
    with pytest.raises(selectors.SelectorError):
        selectors.parse_field_selector("spec.other=x", ["spec.nodeName"])


# ------------------------------------------------------------------------- patches

def test_merge_patch_rfc7386():
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    assert patch.merge_patch(target, {"a": "z", "c": {"f": None}, "l": [3]}) == \
        {"a": "z", "c": {"d": "e"}, "l": [3]}
    assert target["c"] == {"d": "e", "f": "g"}  # input untouched


def test_strategic_merge_patch_directives():
    target = {"spec": {"containers": [{"name": "a", "image": "1", "env": [{"name": "X"}]},
                                      {"name": "b", "image": "1"}],
                       "tolerations": [{"key": "t1"}],
                       "nodeSelector": {"k": "v", "old": "1"}},
              "metadata": {"finalizers": ["f1"]}}
    result = patch.strategic_merge_patch(target, {
        "spec": {"containers": [{"name": "b", "$patch": "delete"},
                                {"name": "c", "image": "2"},
                                {"name": "a", "env": [{"name": "Y", "value": "1"}]}],
                 "tolerations": [{"key": "t2"}],  # no merge key: replaced
                 "nodeSelector": {"$patch": "replace", "new": "1"},
                 "$setElementOrder/containers": [{"name": "a"}, {"name": "c"}]},
        "metadata": {"finalizers": ["f2"], "$deleteFromPrimitiveList/finalizers": ["f1"]}})
    spec = result["spec"]
    assert [c["name"] for c in spec["containers"]] == ["a", "c"]
    assert spec["containers"][0]["env"] == [{"name": "X"}, {"name": "Y", "value": "1"}]
    assert spec["tolerations"] == [{"key": "t2"}]
    assert spec["nodeSelector"] == {"new": "1"}
    assert result["metadata"]["finalizers"] == ["f2"]
    with pytest.raises(patch.PatchError):
        patch.strategic_merge_patch(target, {"spec": {"containers": [{"image": "x"}]}})


def test_json_patch_rfc6902():
    doc = {"a": {"b": [1, 2]}, "c": "d"}
    result = patch.json_patch(doc, [
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "add", "path": "/a/b/0", "value": 0},
        {"op": "replace", "path": "/c", "value": "e"},
        {"op": "copy", "from": "/c", "path": "/f"},
        {"op": "move", "from": "/f", "path": "/g"},
        {"op": "remove", "path": "/a/b/1"},
        {"op": "add", "path": "/h~1i", "value": True},
        {"op": "test", "path": "/g", "value": "e"}])
    assert result == {"a": {"b": [0, 2, 3]}, "c": "e", "g": "e", "h/i": True}
    for bad in ([{"op": "remove", "path": "/zz"}], [{"op": "replace", "path": "/zz", "value": 1}],
                [{"op": "test", "path": "/c", "value": "x"}], [{"op": "add", "path": "/a/b/9", "value": 1}]):
        with pytest.raises(patch.PatchError):
            patch.json_patch(doc, bad)
    with pytest.raises(patch.PatchError) as info:
        patch.json_patch(doc, {"op": "add"})
    assert info.value.code == 400


def test_apply_prunes_only_what_the_manager_dropped():
    live = {"data": {"a": "1", "b": "2", "mine-not": "x"},
            "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}
    previous = {"data": {"a": "1", "b": "2"},
                "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}
    applied = {"data": {"a": "3"}, "spec": {"containers": [{"name": "a", "image": "2"}]}}
    result = patch.apply_patch(live, applied, previous)
    assert result["data"] == {"a": "3", "mine-not": "x"}
    assert result["spec"]["containers"] == [{"name": "a", "image": "2"}]


# ------------------------------------------------------------------------ protobuf

def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number, payload):
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _entry(key, value):
    return _field(1, key.encode()) + _field(2, value)


def test_protobuf_secret_envelope():
    # field numbers: k8s.io/api core/v1 Secret (1 metadata, 2 data, 3 type), ObjectMeta
    # (1 name, 3 namespace, 11 labels), runtime.Unknown (1 typeMeta, 2 raw)
    meta = _field(1, b"sh.helm.release.v1.r.v1") + _field(3, b"default") + \
        _field(11, _entry("owner", b"helm"))
    secret = _field(1, meta) + _field(2, _entry("release", b"\x00\x01data")) + \
        _field(3, b"helm.sh/release.v1")
    envelope = protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Secret")) + \
        _field(2, secret)
    decoded = protobuf.decode(envelope)
    assert decoded["metadata"] == {"name": "sh.helm.release.v1.r.v1", "namespace": "default",
                                   "labels": {"owner": "helm"}}
    assert base64.b64decode(decoded["data"]["release"]) == b"\x00\x01data"
    assert decoded["type"] == "helm.sh/release.v1"
    options = protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"DeleteOptions")) + \
        _field(2, _field(1, 0) + _field(4, b"Background"))
    assert protobuf.decode(options)["propagationPolicy"] == "Background"
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(protobuf.MAGIC + _field(1, _field(1, b"apps/v1") + _field(2, b"Deployment")))
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(b"{}")


# -------------------------------------------------------------------------- faults

def test_protobuf_namespace_and_pod():
    # field numbers: core/v1 Namespace (1 metadata, 2 spec: 1 finalizers), Pod (1 metadata, 2 spec),
    # PodSpec (2 containers, 3 restartPolicy, 7 nodeSelector), Container (1 name, 2 image, 4 args,
    # 8 resources: 1 limits of Quantity{1 string}) -- docs/reference/specs.md §15
    namespace = protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Namespace")) + \
        _field(2, _field(1, _field(1, b"team-a")) + _field(2, _field(1, b"kubernetes")))
    assert protobuf.decode(namespace) == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"},
                                          "spec": {"finalizers": ["kubernetes"]}}
    container = _field(1, b"c") + _field(2, b"busybox") + _field(4, b"sleep") + _field(4, b"1") + \
        _field(8, _field(1, _entry("nvidia.com/gpu", _field(1, b"1"))))
    spec = _field(2, container) + _field(3, b"Never") + _field(7, _entry("pool", b"a"))
    pod = protobuf.decode(protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Pod")) +
                          _field(2, _field(1, _field(1, b"p")) + _field(2, spec)))
    assert pod["spec"] == {"containers": [{"name": "c", "image": "busybox", "args": ["sleep", "1"],
                                           "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                           "restartPolicy": "Never", "nodeSelector": {"pool": "a"}}


def test_fault_registry_counts_and_matching():
    registry = faults.FaultRegistry()
    registry.add("error", verb="get", resource="pods", namespace="ns1", count=2)
    assert registry.match_request("get", "pods", "v1/pods", "ns2", "p") is None
    assert registry.match_request("list", "pods", "v1/pods", "ns1", None) is None
    assert registry.match_request("get", "pods", "v1/pods", "ns1", "p").hits == 1
    assert registry.match_request("get", "pods", "v1/pods", "ns1", "p").hits == 2
    assert registry.match_request("get", "pods", "v1/pods", "ns1", "p") is None
    registry.add("conflict", resource="v1/pods/eviction", count=None)
    assert registry.match_request("create", "pods/eviction", "v1/pods/eviction", "n", "p")
    assert registry.match_request("create", "pods", "v1/pods", "n", "p") is None
    registry.add("named", condition="mig-manager-fails", count=1, params={"node": "n1"})
    assert registry.active("mig-manager-fails").params == {"node": "n1"}
    assert registry.consume("mig-manager-fails") is not None
    assert registry.active("mig-manager-fails") is None
    for bad in ({"kind": "explode"}, {"kind": "named"}, {"kind": "error", "count": 0},
                {"kind": "error", "status": 200}):
        with pytest.raises(faults.FaultError):
            registry.add(**bad)
    assert registry.clear() == 1


# --------------------------------------------------------------------------- store

def test_store_events_and_controller_update():
    store = Store()
    events = []
    unsubscribe = store.subscribe(lambda e: events.append((e.type, e.resource_key,
                                                           e.object["metadata"]["name"])))
    store.create("v1/nodes", {"metadata": {"name": "n1"}})
    rv = store.resource_version()
    assert store.controller_update("v1/nodes", None, "n1", lambda node: None)
    assert store.resource_version() == rv  # no-op: nothing written
    store.controller_update("v1/nodes", None, "n1",
                            lambda node: node.setdefault("status", {}).update(
                                allocatable={"nvidia.com/gpu": 4}),
                            subresource="status")
    assert store.get("v1/nodes", None, "n1")["status"]["allocatable"] == {"nvidia.com/gpu": "4"}
    store.delete("v1/nodes", None, "n1")
    unsubscribe()
    store.create("v1/nodes", {"metadata": {"name": "n2"}})
    assert events == [("ADDED", "v1/nodes", "n1"), ("MODIFIED", "v1/nodes", "n1"),
                      ("DELETED", "v1/nodes", "n1")]


def test_store_finalizers_and_owner_garbage_collection():
    store = Store()
    owner = store.create("v1/configmaps", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}
    store.create("v1/configmaps", {"metadata": {"name": "child", "ownerReferences": [ref]}})
    store.create("v1/configmaps", {"metadata": {"name": "held", "finalizers": ["lab/x"]}})
    store.delete("v1/configmaps", "default", "owner")
    with pytest.raises(ApiError):
        store.get("v1/configmaps", "default", "child")
    held = store.delete("v1/configmaps", "default", "held")
    assert held["metadata"]["deletionTimestamp"]
    store.patch("v1/configmaps", "default", "held", {"metadata": {"finalizers": None}}, "merge")
    with pytest.raises(ApiError) as info:
        store.get("v1/configmaps", "default", "held")
    assert info.value.code == 404


def test_store_reap_removes_expired_terminating_pods():
    clock = [1_000_000.0]
    store = Store(clock=lambda: clock[0])
    store.create("v1/nodes", {"metadata": {"name": "n1"}})
    store.create("v1/pods", {"metadata": {"name": "p"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "c", "image": "i:1"}]}})
    store.delete("v1/pods", "default", "p", grace_period_seconds=5)
    assert store.reap() == 0
    clock[0] += 6
    assert store.reap() == 1
    assert store.items("v1/pods") == []


# -------------------------------------------------------------------------- schema

WIDGET_SCHEMA = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 8},
            "mode": {"type": "string", "enum": ["single", "mixed"]},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "port": {"x-kubernetes-int-or-string": True},
            "note": {"type": "string", "nullable": True},
        }},
        "status": {"type": "object", "properties": {"state": {"type": "string"}}},
    },
}


def test_schema_prunes_unknown_fields():
    obj = {"apiVersion": "lab.example/v1", "kind": "Widget", "metadata": {"name": "w"},
           "spec": {"size": 2, "typo": 1, "labels": {"a": "b"}, "free": {"any": {"x": 1}},
                    "port": "http", "note": None, "mode": None},
           "status": {"state": "ok", "extra": True}, "junk": 1}
    pruned, problems = schema.prune_and_validate(WIDGET_SCHEMA, obj)
    assert problems == []
    assert pruned["spec"] == {"size": 2, "labels": {"a": "b"}, "free": {"any": {"x": 1}},
                              "port": "http", "note": None}
    assert pruned["status"] == {"state": "ok"} and "junk" not in pruned
    assert obj["spec"]["typo"] == 1  # input untouched


def test_schema_validation_messages():
    _pruned, problems = schema.prune_and_validate(WIDGET_SCHEMA, {"spec": {
        "size": 9, "mode": "none", "name": "ABCDEFG", "tags": ["a", "b", 3], "labels": {"a": 1}}})
    fields = dict(problems)
    assert fields["spec.size"] == "Invalid value: 9: spec.size in body should be less than or equal to 8"
    assert fields["spec.mode"] == 'Unsupported value: "none": supported values: "single", "mixed"'
    assert fields["spec.tags[2]"].startswith('Invalid value: 3: spec.tags[2] in body must be of type string')
    assert "spec.tags" in fields and "spec.labels.a" in fields
    assert [f for f, _m in problems if f == "spec.name"]  # pattern and length
    _pruned, problems = schema.prune_and_validate(WIDGET_SCHEMA, {"spec": {}})
    assert problems == [("spec.size", "Required value")]
    _pruned, problems = schema.prune_and_validate(WIDGET_SCHEMA, {"metadata": {}})
    assert problems == [("spec", "Required value")]
    assert schema.json_path_value({"status": {"items": [{"n": 3}]}}, ".status.items[0].n") == 3


# ------------------------------------------------------------- server-side apply ownership

def test_apply_conflicts_with_other_managers_and_force_takes_over():
    store = Store()
    applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": {"team": "a"}},
               "data": {"a": "1", "b": "2"}}
    store.patch("v1/configmaps", "default", "c", applied, "apply", field_manager="helm")
    store.patch("v1/configmaps", "default", "c", {"data": {"a": "9", "mine": "x"}}, "merge",
                field_manager="gpufleet.sharing")
    with pytest.raises(ApiError) as info:
        store.patch("v1/configmaps", "default", "c", applied, "apply", field_manager="helm")
    assert info.value.code == 409 and info.value.message == (
        'Apply failed with 1 conflict: conflict with "gpufleet.sharing" using v1: .data.a')
    assert info.value.details["causes"][0]["reason"] == "FieldManagerConflict"
    # the same value is no conflict (shared ownership); dropping "b" prunes it
    same = dict(applied, data={"a": "9"})
    assert store.patch("v1/configmaps", "default", "c", same, "apply",
                       field_manager="helm")["data"] == {"a": "9", "mine": "x"}
    forced = store.patch("v1/configmaps", "default", "c", applied, "apply", field_manager="helm",
                         force=True)
    assert forced["data"] == {"a": "1", "b": "2", "mine": "x"}
    # after the takeover the other manager's later apply of a conflicts the other way round
    with pytest.raises(ApiError):
        store.patch("v1/configmaps", "default", "c", {"data": {"a": "5"}}, "apply",
                    field_manager="gpufleet.sharing")
    with pytest.raises(ApiError) as info:
        store.patch("v1/configmaps", "default", "c", {"data": {}}, "apply")
    assert info.value.code == 400  # apply needs a field manager


def test_store_reads_are_deep_copies_equal_to_what_deepcopy_returns():
    """The store's copy (objects.clone) equals copy.deepcopy on the store's JSON-like objects, and a
    caller changing what it read changes nothing in the store or in another reader's copy."""
    tree = {"a": [1, 2.5, {"b": None, "c": [True, "x"]}], "d": {"e": {"f": []}}, "t": (1, [2])}
    copied = clone(tree)
    assert copied == copy.deepcopy(tree)
    copied["a"][2]["c"].append("y")
    copied["t"][1].append(3)  # not JSON: handed to copy.deepcopy, still a copy
    assert tree == {"a": [1, 2.5, {"b": None, "c": [True, "x"]}], "d": {"e": {"f": []}}, "t": (1, [2])}

    store = Store()
    store.create("v1/namespaces", {"metadata": {"name": "team"}})
    store.create("v1/configmaps", {"metadata": {"name": "cm", "namespace": "team", "labels": {"k": "v"}},
                                   "data": {"x": "1"}})
    first = store.items("v1/configmaps", "team")
    first[0]["data"]["x"] = "changed"
    first[0]["metadata"]["labels"]["k"] = "changed"
    listed = store.list("v1/configmaps", "team")["items"]
    got = store.get("v1/configmaps", "team", "cm")
    assert [item["data"] for item in listed] == [{"x": "1"}] and got["metadata"]["labels"] == {"k": "v"}
    got["data"]["x"] = "again"
    assert store.get("v1/configmaps", "team", "cm")["data"] == {"x": "1"}
