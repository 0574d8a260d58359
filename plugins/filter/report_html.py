# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTML fleet report of a run, from the same data as its JSON report."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_html import render_html

DOCUMENTATION = r"""
name: report_html
short_description: The HTML fleet report (fleet-report.html) from a run's report data
version_added: 0.3.0
description:
  - One self-contained page (inline CSS and SVG, no script, no URL, readable printed) - the verdict, a C(drift)
    section when the data has one, the failures, the fleet at a glance (nodes, GPUs, schedulable units before
    and after sharing per resource), the rollout summary, and per node its GPUs with their MIG instances on
    the slice grid (profile, device UUID), its sharing, planned against advertised per resource, the
    verification pods and the sharing probe's figures as small charts.
  - The page shows the figures of the data it is given and nothing else; C(docs/report.md) describes it.
options:
  _input:
    description:
      - The report data - the verification report (RV(gpufleet.sharing.gpu_verify#module:report)), with
        optionally C(rollout) (the rollout summary, C(run), C(nodes), C(stopped_early)), C(drift) (rows with
        C(node), C(what), C(planned), C(found), C(since), C(converge)), C(title) and C(generated). Any part may be missing.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write the HTML report next to the JSON
  gpufleet.sharing.report_files:
    path: "{{ playbook_dir }}/gpufleet-reports"
    files:
      gpufleet-verify.json: "{{ verify_result.report | to_nice_json }}"
      fleet-report.html: "{{ verify_result.report | gpufleet.sharing.report_html }}"
"""

RETURN = r"""
_value:
  description: The HTML page.
  type: str
"""


def report_html(report: Mapping[str, Any]) -> str:
    if not isinstance(report, Mapping):
        raise AnsibleFilterError("report_html: expected the report data (a mapping), got %s" % type(report).__name__)
    try:
        return render_html(report)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("report_html: the report data is not a report: %s" % exc)


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"report_html": report_html}
