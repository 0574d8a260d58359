# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every ansible-core internal that the in-process path (``_in_process.py``) touches, named here and
nowhere else, and the ansible-core versions on which that path was proven.

A cluster module run in the controller's worker process needs what ansible-core does around a module
process, and ansible-core offers no public API for it. The surface used, all of it:

========================================================  ==============================================
internal                                                  what for
========================================================  ==============================================
``ansible.module_utils.basic._ANSIBLE_ARGS``              the module's arguments, as a module process
``ansible.module_utils.basic._ANSIBLE_PROFILE``           reads them from stdin, with their profile
``AnsibleModule._record_module_result``                   the hook ansible-core keeps for in-worker runs
                                                          (2.19.1+): the result, not printed
``ansible.module_utils.common.json.get_module_encoder``   the arguments and the result encoded as
``ansible.module_utils.common.json.Direction``            between controller and module (2.19+)
``ActionBase._update_module_args``                        the ``_ansible_*`` settings of the task
``ActionBase._compute_environment_string``                the task's ``environment:``
``ActionBase._parse_returned_data``                       the module's output decoded as a process's
``ansible.vars.clean.remove_internal_keys``               2.19, 2.20: the result cleaned as
                                                          ``_execute_module`` cleans it
``UnifiedTaskResult.remove_internal_keys``,               2.21: ``_parse_returned_data`` returns a
``UnifiedTaskResult.as_result_dict(for_round_trip=True)`` ``UnifiedTaskResult``; cleaned and turned
                                                          into the dict ``_execute_module`` returns
========================================================  ==============================================

(``ansible/plugins/action/__init__.py`` ``_execute_module`` and ``ansible/module_utils/basic.py`` of
ansible-core 2.19.14, 2.20.10 and 2.21.5.) The path runs only on the ansible-core minor versions in
``PROVEN``, each with the way its ``_parse_returned_data`` result is cleaned; on any other version, or
when one of these names is missing, the cluster modules run as ordinary module processes and
``fallback_reason`` says why (the action plugin prints it at ``-v``). A new ansible-core joins
``PROVEN`` only after the version matrix (``tests/tools/matrix_leg.sh``) passed on it.
"""

from __future__ import annotations

import contextlib
import importlib
import json

from ansible.module_utils import basic
from ansible.release import __version__ as CORE_VERSION

from typing import Any, Callable, Dict, Iterator, Optional, Tuple

PROFILE = "legacy"  # the serialization profile of a module without metadata (ansible/executor/module_common.py)

# ansible-core minor version -> how the result of ``_parse_returned_data`` becomes the task's result.
PROVEN = {"2.19": "result_dict", "2.20": "result_dict", "2.21": "unified_result"}


def minor_version(version: str) -> str:
    """``2.21`` of ``2.21.5`` (or of ``2.21.0rc1``)."""
    return ".".join(version.split(".")[:2])


def proven_on(version: str) -> Optional[str]:
    """The result handling of an ansible-core version the in-process path was proven on, or None."""
    return PROVEN.get(minor_version(version))


def proven_range() -> str:
    """The proven versions, for messages: ``2.19, 2.20, 2.21``."""
    return ", ".join(sorted(PROVEN, key=lambda minor: tuple(int(part) for part in minor.split("."))))


class Surface:
    """The internals of one proven ansible-core, looked up once (``surface()``)."""

    def __init__(self, handling: str) -> None:
        json_utils = importlib.import_module("ansible.module_utils.common.json")
        self.to_module = json_utils.get_module_encoder(PROFILE, json_utils.Direction.CONTROLLER_TO_MODULE)
        self.to_controller = json_utils.get_module_encoder(PROFILE, json_utils.Direction.MODULE_TO_CONTROLLER)
        self.hook_name = "_record_module_result"
        getattr(basic.AnsibleModule, self.hook_name)  # AttributeError: no hook, no in-process path
        for name in ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE"):
            getattr(basic, name)
        self.handling = handling
        if handling == "result_dict":
            self.remove_internal_keys = importlib.import_module("ansible.vars.clean").remove_internal_keys

    @contextlib.contextmanager
    def module_run(self, args: Dict[str, Any], record: Callable[[str], None]) -> Iterator[None]:
        """The module's ``AnsibleModule`` reads ``args`` as from stdin and hands its result to ``record``
        (encoded as a module process prints it) instead of printing it, for the block."""
        hook = getattr(basic.AnsibleModule, self.hook_name)
        encoder = self.to_controller

        def recorded(_module: Any, result: Dict[str, Any]) -> None:
            record(json.dumps(result, cls=encoder))

        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}, cls=self.to_module).encode("utf-8")
        basic._ANSIBLE_PROFILE = PROFILE
        setattr(basic.AnsibleModule, self.hook_name, recorded)
        try:
            yield
        finally:
            setattr(basic.AnsibleModule, self.hook_name, hook)
            basic._ANSIBLE_ARGS = None

    def task_result(self, action: Any, output: str) -> Dict[str, Any]:
        """The module's printed result as ``_execute_module`` makes it the task's (parsed, then cleaned)."""
        parsed = action._parse_returned_data({"stdout": output, "stdout_lines": output.splitlines(),
                                              "stderr": "", "stderr_lines": [], "rc": 0}, PROFILE)
        if self.handling == "unified_result":
            parsed.remove_internal_keys()
            return parsed.as_result_dict(for_round_trip=True)
        self.remove_internal_keys(parsed)
        for stream in ("stdout", "stderr"):  # as _execute_module of 2.19 and 2.20 splits them
            if stream in parsed and stream + "_lines" not in parsed:
                parsed[stream + "_lines"] = (parsed.get(stream) or "").splitlines()
        return parsed


def surface(version: str = CORE_VERSION) -> Tuple[Optional[Surface], str]:
    """This ansible-core's internals for the in-process path, or None and why the modules run as modules."""
    handling = proven_on(version)
    if handling is None:
        return None, ("ansible-core %s is not among the versions the in-process path was proven on (%s)"
                      % (version, proven_range()))
    try:
        return Surface(handling), ""
    except (ImportError, AttributeError) as exc:
        return None, "ansible-core %s lacks an internal the in-process path uses: %s" % (version, exc)
