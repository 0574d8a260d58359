"""Every module's ``diff`` is what Ansible's callbacks print (issue 43 #7).

With ``--diff`` a ``node_taints`` run printed ``[WARNING]: Callback dispatch 'v2_on_file_diff' failed for
plugin 'default': 'list' object has no attribute 'splitlines'`` instead of its diff: ansible-core's
``CallbackBase._get_diff`` takes each side as text, or serialises a mapping; anything else breaks it.

- every module reports its diff through the one base (``GpuFleetModule._final_result``), which makes each
  side text or a mapping; the one action plugin builds its entries with ``_changes.diff_entry``;
- every value a module records renders through the real callback code;
- ``node_taints`` in check mode with ``--diff`` renders; and every in-process run of a module test
  (``fake_k8s.run``) and every run through ``module_runner`` renders its diff with the callback
  (``callback_diff.render``), so each module test that asks for a diff checks this too.
"""

from __future__ import annotations

import ast
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from callback_diff import render  # noqa: E402  pylint: disable=wrong-import-position
from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._changes import Changes, diff_entry, for_callbacks  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.modules import node_taints  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULES = os.path.join(REPO, "plugins", "modules")
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize("before, after", [
    ([], [TAINT]), ([TAINT], []), (None, [1, 2]), (False, True), (0, 14), (1.5, None), ("a\n", "b\n"),
    ({"a": [1]}, None), ((1, 2), {"x": (3,)}),
], ids=["list-added", "list-removed", "none-list", "bool", "int", "float", "text", "mapping", "tuple"])
def test_every_kind_of_value_a_module_records_renders(before, after):
    changes = Changes()
    changes.record("node gpu-a something", before, after, changed=True)
    text = render(for_callbacks(changes.diff()))
    assert "before: node gpu-a something" in text and "after: node gpu-a something" in text
    entry = diff_entry("x", before, after)
    render(entry)


def test_a_diff_a_module_built_itself_is_made_printable_too():
    built = [{"before_header": "a", "after_header": "a", "before": ["x"], "after": 3}, {"prepared": "text\n"}]
    text = render(for_callbacks(built))
    assert '+3' in text and '-    "x"' in text and text.endswith("text\n")
    assert for_callbacks({"before": "a", "after": "b"}) == {"before": "a", "after": "b"}


def test_node_taints_in_check_mode_with_diff_renders(monkeypatch):
    fake = FakeK8s()
    fake.add("Node", "gpu-a", metadata={"name": "gpu-a"}, spec={})
    result, failed = run(node_taints, {"nodes": [{"node": "gpu-a", "taints": [TAINT]}]}, fake, monkeypatch,
                         check_mode=True, diff=True)
    assert not failed and result["changed"], result
    text = render(result["diff"])
    assert "before: node gpu-a taints" in text and '"key": "dedicated"' in text
    assert fake.writes == []


def _main_calls_the_base(tree):
    """``main()`` is ``<X>(...).run(run)`` with X one of the bases (GpuFleetModule, ClusterModule) or a
    class of the module's own file that subclasses one."""
    bases = {"GpuFleetModule", "ClusterModule"}
    bases |= {node.name for node in tree.body if isinstance(node, ast.ClassDef)
              and any(isinstance(b, ast.Name) and b.id in bases for b in node.bases)}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            for call in ast.walk(node):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run"
                        and isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name)
                        and call.func.value.func.id in bases):
                    return True
    return False


@pytest.mark.parametrize("name", sorted(n[:-3] for n in os.listdir(MODULES) if n.endswith(".py")))
def test_every_module_reports_its_diff_through_the_base(name):
    with open(os.path.join(MODULES, name + ".py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    if name == "report_files":  # an action plugin does the work; its entries are diff_entry's
        with open(os.path.join(REPO, "plugins", "action", "report_files.py"), encoding="utf-8") as handle:
            action = handle.read()
        with open(os.path.join(REPO, "plugins", "module_utils", "report", "_report_files.py"), encoding="utf-8") as handle:
            assert "return diff_entry(" in handle.read()
        assert 'outcome["diff"] = diffs' in action and "file_diff(" in action
        return
    assert _main_calls_the_base(tree), "%s: main() must run through GpuFleetModule/ClusterModule.run" % name
