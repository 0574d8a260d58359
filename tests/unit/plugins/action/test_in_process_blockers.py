"""When a cluster module's task runs in the controller's worker process, and why not (plugin_utils/_in_process.py)."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._in_process import in_process_blockers

PYTHON = sys.executable
UNPROVEN = "ansible-core 2.18.19 is not among the versions the in-process path was proven on (2.19, 2.20, 2.21)"


def test_a_local_task_with_the_controllers_python_runs_in_the_worker():
    assert in_process_blockers("local", False, 0, None, PYTHON, "") == []
    assert in_process_blockers("local", False, 0, PYTHON, PYTHON, "") == []


@pytest.mark.parametrize("arguments, reason", [
    (("ssh", False, 0, None, PYTHON, ""), "the task runs on another host (connection ssh)"),
    (("local", True, 0, None, PYTHON, ""), "become is set"),
    (("local", False, 30, None, PYTHON, ""), "async is set"),
    (("local", False, 0, "/usr/bin/python-other", PYTHON, ""),
     "ansible_python_interpreter is /usr/bin/python-other, not the controller's %s" % PYTHON),
    (("local", False, 0, None, PYTHON, UNPROVEN), UNPROVEN),
    (("local", False, 0, None, PYTHON, "", False), "gpufleet_in_process is false"),
])
def test_each_reason_to_run_as_a_module_is_named(arguments, reason):
    assert in_process_blockers(*arguments) == [reason]


def test_every_reason_is_named_at_once():
    assert len(in_process_blockers("ssh", True, 5, "/opt/python", PYTHON, UNPROVEN, False)) == 6


def test_the_same_interpreter_by_another_link_is_the_controllers(tmp_path):
    link = tmp_path / "python"
    link.symlink_to(PYTHON)
    assert in_process_blockers("local", False, 0, str(link), PYTHON, "") == []
