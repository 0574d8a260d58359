# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_node_config: in the controller's worker process when its task runs on the controller (plugin_utils/_in_process.py)."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._in_process import ClusterModuleAction


class ActionModule(ClusterModuleAction):
    pass
