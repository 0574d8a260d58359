# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTML fleet report (issue 24): ``render_html(report)`` turns the report data - the dict the
JSON report is written from, with optional ``rollout`` (the rollout summary) and ``drift`` (rows of
node, what, planned, found, since, converge) - into one self-contained page. Pure, no I/O; Jinja2
(already a dependency of ansible-core) renders the template of ``_report_template``."""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_template import CSS, PAGE
from ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_view import view

try:
    import jinja2

    HAS_JINJA2 = True
except ImportError:  # pragma: no cover - ansible-core depends on Jinja2
    jinja2 = None
    HAS_JINJA2 = False

REPORT_NAME = "fleet-report.html"


def fig(value: Any) -> str:
    """A figure as shown: integers as they are, from 1000 on rounded to a whole number, others with
    four significant digits (the lab's CPU backend measures about 1e-6 TFLOP/s)."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value).lower()
    if isinstance(value, float):
        if abs(value) >= 1000 and abs(value) < 1e15:
            return str(int(round(value)))
        return str(int(value)) if value.is_integer() else "%.4g" % value
    return str(value)


_TEMPLATE = None


def page_template() -> Any:
    """The page's compiled Jinja template, compiled once per process (60 ms): the controller's main
    process compiles it when it loads the collection (plugin_utils/_preload.py), and the workers that
    render a report inherit it."""
    global _TEMPLATE  # compiled once per process
    if _TEMPLATE is None:
        env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                 undefined=jinja2.ChainableUndefined)
        env.filters["fig"] = fig
        _TEMPLATE = env.from_string(PAGE)
    return _TEMPLATE


def render_html(report: Mapping[str, Any]) -> str:
    """The page for ``report`` (a verification report, a rollout summary under ``rollout``, drift
    rows under ``drift``, any of them; ``title`` and ``generated`` are shown when given)."""
    if not HAS_JINJA2:
        raise RuntimeError("the HTML report needs the Jinja2 Python library")
    if not isinstance(report, Mapping):
        raise TypeError("the report data must be a mapping, got %s" % type(report).__name__)
    return page_template().render(v=view(report), css=CSS)
