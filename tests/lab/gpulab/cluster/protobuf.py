"""Decoding of the few Kubernetes protobuf request bodies that real clients send to the lab.

client-go's typed clientsets (helm's release storage among them) encode request bodies as
``application/vnd.kubernetes.protobuf``: the 4 magic bytes ``k8s\\0`` then a ``runtime.Unknown``
message (typeMeta, raw) whose ``raw`` is the object in protobuf. Responses can stay JSON: the
client decodes by the response Content-Type. This module decodes, into the JSON dict shape, the
kinds those clients write: Secret, ConfigMap, DeleteOptions, and what kubectl's everyday imperative
commands send (``create namespace``: Namespace; ``run``: Pod, with the PodSpec and Container fields
listed below; docs/reference/specs.md §15). Field numbers follow
k8s.io/api/core/v1/generated.proto and k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto
(facts, not copied code). Anything else raises ProtobufError (the API answers 415).
"""

from __future__ import annotations

import base64
import datetime as _dt
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[Tuple[int, int, Any]]:
    """(field number, wire type, value) with value int for varints, bytes for length-delimited."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ProtobufError("unsupported wire type %d" % wire)
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _map_entry(data: bytes, value_decoder: Callable[[bytes], Any]) -> Tuple[str, Any]:
    key, value = "", value_decoder(b"")
    for number, _wire, raw in _fields(data):
        if number == 1:
            key = raw.decode()
        elif number == 2:
            value = value_decoder(raw)
    return key, value


def _time(data: bytes) -> str:
    seconds = 0
    for number, _wire, raw in _fields(data):
        if number == 1:
            seconds = _signed(raw)
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owner_reference(data: bytes) -> Dict[str, Any]:
    names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
    ref: Dict[str, Any] = {}
    for number, _wire, raw in _fields(data):
        if number in names:
            ref[names[number]] = raw.decode()
        elif number == 6:
            ref["controller"] = bool(raw)
        elif number == 7:
            ref["blockOwnerDeletion"] = bool(raw)
    return ref


def _object_meta(data: bytes) -> Dict[str, Any]:
    strings = {1: "name", 2: "generateName", 3: "namespace", 4: "selfLink", 5: "uid",
               6: "resourceVersion"}
    meta: Dict[str, Any] = {}
    for number, _wire, raw in _fields(data):
        if number in strings:
            meta[strings[number]] = raw.decode()
        elif number == 7:
            meta["generation"] = _signed(raw)
        elif number == 8:
            meta["creationTimestamp"] = _time(raw)
        elif number == 9:
            meta["deletionTimestamp"] = _time(raw)
        elif number == 10:
            meta["deletionGracePeriodSeconds"] = _signed(raw)
        elif number in (11, 12):
            key, value = _map_entry(raw, lambda b: b.decode())
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = value
        elif number == 13:
            meta.setdefault("ownerReferences", []).append(_owner_reference(raw))
        elif number == 14:
            meta.setdefault("finalizers", []).append(raw.decode())
        # 17 managedFields: not modelled by the lab; ignored
    for key in ("resourceVersion", "uid", "generateName", "selfLink", "namespace"):
        if meta.get(key) == "":
            del meta[key]
    return meta


def _secret(data: bytes) -> Dict[str, Any]:
    obj: Dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {}}
    for number, _wire, raw in _fields(data):
        if number == 1:
            obj["metadata"] = _object_meta(raw)
        elif number == 2:
            key, value = _map_entry(raw, lambda b: b)
            obj.setdefault("data", {})[key] = base64.b64encode(value).decode()
        elif number == 3:
            obj["type"] = raw.decode()
        elif number == 4:
            key, value = _map_entry(raw, lambda b: b.decode())
            obj.setdefault("stringData", {})[key] = value
        elif number == 5:
            obj["immutable"] = bool(raw)
    return obj


def _config_map(data: bytes) -> Dict[str, Any]:
    obj: Dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}
    for number, _wire, raw in _fields(data):
        if number == 1:
            obj["metadata"] = _object_meta(raw)
        elif number == 2:
            key, value = _map_entry(raw, lambda b: b.decode())
            obj.setdefault("data", {})[key] = value
        elif number == 3:
            key, value = _map_entry(raw, lambda b: b)
            obj.setdefault("binaryData", {})[key] = base64.b64encode(value).decode()
        elif number == 4:
            obj["immutable"] = bool(raw)
    return obj


def _delete_options(data: bytes) -> Dict[str, Any]:
    obj: Dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    for number, _wire, raw in _fields(data):
        if number == 1:
            obj["gracePeriodSeconds"] = _signed(raw)
        elif number == 2:
            pre: Dict[str, str] = {}
            for sub, _wire, value in _fields(raw):
                if sub in (1, 2):
                    pre["uid" if sub == 1 else "resourceVersion"] = value.decode()
            obj["preconditions"] = pre
        elif number == 3:
            obj["orphanDependents"] = bool(raw)
        elif number == 4:
            obj["propagationPolicy"] = raw.decode()
        elif number == 5:
            obj.setdefault("dryRun", []).append(raw.decode())
    return obj


def _strings(raw: bytes) -> str:
    return raw.decode()


def _quantity_map(raw: bytes) -> Tuple[str, str]:
    """A ``map<string, Quantity>`` entry; Quantity is ``{string string = 1}``."""
    def quantity(data: bytes) -> str:
        return "".join(value.decode() for number, _wire, value in _fields(data) if number == 1)
    return _map_entry(raw, quantity)


def _message(raw: bytes, strings: Dict[int, str], ints: Optional[Dict[int, str]] = None, bools: Optional[Dict[int, str]] = None,
             lists: Optional[Dict[int, Tuple[str, Callable[[bytes], Any]]]] = None,
             maps: Optional[Dict[int, Tuple[str, Callable[[bytes], Tuple[str, Any]]]]] = None) -> Dict[str, Any]:
    """One message by field tables: scalar strings, int64s, bools, repeated fields and maps."""
    obj: Dict[str, Any] = {}
    for number, _wire, value in _fields(raw):
        if number in strings:
            obj[strings[number]] = value.decode()
        elif ints and number in ints:
            obj[ints[number]] = _signed(value)
        elif bools and number in bools:
            obj[bools[number]] = bool(value)
        elif lists and number in lists:
            name, decoder = lists[number]
            obj.setdefault(name, []).append(decoder(value))
        elif maps and number in maps:
            name, decoder = maps[number]
            key, item = decoder(value)
            obj.setdefault(name, {})[key] = item
    return obj


def _env_var(raw: bytes) -> Dict[str, Any]:
    return _message(raw, {1: "name", 2: "value"})


def _resources(raw: bytes) -> Dict[str, Any]:
    return _message(raw, {}, maps={1: ("limits", _quantity_map), 2: ("requests", _quantity_map)})


def _container(raw: bytes) -> Dict[str, Any]:
    """core/v1 Container: name 1, image 2, command 3, args 4, workingDir 5, env 7, resources 8,
    imagePullPolicy 14, stdin 16, stdinOnce 17, tty 18 (other fields are not modelled)."""
    obj = _message(raw, {1: "name", 2: "image", 5: "workingDir", 13: "terminationMessagePath", 14: "imagePullPolicy",
                         20: "terminationMessagePolicy"},
                   bools={16: "stdin", 17: "stdinOnce", 18: "tty"},
                   lists={3: ("command", _strings), 4: ("args", _strings), 7: ("env", _env_var)})
    for number, _wire, value in _fields(raw):
        if number == 8:
            obj["resources"] = _resources(value)
    return obj


def _toleration(raw: bytes) -> Dict[str, Any]:
    return _message(raw, {1: "key", 2: "operator", 3: "value", 4: "effect"}, ints={5: "tolerationSeconds"})


def _pod_spec(raw: bytes) -> Dict[str, Any]:
    """core/v1 PodSpec: containers 2, restartPolicy 3, terminationGracePeriodSeconds 4,
    activeDeadlineSeconds 5, dnsPolicy 6, nodeSelector 7, serviceAccountName 8, nodeName 10,
    schedulerName 19, initContainers 20, tolerations 22, priorityClassName 24."""
    return _message(raw, {3: "restartPolicy", 6: "dnsPolicy", 8: "serviceAccountName", 10: "nodeName",
                          19: "schedulerName", 24: "priorityClassName"},
                    ints={4: "terminationGracePeriodSeconds", 5: "activeDeadlineSeconds"},
                    lists={2: ("containers", _container), 20: ("initContainers", _container),
                           22: ("tolerations", _toleration)},
                    maps={7: ("nodeSelector", lambda b: _map_entry(b, lambda v: v.decode()))})


def _pod(data: bytes) -> Dict[str, Any]:
    obj: Dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {}}
    for number, _wire, raw in _fields(data):
        if number == 1:
            obj["metadata"] = _object_meta(raw)
        elif number == 2:
            obj["spec"] = _pod_spec(raw)
    return obj


def _namespace(data: bytes) -> Dict[str, Any]:
    """core/v1 Namespace: metadata 1, spec 2 (finalizers 1); the status is the server's."""
    obj: Dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {}}
    for number, _wire, raw in _fields(data):
        if number == 1:
            obj["metadata"] = _object_meta(raw)
        elif number == 2:
            finalizers = [value.decode() for sub, _wire, value in _fields(raw) if sub == 1]
            if finalizers:
                obj["spec"] = {"finalizers": finalizers}
    return obj


DECODERS: Dict[Tuple[str, str], Callable[[bytes], Dict[str, Any]]] = {
    ("v1", "Secret"): _secret,
    ("v1", "ConfigMap"): _config_map,
    ("v1", "Namespace"): _namespace,
    ("v1", "Pod"): _pod,
    ("v1", "DeleteOptions"): _delete_options,
    ("meta.k8s.io/v1", "DeleteOptions"): _delete_options,
}


def decode(body: bytes) -> Dict[str, Any]:
    """Decode a ``k8s\\0``-prefixed protobuf body into a JSON-shaped dict."""
    if not body.startswith(MAGIC):
        raise ProtobufError("protobuf body without the k8s magic prefix")
    api_version = kind = ""
    raw = b""
    for number, _wire, value in _fields(body[len(MAGIC):]):
        if number == 1:
            for sub, _wire, text in _fields(value):
                if sub == 1:
                    api_version = text.decode()
                elif sub == 2:
                    kind = text.decode()
        elif number == 2:
            raw = value
    decoder = DECODERS.get((api_version, kind))
    if decoder is None:
        raise ProtobufError("the lab decodes protobuf only for %s, not %s %s"
                            % (", ".join("%s %s" % k for k in DECODERS), api_version, kind))
    return decoder(raw)


__all__: List[str] = ["decode", "ProtobufError", "MAGIC"]
