"""The shape of the code (issue 9): one Python dialect, thin modules, short functions.

Pure ``ast``/``tokenize`` checks over every file of ``plugins/`` (and the lab's file length). Each
check lists every offender as ``path:line`` at once, so one run shows all that is left to fix.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from typing import Dict, Iterator, List, Tuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(REPO, "plugins")
MODULES = os.path.join(PLUGINS, "modules")
LAB = os.path.join(REPO, "tests", "lab", "gpulab")

MAX_FUNCTION_LINES = 60
MAX_MODULE_CODE_LINES = 150
MAX_LAB_FILE_LINES = 600
DOC_STRINGS = ("DOCUMENTATION", "EXAMPLES", "RETURN")
TYPE_COMMENT = re.compile(r"#\s*type\s*:")


def python_files(root: str) -> List[str]:
    found = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        found.extend(os.path.join(directory, name) for name in sorted(filenames) if name.endswith(".py"))
    return found


def read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def where(path: str, line: int) -> str:
    return "%s:%d" % (os.path.relpath(path, REPO), line)


def parsed(path: str) -> ast.Module:
    return ast.parse(read(path), filename=path)


def functions(tree: ast.AST) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def report(offenders: List[str], what: str) -> None:
    if offenders:
        pytest.fail("%d %s:\n  %s" % (len(offenders), what, "\n  ".join(offenders)), pytrace=False)


PLUGIN_FILES = python_files(PLUGINS)


def test_plugins_found() -> None:
    assert len(PLUGIN_FILES) > 10 and any(path.startswith(MODULES) for path in PLUGIN_FILES)


def test_no_type_comments() -> None:
    offenders = []
    for path in PLUGIN_FILES:
        tokens = tokenize.generate_tokens(io.StringIO(read(path)).readline)
        offenders.extend(where(path, token.start[0]) for token in tokens
                         if token.type == tokenize.COMMENT and TYPE_COMMENT.match(token.string))
    report(offenders, "'# type:' comments (use annotations)")


def test_no_python2_headers() -> None:
    offenders = []
    for path in PLUGIN_FILES:
        for node in parsed(path).body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__" and any(
                    alias.name in ("absolute_import", "division", "print_function") for alias in node.names):
                offenders.append(where(path, node.lineno) + " from __future__ import " +
                                 ", ".join(alias.name for alias in node.names))
            if isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id == "__metaclass__" for target in node.targets):
                offenders.append(where(path, node.lineno) + " __metaclass__ = ...")
    report(offenders, "Python 2 headers")


def test_no_relative_imports() -> None:
    offenders = [where(path, node.lineno) + " from %s%s import ..." % ("." * node.level, node.module or "")
                 for path in PLUGIN_FILES for node in ast.walk(parsed(path))
                 if isinstance(node, ast.ImportFrom) and node.level > 0]
    report(offenders, "relative imports (use ansible_collections.gpufleet.sharing.plugins...)")


def test_no_imports_inside_functions() -> None:
    offenders = []
    for path in PLUGIN_FILES:
        for function in functions(parsed(path)):
            offenders.extend(where(path, node.lineno) + " in %s()" % function.name
                             for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom)))
    report(sorted(set(offenders)), "imports inside functions (import at module top)")


def test_functions_are_short() -> None:
    offenders = []
    for path in PLUGIN_FILES:
        for function in functions(parsed(path)):
            length = function.end_lineno - function.lineno + 1
            if length > MAX_FUNCTION_LINES:
                offenders.append(where(path, function.lineno) + " %s() has %d lines" % (function.name, length))
    report(offenders, "functions over %d lines" % MAX_FUNCTION_LINES)


def module_code_lines(path: str) -> Tuple[int, int]:
    """(non-blank, non-comment lines outside DOCUMENTATION/EXAMPLES/RETURN, line of the first one)."""
    source = read(path)
    docs = set()
    for node in parsed(path).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id in DOC_STRINGS for target in node.targets):
            docs.update(range(node.lineno, node.end_lineno + 1))
    code = [number for number, line in enumerate(source.splitlines(), 1)
            if number not in docs and line.strip() and not line.strip().startswith("#")]
    return len(code), code[0] if code else 1


def test_modules_are_thin() -> None:
    offenders = []
    for path in python_files(MODULES):
        count, first = module_code_lines(path)
        if count > MAX_MODULE_CODE_LINES:
            offenders.append(where(path, first) + " %d lines of code" % count)
    report(offenders, "modules over %d lines of code outside their docs" % MAX_MODULE_CODE_LINES)


@pytest.mark.skipif(not os.path.isdir(LAB), reason="no lab in this checkout")
def test_lab_files_are_short() -> None:
    offenders = []
    for path in python_files(LAB):
        lines = len(read(path).splitlines())
        if lines > MAX_LAB_FILE_LINES:
            offenders.append(where(path, 1) + " %d lines" % lines)
    report(offenders, "tests/lab/gpulab files over %d lines" % MAX_LAB_FILE_LINES)


def test_test_file_names_are_unique():
    """The test folders are not packages, so pytest imports each test file by its base name: two files
    of one name in tests/ stop the whole run at collection ("import file mismatch")."""
    seen: Dict[str, List[str]] = {}
    for path in python_files(os.path.join(REPO, "tests")):
        name = os.path.basename(path)
        if name.startswith("test_"):
            seen.setdefault(name, []).append(os.path.relpath(path, REPO))
    report(sorted("%s: %s" % (name, ", ".join(paths)) for name, paths in seen.items() if len(paths) > 1),
           "test file names used more than once")
