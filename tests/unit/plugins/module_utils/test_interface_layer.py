"""The Ansible-interface layer (issue 20 item 4): one problems-error base that the module base turns
into a failure, ``Changes`` the only diff builder, waits only through the client's waiter."""

from __future__ import annotations

import ast
import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingError

PLUGINS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))), "plugins")


def _plugin_files():
    for directory, _dirs, names in os.walk(PLUGINS):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as handle:
                    yield os.path.relpath(path, PLUGINS), ast.parse(handle.read())


def _assigns_problems(function: ast.AST) -> bool:
    return any(isinstance(node, ast.Attribute) and node.attr == "problems" and isinstance(node.ctx, ast.Store)
               and isinstance(node.value, ast.Name) and node.value.id == "self" for node in ast.walk(function))


def test_one_problems_error_class() -> None:
    """Only ``_errors.ProblemsError`` stores ``self.problems`` in an exception; the domains subclass it."""
    offenders = ["%s: %s" % (path, node.name) for path, tree in _plugin_files() for node in ast.walk(tree)
                 if isinstance(node, ast.ClassDef) and node.name != "ProblemsError"
                 and any(isinstance(base, ast.Name) and base.id.endswith(("Error", "Exception")) for base in node.bases)
                 and any(isinstance(f, ast.FunctionDef) and _assigns_problems(f) for f in node.body)]
    assert offenders == []


def test_domain_errors_are_problems_errors() -> None:
    assert issubclass(SharingError, ProblemsError)
    assert SharingError(["a is wrong", "b is wrong"]).problems == ["a is wrong", "b is wrong"]
    assert str(SharingError(["a is wrong", "b is wrong"])) == "a is wrong; b is wrong"


def _run(body, capsys):
    with patch_module_args({}):
        module = GpuFleetModule({})
        with pytest.raises(SystemExit):
            module.run(body)
    return json.loads(capsys.readouterr().out)


def test_module_base_fails_with_the_problems(capsys) -> None:
    def body(_mod):
        raise SharingError(["config x: replicas must be >= 2"])
    result = _run(body, capsys)
    assert result["failed"] and result["msg"] == "config x: replicas must be >= 2"
    assert result["problems"] == ["config x: replicas must be >= 2"]


def test_failing_on_names_what_the_block_did(capsys) -> None:
    def body(mod):
        mod.result["partial"] = 1
        with mod.failing_on("invalid sharing plan", before=[]):
            raise SharingError(["a", "b"])
    result = _run(body, capsys)
    assert result["msg"] == "invalid sharing plan: a; b" and result["problems"] == ["a", "b"]
    assert result["before"] == [] and result["partial"] == 1


def _diff_dicts(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and {"before_header", "after_header"} <= {
                k.value for k in node.keys if isinstance(k, ast.Constant)}:
            yield node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and {
                "before_header", "after_header"} <= {k.arg for k in node.keywords}:
            yield node


def test_changes_is_the_only_diff_builder() -> None:
    offenders = ["%s:%d" % (path, node.lineno) for path, tree in _plugin_files() if not path.endswith(os.path.join("base", "_changes.py"))
                 for node in _diff_dicts(tree)]
    assert offenders == []


def test_waits_only_through_the_waiter() -> None:
    """No ``time.sleep`` poll loop outside the Kubernetes client's waiter (its injectable clock)."""
    offenders = ["%s:%d" % (path, node.lineno) for path, tree in _plugin_files() if not path.endswith("_k8s.py")
                 for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and node.attr == "sleep" and isinstance(node.value, ast.Name)
                 and node.value.id == "time"]
    assert offenders == []


def test_option_groups_live_in_argspecs() -> None:
    """Option groups (``*_ARGSPEC``) are defined in ``base/_argspecs.py`` only, not in domain files."""
    offenders = ["%s:%d %s" % (path, node.lineno, target.id) for path, tree in _plugin_files()
                 if path.startswith("module_utils") and not path.endswith(os.path.join("base", "_argspecs.py"))
                 for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                 for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(target, ast.Name) and target.id.endswith("_ARGSPEC")]
    assert offenders == []


def test_only_the_expectation_reads_its_labels_back() -> None:
    """Item 5: outside ``sharing/_expected.py`` (the expectation) and ``sharing/_sharing.py`` (the configs)
    no code that takes an ``ExpectedNode`` strips ``.shared`` or
    reads its ``.replicas`` / ``.sharing-strategy`` labels: it asks ``record_for``. (The report page reads
    the JSON report's labels, each figure with its JSON pointer, and takes no ExpectedNode.)"""
    offenders = ["%s:%d %r" % (path, node.lineno, node.value) for path, tree in _plugin_files()
                 if path.startswith("module_utils")
                 and not path.endswith((os.path.join("sharing", "_expected.py"), os.path.join("sharing", "_sharing.py")))
                 and "ExpectedNode" in ast.dump(tree)
                 for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and node.value in (".shared", ".replicas", ".sharing-strategy")]
    assert offenders == []
