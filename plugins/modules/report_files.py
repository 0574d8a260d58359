#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Documentation only: the work is done by the action plugin of the same name (plugins/action),
# on the controller, in the task's own process.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: report_files
short_description: Write (and remove) a run's report files on the controller in one task
version_added: 0.2.0
description:
  - Writes each file of O(files) into the directory O(path) on the controller, creating the directory
    (mode C(0755)) when it is missing. A file is replaced atomically (a temporary file in the same
    directory, then renamed), mode C(0644), and only when its text or mode differs.
  - Removes the files named in O(remove) that exist.
  - An action plugin - it runs in the task's own process on the controller, with no module process
    and no connection to the host - so a run's reports cost one task, not one module run per file.
  - The file contents are not returned; with C(--diff) they are shown, so do not put secrets in reports.
options:
  path:
    description: The report directory on the controller (a relative path is taken from the current directory).
    type: path
    required: true
  files:
    description: File name (no directory part) to its text.
    type: dict
    default: {}
  remove:
    description: File names (no directory part) to remove when they exist.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reports what would be written or removed, and writes nothing.
  diff_mode:
    support: full
    description: Shows each file written or removed, before and after.
  platform:
    platforms: posix
    support: full
    description: Runs on the controller (an action plugin).
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Write the reports
  gpufleet.sharing.report_files:
    path: "{{ playbook_dir }}/gpufleet-reports"
    files:
      summary.json: "{{ summary | to_nice_json }}"
      summary.txt: "{{ table }}"
"""

RETURN = r"""
written:
  description: The names of the files written (or that would be, in check mode).
  returned: success
  type: list
  elements: str
removed:
  description: The names of the files removed (or that would be, in check mode).
  returned: success
  type: list
  elements: str
path:
  description: The report directory.
  returned: success
  type: str
"""
