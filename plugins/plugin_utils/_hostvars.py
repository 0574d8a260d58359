# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-only helpers over ``hostvars``, shared by the filters and the action plugin."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Iterator, Mapping, TypeVar

Result = TypeVar("Result")


class HostVarsOnce(Mapping[str, Any]):
    """``hostvars`` for one filter call, each host's variables asked of Ansible once.

    Every ``hostvars[host]`` makes ansible-core gather all of that host's variables again
    (``VariableManager.get_vars``: inventory, group and host vars, facts). Filters that looked at a
    host several times (its node name, then its selection, then its taints ...) asked 3,500 times in
    a no-op ``site.yml`` of 50 hosts, 0.4 ms each (docs/benchmarks.md, "Fifth pass"). The views are
    kept for the call only: a later task sees the facts set meanwhile."""

    def __init__(self, hostvars: Mapping[str, Any]) -> None:
        self._hostvars = hostvars
        self._views: Dict[str, Any] = {}

    def __getitem__(self, host: str) -> Any:
        if host not in self._views:
            self._views[host] = self._hostvars[host]
        return self._views[host]

    def __contains__(self, host: object) -> bool:
        return host in self._hostvars

    def __iter__(self) -> Iterator[str]:
        return iter(self._hostvars)

    def __len__(self) -> int:
        return len(self._hostvars)


def once(hostvars: Mapping[str, Any]) -> Mapping[str, Any]:
    """``hostvars`` wrapped in a HostVarsOnce (already wrapped: as it is)."""
    return hostvars if isinstance(hostvars, HostVarsOnce) else HostVarsOnce(hostvars)


def hostvars_once(function: Callable[..., Result]) -> Callable[..., Result]:
    """A filter whose first argument is ``hostvars``: each host's variables read once per call,
    whatever the filter and the helpers it calls ask."""
    @functools.wraps(function)
    def wrapper(hostvars: Mapping[str, Any], *args: Any, **kwargs: Any) -> Result:
        return function(once(hostvars), *args, **kwargs)
    return wrapper


def node_name(host: str, host_vars: Mapping[str, Any]) -> str:
    """The Kubernetes node of an inventory host: gpufleet_node_name, else the host name."""
    return host_vars.get("gpufleet_node_name") or host
