# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The oldest Python the host modules (``gpu_facts``, ``mig_config``) run on, and their refusal of an
older one: a clear failure naming the host, its Python and the minimum, never a traceback.

A host module imports this before the rest of the collection's code, which needs Python 3.7 or newer
(postponed annotations). This file and the host module files themselves therefore parse on older
Pythons too (no annotations, no f-strings here; tests/unit/test_host_python.py compiles them with
Python 3.6 and runs the refusal). Why 3.7: README.md, "Supported versions".
"""

import json
import platform
import sys

MINIMUM_PYTHON = (3, 7)


def too_old_message(module, version_info, executable, host):
    """The refusal, or None when ``version_info`` is new enough."""
    if tuple(version_info[:2]) >= MINIMUM_PYTHON:
        return None
    return ("%s needs Python %d.%d or newer on the GPU host: %s runs it with Python %s (%s). Point "
            "ansible_python_interpreter at a newer Python on that host (on RHEL 8: dnf install python3.11, "
            "then ansible_python_interpreter=/usr/bin/python3.11); nothing was changed."
            % (module, MINIMUM_PYTHON[0], MINIMUM_PYTHON[1], host,
               ".".join(str(part) for part in version_info[:3]), executable or "unknown interpreter"))


def refuse_older_python(module):
    """Ends the module with a failed result (as ``fail_json`` would) on a Python older than the minimum."""
    message = too_old_message(module, sys.version_info, sys.executable, platform.node() or "this host")
    if message is None:
        return
    sys.stdout.write(json.dumps({"failed": True, "changed": False, "msg": message,
                                 "python_version": platform.python_version(), "minimum_python": "%d.%d" % MINIMUM_PYTHON}))
    sys.stdout.write("\n")
    sys.stdout.flush()
    raise SystemExit(1)
