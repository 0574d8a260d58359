# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nested chart values (and other nested mappings) addressed by a key path. Pure, no I/O."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence, Tuple


def get_path(tree: Any, path: Sequence[str]) -> Tuple[bool, Any]:
    """(found, value) of ``path`` in ``tree``; (False, None) when a key is missing or a level is not a mapping."""
    node = tree
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def set_path(tree: Dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Set ``path`` in ``tree`` to ``value``, creating (or replacing by) a dict any level that is not one."""
    node = tree
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


__all__ = ["get_path", "set_path"]
