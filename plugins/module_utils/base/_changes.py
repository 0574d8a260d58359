# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one diff builder: ``Changes`` (a module run's changed flag and diff entries) and ``diff_entry``.

Pure. ``_module.GpuFleetModule.changes`` is a ``Changes``; planners that return diff entries for a
module to report (``_mig_apply``, ``_fleet_plan``, ``_report_files``) build each with ``diff_entry``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional


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
    return {} if value is None else value
