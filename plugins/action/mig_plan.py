# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_plan: runs as a module, as without an action plugin; loading this plugin loads the collection's
filters in the main process (plugin_utils/_host_module.py)."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._host_module import HostModuleAction


class ActionModule(HostModuleAction):
    pass
