"""CEL device selectors, evaluated by a real CEL implementation: cel-python (``import celpy``,
version pinned in requirements-dev.txt), not by the lab.

The environment follows Kubernetes' DRA CEL environment (``staging/src/k8s.io/dynamic-resource-
allocation/cel/compile.go``, documented at https://kubernetes.io/docs/concepts/scheduling-eviction/
dynamic-resource-allocation/): one variable ``device`` with ``driver``, ``attributes`` and
``capacity`` maps keyed by domain (an unqualified attribute name belongs to the driver's domain),
``allowMultipleAllocations``; a missing domain is an empty map, a missing attribute in it is a
runtime error, which aborts the allocation (the API reference of ``CELDeviceSelector``: "If an
unknown prefix is used as a lookup in either device.attributes or device.capacity, an empty map will
be returned. Any reference to an unknown field will cause an evaluation error and allocation to
abort."). Version attributes are semver values (``compareTo``, ``isGreaterThan``,
``isLessThan``, ``semver('580.0.0')``), capacities quantities (``compareTo``, ``isGreaterThan``,
``isLessThan``, ``asInteger``, ``quantity('10Gi')``). A selector must evaluate to a bool.
Not modelled: the cost limits and the ``isSemver``/``isQuantity`` helpers.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Dict, Mapping, Tuple

import celpy
from celpy import celtypes

from gpulab.cluster.scheduler import parse_quantity


class CelError(Exception):
    """A selector that does not compile, or fails at run time."""


class SemVer(celtypes.StringType):
    """A version attribute: compared as semantic versions."""

    @property
    def parts(self) -> Tuple[int, ...]:
        match = re.match(r"^(\d+)\.(\d+)\.(\d+)", str(self))
        return tuple(int(x) for x in match.groups()) if match else (0, 0, 0)


def _key(value: Any) -> Any:
    if isinstance(value, SemVer):
        return value.parts
    return int(value) if not isinstance(value, celtypes.DoubleType) else float(value)


def _compare(left: Any, right: Any) -> celtypes.IntType:
    a, b = _key(left), _key(right)
    return celtypes.IntType((a > b) - (a < b))


FUNCTIONS = {
    "quantity": lambda text: celtypes.IntType(int(parse_quantity(str(text)))),
    "semver": lambda text: SemVer(str(text)),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "asInteger": lambda a: celtypes.IntType(int(a)),
    "major": lambda a: celtypes.IntType(a.parts[0]),
    "minor": lambda a: celtypes.IntType(a.parts[1]),
    "patch": lambda a: celtypes.IntType(a.parts[2]),
}


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
    except Exception as exc:  # celpy.CELParseError and friends
        raise CelError("compilation failed: %s" % str(exc).strip().splitlines()[0]) from None
    return env.program(ast, functions=FUNCTIONS)


def compile_error(expression: str) -> str:
    """'' when `expression` compiles, else why not."""
    try:
        _program(expression)
    except CelError as exc:
        return str(exc)
    return ""


def _attribute_value(value: Mapping[str, Any]) -> Any:
    if "bool" in value:
        return celtypes.BoolType(bool(value["bool"]))
    if "int" in value:
        return celtypes.IntType(int(value["int"]))
    if "version" in value:
        return SemVer(str(value["version"]))
    return celtypes.StringType(str(value.get("string", "")))


def _split(driver: str, name: str) -> Tuple[str, str]:
    return tuple(name.rsplit("/", 1)) if "/" in name else (driver, name)  # type: ignore[return-value]


class _Domains(celtypes.MapType):
    """attributes/capacity: an unknown domain is an empty map (like Kubernetes' mapper)."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


def device_activation(driver: str, device: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``device`` variable for one device of a ResourceSlice."""
    attributes: Dict[str, Dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, short = _split(driver, name)
        attributes.setdefault(domain, {})[celtypes.StringType(short)] = _attribute_value(value or {})
    capacity: Dict[str, Dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, short = _split(driver, name)
        capacity.setdefault(domain, {})[celtypes.StringType(short)] = celtypes.IntType(
            int(parse_quantity((value or {}).get("value", 0))))
    variable = celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(driver),
        celtypes.StringType("attributes"): _Domains({celtypes.StringType(d): celtypes.MapType(v) for d, v in attributes.items()}),
        celtypes.StringType("capacity"): _Domains({celtypes.StringType(d): celtypes.MapType(v) for d, v in capacity.items()}),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(bool(device.get("allowMultipleAllocations"))),
    })
    return {"device": variable}


def matches(expression: str, activation: Mapping[str, Any]) -> bool:
    """Evaluate a selector for one device; CelError on a compile or run-time error."""
    program = _program(expression)
    try:
        result = program.evaluate(dict(activation))
    except Exception as exc:  # celpy.evaluation.CELEvalError
        raise CelError("CEL runtime error: %s" % (exc.args[0] if exc.args else exc)) from None
    if isinstance(result, Exception):
        raise CelError("CEL runtime error: %s" % (result.args[0] if result.args else result))
    if not isinstance(result, celtypes.BoolType):
        raise CelError("CEL result must be a bool, got %s" % type(result).__name__)
    return bool(result)


__all__ = ["CelError", "FUNCTIONS", "SemVer", "compile_error", "device_activation", "matches"]
