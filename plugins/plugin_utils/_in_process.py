# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster modules run in the controller's worker process, when their task runs on the controller.

A cluster module's task almost always runs on the controller (``hosts: localhost`` or
``delegate_to: localhost``). Run as a module, each task starts a new Python process that imports
the ``kubernetes`` client (about 0.6 s) after Ansible has built the module's payload (about 0.2 s),
for requests that take a few hundredths of a second: most of what a run that changes nothing costs
on the cluster side (docs/benchmarks.md, issue 26).

``ClusterModuleAction`` is the action plugin of every cluster module (``plugins/action/<module>.py``).
When the task's connection is the controller itself (``local``, no ``become``, no ``async``, the
controller's own Python), it runs the module's ``main()`` in the worker process Ansible forked for
the task, with the same arguments, the same ``_ansible_*`` settings, the same argument validation,
``no_log`` masking, warnings and result decoding as a module process (Ansible's ``AnsibleModule``
itself, its result taken through the hook ``_record_module_result`` that ansible-core provides for
in-worker execution, then ``_parse_returned_data`` as for a module's output). Every ansible-core
internal it touches is named in ``_core_internals.py``, with the versions it was proven on. The strategy loads the
action plugin in the main process before it forks the task's workers
(``ansible/plugins/strategy/linear.py``, ``action_loader.get(..., class_only=True)``), and loading it
imports the module and the ``kubernetes`` client there: every later worker inherits them.

Everywhere else (a task delegated to another host, ``become``, ``async``, another interpreter, an
ansible-core the path was not proven on, said once at ``-v``, or the variable ``gpufleet_in_process`` false) the module runs as a
module, exactly as without this plugin. The
worker is a forked process of its own for this task only, so the module's process-wide state (its
arguments, the environment of the task's ``environment:``) ends with it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
import tempfile
import traceback
from typing import Any, Dict, Iterator, List, Mapping, Optional

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.plugins.action.normal import ActionModule as NormalAction
from ansible.utils.display import Display

# Imported here, so in the main process when the strategy loads the action plugin: the kubernetes
# client with it, which every worker forked afterwards inherits.
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _k8s  # noqa: F401  pylint: disable=unused-import
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._core_internals import surface
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._preload import keep_loaded, load_filters

display = Display()

load_filters()  # the collection's filters too (_preload.py)

# This ansible-core's internals for the in-process path (_core_internals.py), or why there are none.
SURFACE, UNPROVEN = surface()
if UNPROVEN:  # once, in the process that loads the first cluster action plugin
    display.v("gpufleet.sharing: cluster modules run as ordinary module processes: %s" % UNPROVEN)

COLLECTION_MODULES = "ansible_collections.gpufleet.sharing.plugins.modules."


def in_process_blockers(connection: str, become: bool, async_val: int, interpreter: Optional[str],
                        controller_python: str, unproven: str, enabled: bool = True) -> List[str]:
    """Why this task's module cannot run in the worker process (empty: it can)."""
    reasons = [] if enabled else ["gpufleet_in_process is false"]
    if connection != "local":
        reasons.append("the task runs on another host (connection %s)" % connection)
    if become:
        reasons.append("become is set")
    if async_val:
        reasons.append("async is set")
    if interpreter and os.path.realpath(interpreter) != os.path.realpath(controller_python):
        reasons.append("ansible_python_interpreter is %s, not the controller's %s" % (interpreter, controller_python))
    if unproven:
        reasons.append(unproven)
    return reasons


def module_of(action: str) -> str:
    """The Python module of the cluster module that an action of this collection runs, from its last
    dotted part: the task's action (``gpufleet.sharing.node_taints``) or its action plugin's module."""
    return COLLECTION_MODULES + action.rsplit(".", 1)[-1]


@contextlib.contextmanager
def environment(values: Mapping[str, Any]) -> Iterator[None]:
    """``os.environ`` with the task's ``environment:`` for the block (as a module process gets it)."""
    saved = dict(os.environ)
    os.environ.update({str(key): str(value) for key, value in values.items()})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class ClusterModuleAction(NormalAction):
    """The action plugin of a cluster module: in the worker process on the controller, else as a module
    (ansible-core's ``normal`` action, the one a module without an action plugin gets)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Import the module of a cluster module's action plugin (``plugins/action/<module>.py``) when the
        plugin is loaded: in the main process, so that no worker compiles the module and its pure code again."""
        super().__init_subclass__(**kwargs)
        importlib.import_module(module_of(cls.__module__))
        keep_loaded()  # the kubernetes client among it (plugin_utils/_preload.py)

    def run(self, tmp: Any = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        task_vars = task_vars or {}
        # The interpreter of the host the task runs on (the delegated host's, as _configure_module reads it).
        target_vars = (task_vars.get("ansible_delegated_vars") or {}).get(self._task.delegate_to, task_vars) \
            if self._task.delegate_to else task_vars
        interpreter = self._templar.template(target_vars["ansible_python_interpreter"]) \
            if "ansible_python_interpreter" in target_vars else None
        blockers = in_process_blockers(
            self._connection.transport, bool(self._play_context.become), int(self._task.async_val or 0),
            interpreter, sys.executable,
            UNPROVEN,
            boolean(self._templar.template(task_vars.get("gpufleet_in_process", True)), strict=False))
        if blockers:
            display.vvv("%s runs as a module: %s" % (self._task.action, "; ".join(blockers)))
            return super().run(tmp, task_vars)
        display.vvv("%s runs in the controller's worker process" % self._task.action)
        result = ActionBase.run(self, tmp, task_vars)  # the checks every action makes, not normal's module run
        result.update(self.run_in_process(task_vars))
        return result

    def run_in_process(self, task_vars: Dict[str, Any]) -> Dict[str, Any]:
        name = self._task.resolved_action or self._task.action
        module = importlib.import_module(module_of(name))  # already loaded with this plugin
        args = dict(self._task.args)
        self._update_module_args(name, args, task_vars)
        scratch = tempfile.mkdtemp(prefix="gpufleet-module-")
        args["_ansible_tmpdir"] = scratch
        task_environment: Dict[str, Any] = {}
        self._compute_environment_string(task_environment)
        output: List[str] = []
        try:
            with SURFACE.module_run(args, output.append), environment(task_environment):
                module.main()
        except SystemExit:
            pass
        except Exception as exc:  # pylint: disable=broad-exception-caught  # a module's crash, reported as a module process's would be
            return {"failed": True, "changed": False, "msg": "%s failed: %s: %s" % (name, type(exc).__name__, exc),
                    "exception": traceback.format_exc()}
        finally:
            if not args.get("_ansible_keep_remote_files"):
                shutil.rmtree(scratch, ignore_errors=True)
        if not output:
            return {"failed": True, "changed": False, "msg": "%s ended without a result" % name}
        return SURFACE.task_result(self, output[-1])
