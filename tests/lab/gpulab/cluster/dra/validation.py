"""Defaults and validation (422 ``Invalid``) of the ``resource.k8s.io/v1`` types.

Written from kubernetes ``pkg/apis/resource/validation/validation.go`` and the limits in
``pkg/apis/resource/types.go`` (v1.34.0; API reference https://kubernetes.io/docs/reference/
kubernetes-api/workload-resources/resource-claim-v1/): request and device names are DNS labels,
class names DNS subdomains, at most 32 requests/selectors/constraints, exactly one of ``exactly``
and ``firstAvailable``, ``allocationMode`` ``ExactCount`` (``count`` > 0, default 1) or ``All``
(no ``count``), constraints name existing requests and a fully qualified ``matchAttribute``, CEL
selectors must compile (cel-python), a claim's and a template's spec are immutable, a slice
names exactly one of ``nodeName``/``nodeSelector``/``allNodes``/``perDeviceNodeSelection``, at
most 128 devices with unique DNS-label names, each attribute exactly one typed value (versions
semver), a claim's ``status.allocation`` cannot change once set and ``reservedFor`` needs it.
Messages follow the field.ErrorList wording of that file (``Required value``, ``Invalid value``, ``Duplicate
value``, ``Too many``, ``field is immutable``). Not modelled: firstAvailable subrequest limits
beyond names, tolerations, admin access policy, binding conditions, consumable capacity.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpulab.cluster.dra import api
from gpulab.cluster.dra.cel import compile_error

Problems = List[Tuple[str, str]]
Obj = Dict[str, Any]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-.]+)?(\+[0-9A-Za-z-.]+)?$")
MAX_REQUESTS = 32
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_DEVICES = 128
MAX_ATTRIBUTES = 32
MODES = ("ExactCount", "All")


def _label(value: Any, path: str) -> Problems:
    if not value:
        return [(path, "Required value")]
    if len(str(value)) > 63 or not _DNS_LABEL.match(str(value)):
        return [(path, "Invalid value: \"%s\": a lowercase RFC 1123 label must consist of lower case alphanumeric "
                       "characters or '-', and must start and end with an alphanumeric character" % value)]
    return []


def _subdomain(value: Any, path: str, limit: int = 253) -> Problems:
    if not value:
        return [(path, "Required value")]
    if len(str(value)) > limit or not _DNS_SUBDOMAIN.match(str(value)):
        return [(path, "Invalid value: \"%s\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                       "characters, '-' or '.', and must start and end with an alphanumeric character" % value)]
    return []


def _selectors(selectors: Any, path: str) -> Problems:
    problems: Problems = []
    selectors = selectors or []
    if len(selectors) > MAX_SELECTORS:
        problems.append((path, "Too many: %d: must have at most %d items" % (len(selectors), MAX_SELECTORS)))
    for index, selector in enumerate(selectors):
        expression = ((selector or {}).get("cel") or {}).get("expression")
        where = "%s[%d].cel" % (path, index)
        if not (selector or {}).get("cel"):
            problems.append(("%s[%d].cel" % (path, index), "Required value"))
        elif not expression:
            problems.append((where + ".expression", "Required value"))
        else:
            error = compile_error(str(expression))
            if error:
                problems.append((where + ".expression", "Invalid value: \"%s\": %s" % (expression, error)))
    return problems


def _exact(request: Obj, path: str) -> Problems:
    problems = _subdomain(request.get("deviceClassName"), path + ".deviceClassName")
    problems += _selectors(request.get("selectors"), path + ".selectors")
    mode = request.get("allocationMode", "ExactCount")
    if mode not in MODES:
        problems.append((path + ".allocationMode", 'Unsupported value: \"%s\": supported values: "All", "ExactCount"' % mode))
    elif mode == "ExactCount" and int(request.get("count", 1) or 0) <= 0:
        problems.append((path + ".count", "Invalid value: %s: must be greater than zero" % request.get("count")))
    elif mode == "All" and request.get("count") not in (None, 0):
        problems.append((path + ".count", "Invalid value: %s: must not be specified when allocationMode is 'All'"
                         % request.get("count")))
    return problems


def _request(request: Obj, path: str) -> Problems:
    problems = _label(request.get("name"), path + ".name")
    exactly, first = request.get("exactly"), request.get("firstAvailable")
    if not exactly and not first:
        problems.append((path, "Required value: exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly and first:
        problems.append((path, "Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
                               "but multiple fields are set"))
    if exactly:
        problems += _exact(exactly, path + ".exactly")
    for index, sub in enumerate(first or []):
        where = "%s.firstAvailable[%d]" % (path, index)
        problems += _label(sub.get("name"), where + ".name") + _exact(sub, where)
    return problems


def claim_spec_problems(spec: Obj, path: str) -> Problems:
    devices = (spec or {}).get("devices") or {}
    requests = devices.get("requests") or []
    problems: Problems = []
    if len(requests) > MAX_REQUESTS:
        problems.append((path + ".devices.requests", "Too many: %d: must have at most %d items" % (len(requests), MAX_REQUESTS)))
    names: List[str] = []
    for index, request in enumerate(requests):
        where = "%s.devices.requests[%d]" % (path, index)
        problems += _request(request or {}, where)
        name = (request or {}).get("name")
        if name in names:
            problems.append((where + ".name", "Duplicate value: \"%s\"" % name))
        names.append(name)
    constraints = devices.get("constraints") or []
    if len(constraints) > MAX_CONSTRAINTS:
        problems.append((path + ".devices.constraints", "Too many: %d: must have at most %d items"
                         % (len(constraints), MAX_CONSTRAINTS)))
    for index, constraint in enumerate(constraints):
        where = "%s.devices.constraints[%d]" % (path, index)
        for position, name in enumerate((constraint or {}).get("requests") or []):
            if name.split("/")[0] not in names:
                problems.append(("%s.requests[%d]" % (where, position),
                                 "Invalid value: \"%s\": must be the name of a request in the claim or the name of "
                                 "a request and a subrequest separated by '/'" % name))
        attribute = (constraint or {}).get("matchAttribute")
        if not attribute:
            problems.append((where + ".matchAttribute", "Required value"))
        elif "/" not in attribute or not _subdomain(attribute.split("/", 1)[0], "x") == [] \
                or not _C_IDENTIFIER.match(attribute.split("/", 1)[1]):
            problems.append((where + ".matchAttribute", "Invalid value: \"%s\": must include a domain" % attribute))
    return problems


def _claim(obj: Obj, old: Optional[Obj]) -> Problems:
    problems = claim_spec_problems(obj.get("spec") or {}, "spec")
    if old is not None and (old.get("spec") or {}) != (obj.get("spec") or {}):
        problems.append(("spec", "Invalid value: field is immutable"))
    status = obj.get("status") or {}
    old_allocation = ((old or {}).get("status") or {}).get("allocation")
    if old_allocation and status.get("allocation") and status["allocation"] != old_allocation:
        problems.append(("status.allocation", "Invalid value: field is immutable"))
    reserved = status.get("reservedFor") or []
    if reserved and not status.get("allocation"):
        problems.append(("status.reservedFor", "Forbidden: may not be specified when `allocated` is not set"))
    for index, ref in enumerate(reserved):
        for fld in ("resource", "name", "uid"):
            if not (ref or {}).get(fld):
                problems.append(("status.reservedFor[%d].%s" % (index, fld), "Required value"))
    if len(reserved) > 256:
        problems.append(("status.reservedFor", "Too many: %d: must have at most 256 items" % len(reserved)))
    return problems


def _template(obj: Obj, old: Optional[Obj]) -> Problems:
    problems = claim_spec_problems(((obj.get("spec") or {}).get("spec")) or {}, "spec.spec")
    if old is not None and (old.get("spec") or {}) != (obj.get("spec") or {}):
        problems.append(("spec", "Invalid value: field is immutable"))
    return problems


def _device_class(obj: Obj, old: Optional[Obj]) -> Problems:
    del old
    spec = obj.get("spec") or {}
    problems = _selectors(spec.get("selectors"), "spec.selectors")
    if len(spec.get("config") or []) > 32:
        problems.append(("spec.config", "Too many: %d: must have at most 32 items" % len(spec["config"])))
    return problems


def _attribute(value: Any, path: str) -> Problems:
    kinds = [k for k in ("bool", "int", "string", "version") if k in (value or {})]
    if len(kinds) != 1:
        return [(path, "Invalid value: exactly one value must be specified")]
    if kinds[0] == "version" and not _SEMVER.match(str(value["version"])):
        return [(path + ".version", "Invalid value: \"%s\": must be a string compatible with semver.org spec 2.0.0"
                 % value["version"])]
    if kinds[0] == "string" and len(str(value["string"])) > 64:
        return [(path + ".string", "Too long: may not be more than 64 bytes")]
    return []


def _device(device: Obj, path: str) -> Problems:
    problems = _label(device.get("name"), path + ".name")
    attributes, capacity = device.get("attributes") or {}, device.get("capacity") or {}
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES:
        problems.append((path, "Invalid value: %d: the total number of attributes and capacities must not exceed %d"
                         % (len(attributes) + len(capacity), MAX_ATTRIBUTES)))
    for name, value in attributes.items():
        problems += _attribute(value, "%s.attributes[%s]" % (path, name))
    for name, value in capacity.items():
        if "value" not in (value or {}):
            problems.append(("%s.capacity[%s].value" % (path, name), "Required value"))
    return problems


def _slice(obj: Obj, old: Optional[Obj]) -> Problems:
    spec = obj.get("spec") or {}
    problems = _subdomain(spec.get("driver"), "spec.driver", 63)
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        problems.append(("spec.pool.name", "Required value"))
    if int(pool.get("resourceSliceCount") or 0) <= 0:
        problems.append(("spec.pool.resourceSliceCount", "Invalid value: %s: must be greater than zero"
                         % pool.get("resourceSliceCount")))
    if int(pool.get("generation") or 0) < 0:
        problems.append(("spec.pool.generation", "Invalid value: %s: must be greater than or equal to zero"
                         % pool.get("generation")))
    chosen = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if not chosen:
        problems.append(("spec", "Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                                 "`perDeviceNodeSelection` is required"))
    elif len(chosen) > 1:
        problems.append(("spec", "Invalid value: \"{%s}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                                 "`perDeviceNodeSelection` is required, but multiple fields are set"
                         % ", ".join("`%s`" % k for k in chosen)))
    devices = spec.get("devices") or []
    if len(devices) > MAX_DEVICES:
        problems.append(("spec.devices", "Too many: %d: must have at most %d items" % (len(devices), MAX_DEVICES)))
    seen: List[str] = []
    for index, device in enumerate(devices):
        problems += _device(device or {}, "spec.devices[%d]" % index)
        if (device or {}).get("name") in seen:
            problems.append(("spec.devices[%d].name" % index, "Duplicate value: \"%s\"" % device.get("name")))
        seen.append((device or {}).get("name"))
    if old is not None:
        for fld in ("driver", "nodeName"):
            if (old.get("spec") or {}).get(fld) != spec.get(fld):
                problems.append(("spec." + fld, "Invalid value: field is immutable"))
    return problems


def _default_exact(request: Obj) -> None:
    request.setdefault("allocationMode", "ExactCount")
    if request["allocationMode"] == "ExactCount":
        request.setdefault("count", 1)


def default_claim_spec(spec: Obj) -> None:
    for request in ((spec or {}).get("devices") or {}).get("requests") or []:
        if isinstance(request, dict):
            if isinstance(request.get("exactly"), dict):
                _default_exact(request["exactly"])
            for sub in request.get("firstAvailable") or []:
                if isinstance(sub, dict):
                    _default_exact(sub)


VALIDATORS: Dict[str, Callable[[Obj, Optional[Obj]], Problems]] = {
    api.DEVICECLASSES: _device_class,
    api.RESOURCESLICES: _slice,
    api.RESOURCECLAIMS: _claim,
    api.RESOURCECLAIMTEMPLATES: _template,
}
DEFAULTERS: Dict[str, Callable[[Obj], None]] = {
    api.RESOURCECLAIMS: lambda obj: default_claim_spec(obj.get("spec") or {}),
    api.RESOURCECLAIMTEMPLATES: lambda obj: default_claim_spec((obj.get("spec") or {}).get("spec") or {}),
}

__all__ = ["DEFAULTERS", "VALIDATORS", "claim_spec_problems", "default_claim_spec"]
