# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Results of pure functions kept per distinct input, so that planning a fleet does once per input
what does not depend on the host (a MIG layout per GPU model, a host group's mig_configs, a catalog
lookup): issue 26 item 3. Pure, no I/O; the kept results are immutable or copied by the caller."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Callable, Dict, Generic, Optional, TypeVar

T = TypeVar("T")


def frozen(value: Any) -> Optional[Hashable]:
    """A hashable key equal for equal inputs of the same types (a dict and its items in any order, a list
    and a tuple told apart, True and 1 told apart); None when ``value`` holds something else."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return (type(value).__name__, value)
    if isinstance(value, dict):
        items = [(frozen(k), frozen(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in items):
            return None
        return ("dict", frozenset(items))
    if isinstance(value, (list, tuple)):
        parts = tuple(frozen(v) for v in value)
        return None if any(p is None for p in parts) else (type(value).__name__, parts)
    return None


class Memo(Generic[T]):
    """A bounded table of results (emptied when it holds ``limit``: the inputs of one fleet are few)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._table: Dict[Hashable, T] = {}

    def get(self, key: Optional[Hashable], compute: Callable[[], T]) -> T:
        """The kept result for ``key``, else ``compute()`` (kept unless ``key`` is None or it raises)."""
        if key is None:
            return compute()
        if key in self._table:
            return self._table[key]
        result = compute()
        if len(self._table) >= self.limit:
            self._table.clear()
        self._table[key] = result
        return result

    def clear(self) -> None:
        self._table.clear()
