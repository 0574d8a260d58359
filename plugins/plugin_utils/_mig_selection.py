# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a host's MIG selection cannot be applied to its GPU models (preflight, on the controller)."""

from __future__ import annotations

from typing import Any, List, Mapping, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import plan_named_config


def mig_selection_problems(models: Sequence[str], selection: Mapping[str, Any]) -> List[str]:
    problems: List[str] = []
    content = {"version": "v1", "mig-configs": selection.get("configs")}
    for gpu in models:
        try:
            requested = resolve_model(str(gpu))
        except CatalogError as error:
            problems.append(str(error))
            continue
        planned = plan_named_config(content, bool(selection.get("include_defaults")), selection.get("config"), requested)
        if planned.message is not None:
            problems.append(planned.message)
    return problems
