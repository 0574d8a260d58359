# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-only helpers over ``hostvars``, shared by the filters and the action plugin."""

from __future__ import annotations

from typing import Any, Mapping


def node_name(host: str, host_vars: Mapping[str, Any]) -> str:
    """The Kubernetes node of an inventory host: gpufleet_node_name, else the host name."""
    return host_vars.get("gpufleet_node_name") or host
