# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a host's MIG selection cannot be applied to its GPU models (preflight, on the controller)."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import plan_named_config, read_gpu_problems, unchecked_indexes


def mig_selection_problems(models: Sequence[str], selection: Mapping[str, Any],
                           gpus: Optional[Sequence[Mapping[str, Any]]] = None) -> List[str]:
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
    if problems or not gpus:
        return problems
    return read_gpu_problems(content, bool(selection.get("include_defaults")), selection.get("config"), gpus)


def unread_index_notes(selection: Mapping[str, Any]) -> List[str]:
    """The selection's GPU indexes that only a read of the host could check (its model is declared)."""
    content = {"version": "v1", "mig-configs": selection.get("configs")}
    return ["config %s item %d names GPU %s: not checked against the host's GPUs (gpufleet_gpu_model is declared, "
            "so preflight did not read the host; mig_config refuses an index the host lacks, on the host, before any "
            "change)" % (name, position, ", ".join(str(index) for index in indexes))
            for name, position, indexes in unchecked_indexes(content, bool(selection.get("include_defaults")),
                                                             selection.get("config"))]
