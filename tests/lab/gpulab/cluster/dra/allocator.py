"""Allocation of one ResourceClaim on one node (pure), the way kube-scheduler's DRA plugin does
with structured parameters (kubernetes ``staging/src/k8s.io/dynamic-resource-allocation/
structured/allocator.go``, v1.34; https://kubernetes.io/docs/concepts/scheduling-eviction/
dynamic-resource-allocation/):

* a device matches a request when every selector of its DeviceClass and then every selector of
  the request evaluates to true (CEL, ``cel.py``); a run-time error is an allocation error;
* ``allocationMode: ExactCount`` takes ``count`` devices, ``All`` every matching device (at least
  one, and none of them allocated to another claim); ``firstAvailable`` tries its subrequests in order (result request ``<request>/<sub>``);
* ``constraints[].matchAttribute``: all devices of the named requests (all requests when none are
  named) have the attribute, with one value;
* a device already allocated to another claim is not a candidate (no ``allowMultipleAllocations``
  or consumable capacity in the lab); devices are tried in slice order, then by name, with
  backtracking, so the first allocation in that order wins.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from gpulab.cluster.dra import cel

Obj = Dict[str, Any]
Candidate = Tuple[str, str, Obj]  # driver, pool, device
DeviceKey = Tuple[str, str, str]  # driver, pool, device name


class Unallocatable(Exception):
    """The claim cannot be allocated on this node (message as kube-scheduler words it)."""


def key_of(candidate: Candidate) -> DeviceKey:
    return candidate[0], candidate[1], candidate[2]["name"]


def attribute(candidate: Candidate, qualified: str) -> Optional[Tuple[str, Any]]:
    driver, _pool, device = candidate
    domain, _sep, short = qualified.rpartition("/")
    attributes = device.get("attributes") or {}
    value = attributes.get(qualified)
    if value is None and domain == driver:
        value = attributes.get(short)
    if not value:
        return None
    kind = next(iter(value))
    return kind, value[kind]


def _selects(expressions: Iterable[str], candidate: Candidate) -> bool:
    activation = cel.device_activation(candidate[0], candidate[2])
    for expression in expressions:
        try:
            if not cel.matches(expression, activation):
                return False
        except cel.CelError as exc:
            raise Unallocatable("%s (device %s, expression %s)" % (exc, candidate[2]["name"], expression)) from None
    return True


def _expressions(selectors: Any) -> List[str]:
    return [str(((s or {}).get("cel") or {}).get("expression", "")) for s in selectors or []]


def _options(request: Obj) -> List[Tuple[str, Obj]]:
    if request.get("exactly"):
        return [(request["name"], request["exactly"])]
    return [("%s/%s" % (request["name"], sub.get("name")), sub) for sub in request.get("firstAvailable") or []]


class _Search:
    def __init__(self, spec: Obj, classes: Mapping[str, Obj], candidates: Sequence[Candidate], in_use: Set[DeviceKey]):
        devices = (spec or {}).get("devices") or {}
        self.requests: List[Obj] = list(devices.get("requests") or [])
        self.constraints: List[Obj] = list(devices.get("constraints") or [])
        self.classes = classes
        self.in_use = in_use
        self.candidates = list(candidates)
        self.taken: List[Tuple[str, Candidate]] = []

    def matching(self, option: Obj) -> List[Candidate]:
        name = option.get("deviceClassName", "")
        device_class = self.classes.get(name)
        if device_class is None:
            raise Unallocatable('device class %s does not exist' % name)
        class_exprs = _expressions((device_class.get("spec") or {}).get("selectors"))
        request_exprs = _expressions(option.get("selectors"))
        return [c for c in self.candidates if _selects(class_exprs, c) and _selects(request_exprs, c)]

    def _fits(self, result_name: str, candidate: Candidate) -> bool:
        parent = result_name.split("/")[0]
        for constraint in self.constraints:
            names = constraint.get("requests") or []
            if names and result_name not in names and parent not in names:
                continue
            wanted = attribute(candidate, constraint.get("matchAttribute", ""))
            if wanted is None:
                return False
            for other_name, other in self.taken:
                if names and other_name not in names and other_name.split("/")[0] not in names:
                    continue
                if attribute(other, constraint["matchAttribute"]) != wanted:
                    return False
        return True

    def solve(self, index: int) -> bool:
        if index == len(self.requests):
            return True
        for result_name, option in _options(self.requests[index]):
            matching = self.matching(option)
            busy = self.in_use | {key_of(t) for _n, t in self.taken}
            found = [c for c in matching if key_of(c) not in busy]
            if option.get("allocationMode", "ExactCount") == "All":
                # All: every matching device, so none of them may be allocated elsewhere.
                if found and len(found) == len(matching) and self._take_all(result_name, found) and self.solve(index + 1):
                    return True
                self._drop(result_name)
                continue
            if self._pick(result_name, found, int(option.get("count", 1) or 1), 0, lambda: self.solve(index + 1)):
                return True
            self._drop(result_name)
        return False

    def _take_all(self, result_name: str, found: List[Candidate]) -> bool:
        for candidate in found:
            if not self._fits(result_name, candidate):
                return False
            self.taken.append((result_name, candidate))
        return True

    def _pick(self, result_name: str, found: List[Candidate], count: int, start: int, rest: Callable[[], bool]) -> bool:
        """Choose `count` more of `found` (from `start` on) so that `rest` (the later requests) succeeds."""
        if count == 0:
            return rest()
        for position in range(start, len(found)):
            candidate = found[position]
            if not self._fits(result_name, candidate):
                continue
            self.taken.append((result_name, candidate))
            if self._pick(result_name, found, count - 1, position + 1, rest):
                return True
            self.taken = [(n, c) for n, c in self.taken if not (n == result_name and c is candidate)]
        return False

    def _drop(self, result_name: str) -> None:
        self.taken = [(n, c) for n, c in self.taken if n != result_name]


def allocate(spec: Obj, classes: Mapping[str, Obj], candidates: Sequence[Candidate],
             in_use: Set[DeviceKey]) -> List[Obj]:
    """``status.allocation.devices.results`` for the claim `spec`, or Unallocatable."""
    search = _Search(spec, classes, candidates, in_use)
    if not search.solve(0):
        raise Unallocatable("cannot allocate all claims")
    return [{"request": name, "driver": c[0], "pool": c[1], "device": c[2]["name"]} for name, c in search.taken]


def node_candidates(slices_of_node: Sequence[Obj]) -> List[Candidate]:
    """Devices of the slices published for one node, in slice order (complete pools only)."""
    found: List[Candidate] = []
    for obj in sorted(slices_of_node, key=lambda s: s["metadata"].get("creationTimestamp", "")):
        spec = obj.get("spec") or {}
        for device in spec.get("devices") or []:
            found.append((spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), device))
    return found


__all__ = ["Candidate", "DeviceKey", "Unallocatable", "allocate", "attribute", "key_of", "node_candidates"]
