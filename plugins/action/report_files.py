# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report_files: the run's report files, written on the controller in this process (no module run)."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, List, Optional

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._report_dir import report_dir_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._host import read_file
from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_files import (
    DIR_MODE,
    FILE_MODE,
    file_diff,
    name_problems,
    needs_write,
    summary,
)


def write_atomically(directory: str, name: str, text: str) -> None:
    handle, temp = tempfile.mkstemp(prefix=".%s." % name, dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text.encode("utf-8"))
        os.chmod(temp, FILE_MODE)
        os.replace(temp, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "files", "remove"))

    def run(self, tmp: Any = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        directory, files, remove = args.get("path"), args.get("files") or {}, args.get("remove") or []
        problems = [p for p in [report_dir_problem(directory, "path")] if p] + name_problems(files, remove)
        if problems:
            return dict(result, failed=True, changed=False, msg="report_files: " + "; ".join(problems))
        try:
            result.update(self.apply(os.path.abspath(directory), files, remove))
        except OSError as exc:
            return dict(result, failed=True, changed=False, msg="report_files: %s: %s" % (directory, exc))
        return result

    def apply(self, directory: str, files: Dict[str, str], remove: List[str]) -> Dict[str, Any]:
        check = self._task.check_mode
        create_dir = bool(files) and not os.path.isdir(directory)
        if create_dir and not check:
            os.makedirs(directory, DIR_MODE)
        written, removed, diffs = [], [], []
        for name in sorted(files):
            current, mode = read_file(os.path.join(directory, name))
            if needs_write(files[name], current, mode):
                written.append(name)
                diffs.append(file_diff(name, files[name], current))
                if not check:
                    write_atomically(directory, name, files[name])
        for name in sorted(remove):
            path = os.path.join(directory, name)
            if os.path.lexists(path):
                removed.append(name)
                diffs.append(file_diff(name, None, read_file(path)[0]))
                if not check:
                    os.unlink(path)
        changed, msg = summary(written, removed, create_dir)
        outcome: Dict[str, Any] = dict(changed=changed, msg=msg, path=directory, written=written, removed=removed)
        if self._task.diff:
            outcome["diff"] = diffs
        return outcome
