"""Validation rules of the core API the lab must enforce as the real API server does (issue 21).

Each rule follows Kubernetes' ``pkg/apis/core/validation/validation.go`` (kubernetes/kubernetes, tag
v1.31.0; the same rules in later releases), documented in the API reference
(https://kubernetes.io/docs/reference/kubernetes-api/):

- Secret: ``ValidateSecretUpdate`` makes ``type`` immutable (``ValidateImmutableField``: "field is
  immutable"); ``ValidateSecret`` requires, for ``kubernetes.io/dockerconfigjson``, a
  ``.dockerconfigjson`` key holding JSON.
- Node: ``validateNodeTaints`` -- each taint's key a qualified name, its value a label value, its
  effect NoSchedule, PreferNoSchedule or NoExecute, and "taints must be unique by key and effect pair".
- Pod spec: ``ValidateTolerations`` -- operator ``Exists`` or ``Equal`` (empty means Equal); an empty
  key needs ``Exists``; ``Exists`` takes no value; the effect one of the three or empty;
  ``tolerationSeconds`` only with ``NoExecute``. Containers: ``validateContainerCommon`` refuses an
  image with leading or trailing whitespace (the image reference itself is checked by the kubelet).

Pure functions on plain dicts returning (field, message) problems; ``admission`` calls them.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Dict, List, Optional, Tuple

Problems = List[Tuple[str, str]]
Obj = Dict[str, Any]

DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def qualified_name_problem(key: Any) -> Optional[str]:
    text = key if isinstance(key, str) else ""
    prefix, slash, name = text.rpartition("/")
    if (slash and (not prefix or len(prefix) > 253 or not _PREFIX.match(prefix))) or not name \
            or len(name) > 63 or not _NAME.match(name):
        return ("Invalid value: %r: name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character (with an optional DNS subdomain prefix and '/')" % (key,))
    return None


def secret_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    problems: Problems = []
    kind = obj.get("type") or "Opaque"
    if old is not None and (old.get("type") or "Opaque") != kind:
        problems.append(("type", "Invalid value: %r: field is immutable" % kind))
    if kind == DOCKER_CONFIG_JSON:
        data = (obj.get("data") or {}).get(".dockerconfigjson")
        if data is None:
            problems.append(("data[.dockerconfigjson]", "Required value"))
        else:
            try:
                json.loads(base64.b64decode(data, validate=True))
            except (binascii.Error, ValueError, TypeError) as exc:
                problems.append(("data[.dockerconfigjson]", "Invalid value: \"<secret contents redacted>\": %s"
                                 % type(exc).__name__))
    return problems


def node_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    del old
    problems: Problems = []
    seen = set()
    for index, taint in enumerate((obj.get("spec") or {}).get("taints") or []):
        path = "spec.taints[%d]" % index
        taint = taint if isinstance(taint, dict) else {}
        key_problem = qualified_name_problem(taint.get("key"))
        if key_problem:
            problems.append((path + ".key", key_problem))
        value = taint.get("value", "")
        if not isinstance(value, str) or len(value) > 63 or not _VALUE.match(value):
            problems.append((path + ".value", "Invalid value: %r: a valid label must be an empty string or consist "
                             "of alphanumeric characters, '-', '_' or '.'" % (value,)))
        if taint.get("effect") not in TAINT_EFFECTS:
            problems.append((path + ".effect", "Unsupported value: %r: supported values: \"NoSchedule\", "
                             "\"PreferNoSchedule\", \"NoExecute\"" % (taint.get("effect"),)))
        pair = (taint.get("key"), taint.get("effect"))
        if pair in seen:
            problems.append((path, "Duplicate value: %r: taints must be unique by key and effect pair"
                             % {"key": pair[0], "effect": pair[1]}))
        seen.add(pair)
    return problems


def toleration_problems(tolerations: Any, path: str) -> Problems:
    problems: Problems = []
    for index, toleration in enumerate(tolerations or []):
        where = "%s[%d]" % (path, index)
        toleration = toleration if isinstance(toleration, dict) else {}
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        if key:
            problem = qualified_name_problem(key)
            problems += [(where + ".key", problem)] if problem else []
        elif operator != "Exists":
            problems.append((where + ".operator", "Invalid value: %r: operator must be Exists when `key` is empty, "
                             "which means \"match all values and all keys\"" % operator))
        if operator not in ("Exists", "Equal"):
            problems.append((where + ".operator", "Unsupported value: %r: supported values: \"Equal\", \"Exists\""
                             % operator))
        elif operator == "Exists" and toleration.get("value"):
            problems.append((where + ".operator", "Invalid value: %r: value must be empty when `operator` is "
                             "'Exists'" % toleration.get("value")))
        elif operator == "Equal" and not _VALUE.match(str(toleration.get("value") or "")):
            problems.append((where + ".value", "Invalid value: %r: a valid label must be an empty string or consist "
                             "of alphanumeric characters, '-', '_' or '.'" % (toleration.get("value"),)))
        effect = toleration.get("effect") or ""
        if effect and effect not in TAINT_EFFECTS:
            problems.append((where + ".effect", "Unsupported value: %r: supported values: \"NoSchedule\", "
                             "\"PreferNoSchedule\", \"NoExecute\"" % effect))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            problems.append((where + ".effect", "Invalid value: %r: effect must be 'NoExecute' when "
                             "`tolerationSeconds` is set" % effect))
    return problems


def pod_spec_problems(spec: Obj, path: str) -> Problems:
    """The tolerations and container images of a pod spec (the rest is admission's)."""
    problems = toleration_problems(spec.get("tolerations"), path + ".tolerations")
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(kind) or []):
            image = container.get("image") if isinstance(container, dict) else None
            if isinstance(image, str) and image and image != image.strip():
                problems.append(("%s.%s[%d].image" % (path, kind, index),
                                 "Invalid value: %r: must not have leading or trailing whitespace" % image))
    return problems


__all__ = ["DOCKER_CONFIG_JSON", "TAINT_EFFECTS", "node_problems", "pod_spec_problems", "qualified_name_problem",
           "secret_problems", "toleration_problems"]
