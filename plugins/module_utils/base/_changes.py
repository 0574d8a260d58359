# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one diff builder: ``Changes`` (a module run's changed flag and diff entries) and ``diff_entry``.

Pure. ``_module.GpuFleetModule.changes`` is a ``Changes``; planners that return diff entries for a
module to report (``_mig_apply``, ``_fleet_plan``, ``_report_files``) build each with ``diff_entry``.

Each side of an entry is text or a mapping, as Ansible's callbacks need: ansible-core's
``CallbackBase._get_diff`` (lib/ansible/plugins/callback/__init__.py, 2.19) serialises a mapping
(JSON or YAML, the callback's ``result_format``), takes None as empty, and calls ``splitlines`` on
anything else, so a list (a node's taints), a number or a bool broke the default callback's diff
(``'list' object has no attribute 'splitlines'``, issue 43 #7). Such a value is given as the JSON
text the callback prints for a mapping (``for_callbacks``); ``GpuFleetModule`` passes every
module's final ``diff`` through it.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional


class Changes:
    """The changed flag and the diff entries of one module run."""

    def __init__(self) -> None:
        self.changed = False
        self.entries: List[Dict[str, Any]] = []

    def record(self, what: str, before: Any, after: Any, changed: Optional[bool] = None) -> bool:
        """Note one object's before/after; ``changed`` defaults to ``before != after``."""
        is_changed = (before != after) if changed is None else bool(changed)
        self.changed = self.changed or is_changed
        if is_changed:
            self.entries.append(diff_entry(what, before, after))
        return is_changed

    def mark(self) -> None:
        """Something changed that has no before/after of its own (e.g. a pod restarted)."""
        self.changed = True

    def diff(self) -> Any:
        if len(self.entries) == 1:
            return self.entries[0]
        return self.entries


def diff_entry(what: str, before: Any, after: Any) -> Dict[str, Any]:
    """One entry of a module's ``diff``: ``what`` heads both sides; None is shown as ``{}``."""
    return {"before_header": what, "after_header": what, "before": _diffable(before), "after": _diffable(after)}


def _diffable(value: Any) -> Any:
    if value is None:
        return {}
    if isinstance(value, (str, Mapping)):
        return value
    return json.dumps(value, sort_keys=True, indent=4, separators=(",", ": "), default=str) + "\n"


def for_callbacks(diff: Any) -> Any:
    """``diff`` (one entry or a list of them) with each ``before``/``after`` text or a mapping."""
    entries = diff if isinstance(diff, list) else [diff]
    fixed = []
    for entry in entries:
        if isinstance(entry, Mapping):
            entry = dict(entry)
            for side in ("before", "after"):
                if side in entry and entry[side] is not None:
                    entry[side] = _diffable(entry[side])
        fixed.append(entry)
    return fixed if isinstance(diff, list) else fixed[0]
