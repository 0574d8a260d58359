# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_config's check-mode answer computed from a read of the host (GPUs and file states).

Pure: the caller supplies the config document, the host's GPUs (gpu_facts-shaped, as
``MigHost.gather`` returns them) and, per maintained file, its current content and mode.
The result has the keys the rollout's plan uses, with the same values as mig_config in check mode.
A fleet shares a few documents: ``prepare`` parses and renders one once, ``plan_prepared`` plans a host.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, NamedTuple, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_apply import (
    document_with_defaults,
    file_state,
    plan_host,
    plan_result,
    wanted_files,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_given_plan import plan_to_dict
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import (
    CONFIG_VERSION,
    DocumentError,
    MigPartedConfig,
    MigPartedError,
    current_layout,
    parse_config,
    render_yaml,
)


class Prepared(NamedTuple):
    """A parsed config document and its rendering, or the failure mig_config reports for it."""
    config: Optional[MigPartedConfig]
    config_yaml: str
    failure: Optional[Dict[str, Any]]


def prepare(document: Any, include_defaults: bool) -> Prepared:
    """``document`` None: no config given (the defaults only)."""
    source = "config"
    if document is None:
        document, source = {"version": CONFIG_VERSION, "mig-configs": {}}, "defaults"
    try:
        if include_defaults:
            document = document_with_defaults(document, source)
        config = parse_config(document, source)
    except DocumentError as exc:
        return Prepared(None, "", dict(failed=True, changed=False, msg=str(exc)))
    except MigPartedError as exc:
        return Prepared(None, "", dict(failed=True, changed=False, msg="invalid mig-parted config: %s" % exc,
                                       problems=exc.problems))
    return Prepared(config, render_yaml(config.as_dict()), None)


def plan_prepared(prepared: Prepared, selected: Optional[str], gpus: Sequence[Mapping[str, Any]],
                  files_read: Mapping[str, Mapping[str, Any]], config_dest: Optional[str] = None,
                  override: Optional[str] = None) -> Dict[str, Any]:
    """``files_read``: path -> {content, mode} (content None: missing or unreadable). A failure is
    ``dict(failed=True, msg=...)`` with mig_config's message."""
    if prepared.config is None:
        return dict(prepared.failure or {})
    try:
        plan = plan_host(prepared.config, selected, gpus)
    except MigPartedError as exc:
        return dict(failed=True, changed=False, problems=exc.problems, before=[current_layout(gpu) for gpu in gpus],
                    msg="MIG config %s cannot be applied on this host: %s" % (selected or "", exc))
    files = []
    for path, text in wanted_files(config_dest, override, plan.config_name, prepared.config_yaml):
        state = files_read.get(path) or {}
        files.append(file_state(path, text, state.get("content"), state.get("mode")))
    result = plan_result(plan, files, prepared.config_yaml, True, config_dest, override)
    result["plan"] = plan_to_dict(plan, prepared.config_yaml)  # what the host applies (mig_config's plan option)
    return result


def plan_from_read(document: Any, include_defaults: bool, selected: Optional[str],
                   gpus: Sequence[Mapping[str, Any]], files_read: Mapping[str, Mapping[str, Any]],
                   config_dest: Optional[str] = None, override: Optional[str] = None) -> Dict[str, Any]:
    """One host: ``prepare`` then ``plan_prepared``."""
    return plan_prepared(prepare(document, include_defaults), selected, gpus, files_read, config_dest, override)
