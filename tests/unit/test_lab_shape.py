"""The lab's shape (issue 20 item 6): imports at the top, one ``sys.path`` set-up, one prerequisites marker.

Pure ``ast`` checks over ``tests/lab``; each lists every offender as ``path:line`` at once.
"""

from __future__ import annotations

import ast
import os
from typing import List

import pytest

from test_code_shape import REPO, functions, parsed, python_files, report, where

LAB_ROOT = os.path.join(REPO, "tests", "lab")
LAB_TESTS = os.path.join(LAB_ROOT, "tests")
CONFTEST = os.path.join(LAB_TESTS, "conftest.py")

pytestmark = pytest.mark.skipif(not os.path.isdir(LAB_TESTS), reason="no lab in this checkout")


def _lab_files() -> List[str]:
    return python_files(LAB_ROOT)


def test_lab_imports_are_at_the_top() -> None:
    offenders = []
    for path in _lab_files():
        for function in functions(parsed(path)):
            offenders.extend(where(path, node.lineno) + " in %s()" % function.name
                             for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom)))
    report(sorted(set(offenders)), "lab imports inside functions (import at module top)")


def _touches_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def test_lab_tests_set_sys_path_in_conftest_only() -> None:
    offenders = [where(path, node.lineno) for path in python_files(LAB_TESTS) if path != CONFTEST
                 for node in ast.walk(parsed(path)) if _touches_sys_path(node)]
    report(offenders, "sys.path set outside tests/lab/tests/conftest.py")


def test_lab_tests_have_one_prerequisites_marker() -> None:
    """Tests that need the lab's SSH hosts say ``pytest.mark.lab_hosts``; only conftest asks the machine."""
    offenders = [where(path, node.lineno) for path in python_files(LAB_TESTS) if path != CONFTEST
                 for node in ast.walk(parsed(path))
                 if isinstance(node, (ast.Name, ast.Attribute)) and "prerequisites_problem" in ast.unparse(node)]
    report(sorted(set(offenders)), "prerequisites asked outside conftest (use pytest.mark.lab_hosts)")
