"""Filters and the action plugin share controller-only code through ``plugins/plugin_utils`` (issue 20,
as community.general does), never by importing another filter or action plugin."""

from __future__ import annotations

import ast
import os

from test_code_shape import PLUGINS, parsed, python_files, report, where

OTHER_PLUGINS = ("ansible_collections.gpufleet.sharing.plugins.filter", "ansible_collections.gpufleet.sharing.plugins.action")


def test_filters_and_actions_import_no_other_plugin() -> None:
    offenders = [where(path, node.lineno) + " imports " + node.module
                 for folder in ("filter", "action") for path in python_files(os.path.join(PLUGINS, folder))
                 for node in ast.walk(parsed(path))
                 if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(OTHER_PLUGINS)]
    report(offenders, "filter/action plugins importing another plugin (share it through plugins/plugin_utils)")


def test_plugin_utils_is_controller_only() -> None:
    """Modules run on the targets, where plugin_utils is not shipped: no module or module_utils imports it."""
    offenders = [where(path, node.lineno) for folder in ("modules", "module_utils")
                 for path in python_files(os.path.join(PLUGINS, folder)) for node in ast.walk(parsed(path))
                 if isinstance(node, ast.ImportFrom) and ".plugin_utils" in (node.module or "")]
    report(offenders, "modules or module_utils importing plugin_utils")
