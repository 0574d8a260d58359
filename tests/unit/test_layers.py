# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The layers of ``plugins/module_utils``: one folder per layer, stacked in one order.

A file may import from its own layer and from the layers below it, never from a layer above: the
order below is the one ``docs/architecture.md`` draws. Every file is listed on that page.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Dict, List, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
ARCHITECTURE = os.path.join(ROOT, "docs", "architecture.md")
PREFIX = "ansible_collections.gpufleet.sharing.plugins.module_utils."

# lowest first
LAYERS = ("base", "k8s", "gpu", "mig", "operator", "sharing", "proof", "fleet", "quota", "drift", "report", "run")
RANK = {name: index for index, name in enumerate(LAYERS)}


def layer_files() -> List[Tuple[str, str]]:
    """(layer, path) of every Python file under module_utils."""
    found = []
    for dirpath, _dirs, files in os.walk(MODULE_UTILS):
        for name in sorted(files):
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, name), MODULE_UTILS)
                found.append((rel.split(os.sep)[0] if os.sep in rel else "", os.path.join(dirpath, name)))
    return sorted(found)


def imported_layers(path: str) -> List[Tuple[int, str]]:
    """(line, layer) of every module_utils import in the file."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name.startswith(PREFIX):
                found.append((node.lineno, name[len(PREFIX):].split(".")[0]))
    return found


def upward_imports(files: List[Tuple[str, str]]) -> List[str]:
    offenders = []
    for layer, path in files:
        for line, target in imported_layers(path):
            if target not in RANK:
                offenders.append("%s:%d imports module_utils.%s, which is no layer" % (os.path.relpath(path, ROOT), line, target))
            elif RANK[target] > RANK[layer]:
                offenders.append("%s:%d (layer %s) imports from the higher layer %s" % (
                    os.path.relpath(path, ROOT), line, layer, target))
    return offenders


def test_every_file_is_in_a_layer_folder() -> None:
    stray = [os.path.relpath(p, ROOT) for layer, p in layer_files() if layer not in RANK]
    assert not stray, "module_utils files outside the layer folders %s: %s" % (", ".join(LAYERS), stray)


def test_every_layer_folder_is_known() -> None:
    folders = {d for d in os.listdir(MODULE_UTILS) if os.path.isdir(os.path.join(MODULE_UTILS, d)) and d != "__pycache__"}
    assert folders == set(LAYERS), "layer folders %s, expected %s (add a new one to LAYERS in its place)" % (
        sorted(folders), list(LAYERS))


def test_no_import_from_a_higher_layer() -> None:
    offenders = upward_imports([(l, p) for l, p in layer_files() if l in RANK])
    assert not offenders, "\n".join(offenders)


def test_the_checker_sees_an_upward_import(tmp_path) -> None:
    fake = tmp_path / "_low.py"
    fake.write_text("from %sreport._report_html import render_html\n" % PREFIX)
    assert upward_imports([("k8s", str(fake))]) == [
        "%s:1 (layer k8s) imports from the higher layer report" % os.path.relpath(str(fake), ROOT)]


def architecture_rows() -> Dict[str, str]:
    """layer -> the text of its row in docs/architecture.md's layer table."""
    rows = {}
    with open(ARCHITECTURE, encoding="utf-8") as handle:
        for line in handle:
            match = re.match(r"\|\s*`(\w+)/`", line)
            if match:
                rows[match.group(1)] = line
    return rows


@pytest.mark.parametrize("layer", LAYERS)
def test_architecture_lists_every_file_under_its_layer(layer: str) -> None:
    rows = architecture_rows()
    assert layer in rows, "docs/architecture.md has no row for the layer `%s/`" % layer
    names = [os.path.basename(p)[:-3] for l, p in layer_files() if l == layer and not p.endswith("__init__.py")]
    missing = [n for n in names if not re.search(r"`%s`" % re.escape(n), rows[layer])]
    assert not missing, "docs/architecture.md's `%s/` row does not list %s" % (layer, missing)
