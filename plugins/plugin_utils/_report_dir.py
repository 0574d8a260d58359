# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the report directory can be written, on the controller: one check for the preflight of site.yml
(before anything changes) and the report_files action (before it writes)."""

from __future__ import annotations

import os
from typing import Any, Optional


def report_dir_problem(path: Any, option: str = "gpufleet_report_dir") -> Optional[str]:
    """Why the reports cannot be written under ``path`` (None when they can): not a non-empty path, an existing
    thing that is not a directory, a directory this user cannot write, or a missing one whose nearest existing
    parent is not a writable directory (report_files creates the missing levels). Nothing is created."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        return "%s %r: must be a non-empty path of a directory on the controller" % (option, path)
    target = os.path.abspath(path)
    if os.path.lexists(target) and not os.path.isdir(target):
        return "%s %r exists and is not a directory" % (option, path)
    existing = target
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return "%s %r cannot be created: %s is not a directory" % (option, path, existing)
    if not os.access(existing, os.W_OK | os.X_OK):
        return "%s %r: %s is not writable by this user" % (option, path, existing)
    return None
