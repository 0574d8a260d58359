"""Fault injection for the virtual cluster (lab only).

Two kinds of faults live in one registry:

- request faults, applied by the REST layer to the next ``count`` requests that match ``verb``
  (Kubernetes verb: get, list, watch, create, update, patch, delete, or ``*``) and ``resource``
  (``pods``, ``pods/eviction``, ``v1/pods``, ``nvidia.com/v1/clusterpolicies`` ... or ``*``),
  optionally ``namespace``/``name``:
    ``error``    answer ``status`` (default 500) with a Status body,
    ``conflict`` answer 409 Conflict (the object has been modified),
    ``hang``     hold the request ``seconds`` (default 3600) and then drop the connection with
                 no answer: the client sees a timeout,
    ``delay``    wait ``seconds`` and then serve the request normally.
- named conditions for controllers, e.g. ``clusterpolicy-never-ready`` or ``mig-manager-fails``:
  ``faults.active(name)`` returns the Fault (its ``params`` dict carries options) or ``None``.
  A named condition with a ``count`` is used up by ``faults.consume(name)``.

In the server process the module-level registry is the one the REST layer and the controllers
share. From outside (tests, CLI) use ``add_remote(lab_dir, ...)`` / ``clear_remote(lab_dir)``,
which talk to ``POST /lab/faults`` and ``DELETE /lab/faults`` of the running server.
"""

from __future__ import annotations

import argparse
import itertools
import json
import ssl
import sys
import threading
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

KINDS = ("error", "conflict", "hang", "delay", "named")


@dataclass
class Fault:
    id: int
    kind: str
    verb: str = "*"
    resource: str = "*"
    namespace: Optional[str] = None
    name: Optional[str] = None
    count: Optional[int] = 1  # None: until cleared
    status: int = 500
    seconds: float = 3600.0
    condition: Optional[str] = None  # for kind "named"
    params: Dict[str, Any] = field(default_factory=dict)
    hits: int = 0

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


class FaultError(ValueError):
    pass


class FaultRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: List[Fault] = []
        self._ids = itertools.count(1)

    def add(self, kind: str, verb: str = "*", resource: str = "*",
            namespace: Optional[str] = None, name: Optional[str] = None,
            count: Optional[int] = 1, status: int = 500, seconds: float = 3600.0,
            condition: Optional[str] = None, params: Optional[Dict[str, Any]] = None) -> Fault:
        if kind not in KINDS:
            raise FaultError("unknown fault kind %r; expected one of %s" % (kind, ", ".join(KINDS)))
        if kind == "named" and not condition:
            raise FaultError("a named fault needs 'condition' (e.g. clusterpolicy-never-ready)")
        if count is not None and (not isinstance(count, int) or count < 1):
            raise FaultError("count must be a positive integer or null (until cleared)")
        if kind == "error" and not (400 <= int(status) <= 599):
            raise FaultError("status must be an HTTP error code (400-599)")
        with self._lock:
            fault = Fault(next(self._ids), kind, verb or "*", resource or "*", namespace, name,
                          count, int(status), float(seconds), condition, dict(params or {}))
            self._faults.append(fault)
            return fault

    def clear(self, fault_id: Optional[int] = None, condition: Optional[str] = None) -> int:
        with self._lock:
            before = len(self._faults)
            self._faults = [f for f in self._faults
                            if not ((fault_id is None and condition is None)
                                    or f.id == fault_id
                                    or (condition is not None and f.condition == condition))]
            return before - len(self._faults)

    def list(self) -> List[Dict[str, Any]]:
        with self._lock:
            return [f.as_dict() for f in self._faults]

    @staticmethod
    def _resource_matches(pattern: str, resource: str, resource_key: str) -> bool:
        if pattern == "*":
            return True
        # resource: "pods" or "pods/eviction"; resource_key: "v1/pods" or "v1/pods/eviction"
        return pattern in (resource, resource_key)

    def match_request(self, verb: str, resource: str, resource_key: str,
                      namespace: Optional[str], name: Optional[str]) -> Optional[Fault]:
        """The first request fault matching, with one use consumed (None when none)."""
        with self._lock:
            for fault in self._faults:
                if fault.kind == "named":
                    continue
                if fault.verb not in ("*", verb):
                    continue
                if not self._resource_matches(fault.resource, resource, resource_key):
                    continue
                if fault.namespace is not None and fault.namespace != namespace:
                    continue
                if fault.name is not None and fault.name != name:
                    continue
                return self._use(fault)
            return None

    def _use(self, fault: Fault) -> Fault:
        fault.hits += 1
        if fault.count is not None:
            fault.count -= 1
            if fault.count <= 0:
                self._faults.remove(fault)
        return fault

    def active(self, condition: str) -> Optional[Fault]:
        with self._lock:
            for fault in self._faults:
                if fault.kind == "named" and fault.condition == condition:
                    return fault
            return None

    def consume(self, condition: str) -> Optional[Fault]:
        with self._lock:
            for fault in self._faults:
                if fault.kind == "named" and fault.condition == condition:
                    return self._use(fault)
            return None


REGISTRY = FaultRegistry()


def active(condition: str) -> Optional[Fault]:
    """Is the named lab condition switched on (in this server process)?"""
    return REGISTRY.active(condition)


def consume(condition: str) -> Optional[Fault]:
    return REGISTRY.consume(condition)


# ----------------------------------------------------------- remote (CLI / tests)

def lab_call(lab_dir: str, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
    """A JSON request to the lab server of lab_dir (loopback, its own CA)."""
    with open("%s/cluster.json" % lab_dir, encoding="utf-8") as handle:
        info = json.load(handle)
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(info["url"] + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=info["ca_file"])
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return json.loads(response.read().decode())


def add_remote(lab_dir: str, kind: str, **spec: Any) -> Dict[str, Any]:
    """Add a fault to the server of lab_dir; returns the fault as stored (with its id)."""
    spec["kind"] = kind
    return lab_call(lab_dir, "POST", "/lab/faults", spec)


def list_remote(lab_dir: str) -> List[Dict[str, Any]]:
    return lab_call(lab_dir, "GET", "/lab/faults")["items"]


def clear_remote(lab_dir: str, fault_id: Optional[int] = None,
                 condition: Optional[str] = None) -> int:
    query = ""
    if fault_id is not None:
        query = "?id=%d" % fault_id
    elif condition is not None:
        query = "?condition=%s" % urllib.parse.quote(condition)
    return lab_call(lab_dir, "DELETE", "/lab/faults" + query)["removed"]


# ------------------------------------------------------------------------- CLI

def main(argv: Optional[List[str]] = None) -> int:
    """``python -m gpulab.cluster.faults --dir DIR add|list|clear ...`` (also usable as the body
    of a ``gpulab faults`` subcommand: pass the remaining argv)."""
    parser = argparse.ArgumentParser(prog="python -m gpulab.cluster.faults",
                                     description="Lab-only fault injection into the virtual "
                                                 "cluster started with `gpulab up --cluster`.")
    parser.add_argument("--dir", required=True, help="lab directory (has cluster.json)")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add a fault")
    add.add_argument("kind", choices=KINDS)
    add.add_argument("--verb", default="*", help="get, list, watch, create, update, patch, "
                                                 "delete, deletecollection or *")
    add.add_argument("--resource", default="*", help="e.g. pods, pods/eviction, v1/nodes, "
                                                     "nvidia.com/v1/clusterpolicies, *")
    add.add_argument("--namespace")
    add.add_argument("--name")
    add.add_argument("--count", type=int, default=1, help="requests to hit (0: until cleared)")
    add.add_argument("--status", type=int, default=500, help="HTTP status for kind 'error'")
    add.add_argument("--seconds", type=float, default=3600.0, help="for 'hang' and 'delay'")
    add.add_argument("--condition", help="for kind 'named', e.g. clusterpolicy-never-ready")
    add.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="extra parameter of a named condition (repeatable)")
    commands.add_parser("list", help="list active faults")
    clear = commands.add_parser("clear", help="remove faults (all by default)")
    clear.add_argument("--id", type=int)
    clear.add_argument("--condition")
    args = parser.parse_args(argv)
    try:
        if args.command == "add":
            params = {}
            for item in args.param:
                key, sep, value = item.partition("=")
                if not sep:
                    parser.error("--param needs KEY=VALUE, got %r" % item)
                params[key] = value
            fault = add_remote(args.dir, args.kind, verb=args.verb, resource=args.resource,
                               namespace=args.namespace, name=args.name,
                               count=args.count or None, status=args.status,
                               seconds=args.seconds, condition=args.condition, params=params)
            print(json.dumps(fault))
        elif args.command == "list":
            print(json.dumps(list_remote(args.dir), indent=1))
        else:
            print(json.dumps({"removed": clear_remote(args.dir, args.id, args.condition)}))
    except OSError as exc:
        body = getattr(exc, "read", None)
        detail = body().decode(errors="replace") if callable(body) else str(exc)
        print("gpulab faults: %s" % detail, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
