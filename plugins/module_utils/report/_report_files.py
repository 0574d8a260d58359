# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report files on the controller: validation and the write/remove plan (pure, no I/O)."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

FILE_MODE = 0o644
DIR_MODE = 0o755


def name_problems(files: Any, remove: Any) -> List[str]:
    """What is wrong with the ``files`` mapping and the ``remove`` list (names, not paths)."""
    problems = []
    if not isinstance(files, Mapping):
        return ["files: expected a mapping of file name to text"]
    if not isinstance(remove, (list, tuple)):
        return ["remove: expected a list of file names"]
    for name in list(files) + list(remove):
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            problems.append("%r: expected a plain file name (no directory part)" % (name,))
    for name, text in files.items():
        if not isinstance(text, str):
            problems.append("files[%r]: expected text, got %s" % (name, type(text).__name__))
    both = sorted(set(files) & set(remove))
    if both:
        problems.append("both written and removed: %s" % ", ".join(both))
    return problems


def needs_write(wanted: str, current: Optional[str], mode: Optional[int]) -> bool:
    """``current``/``mode``: what is there (None: missing)."""
    return current is None or current != wanted or mode != FILE_MODE


def file_diff(name: str, wanted: Optional[str], current: Optional[str]) -> Mapping[str, Any]:
    return {"before_header": name, "after_header": name, "before": current or "", "after": wanted or ""}


def summary(written: Sequence[str], removed: Sequence[str], directory_created: bool) -> Tuple[bool, str]:
    changed = bool(written or removed or directory_created)
    parts = (["wrote " + ", ".join(written)] if written else []) + (["removed " + ", ".join(removed)] if removed else [])
    return changed, "; ".join(parts) or "report files up to date"
