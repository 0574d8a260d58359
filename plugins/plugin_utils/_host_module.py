# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action plugin of a host module (``gpu_facts``, ``mig_config``, ...): ansible-core's ``normal``
action, unchanged, so the module runs on its host exactly as a module without an action plugin does.

It exists for what loading it does: the strategy loads it in the main process before it forks the
task's workers, and loading it loads the collection's filters there (``_preload.py``), which every
later worker inherits instead of compiling them again.
"""

from __future__ import annotations

from ansible.plugins.action.normal import ActionModule as NormalAction

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._preload import load_filters

load_filters()


class HostModuleAction(NormalAction):
    """``normal``, loaded in the main process (see the module's docstring)."""
