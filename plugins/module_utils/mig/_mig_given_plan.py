# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's MIG plan as data, made once (on the controller, from a read) and applied on the host.

Pure. ``plan_to_dict`` is the ``plan`` that mig_config returns (and the rollout's triage computes on
the controller with the same code); ``given_plan`` turns it back into a ``HostPlan`` and ``reusable``
says whether the host may apply it as it is: the same config document and selection, and GPUs that
are still in the state the plan was made from. Anything else is planned again on the host.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_apply import GpuChange, HostPlan
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import current_layout

CHANGE_FIELDS = ("index", "uuid", "model", "before", "after", "mode_change", "layout_change",
                 "creation_order", "had_instances")


class GivenPlanError(ValueError):
    """The given plan is not one that mig_config returned."""


def config_digest(config_yaml: str) -> str:
    return hashlib.sha256(config_yaml.encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    """The value as it comes back from JSON (tuples become lists), to compare a plan with a read."""
    return json.loads(json.dumps(value, sort_keys=True))


def plan_to_dict(plan: HostPlan, config_yaml: str) -> Dict[str, Any]:
    """The plan as JSON-safe data, bound to the rendered config document it was made from."""
    gpus = [dict((field, getattr(change, field)) for field in CHANGE_FIELDS) for change in plan.gpus]
    return _plain(dict(config_name=plan.config_name, config_digest=config_digest(config_yaml),
                       before=list(plan.before), after=list(plan.after), gpus=gpus))


def given_plan(given: Mapping[str, Any]) -> HostPlan:
    """``plan_to_dict``'s answer back as a ``HostPlan``; GivenPlanError names what is missing or wrong."""
    missing = [key for key in ("config_name", "config_digest", "before", "after", "gpus") if key not in given]
    if missing:
        raise GivenPlanError("plan: not a plan that mig_config returned (missing %s)" % ", ".join(missing))
    try:
        changes = tuple(GpuChange(**dict((field, change[field]) for field in CHANGE_FIELDS[:-2]),
                                  creation_order=tuple(change["creation_order"]), had_instances=bool(change["had_instances"]))
                        for change in given["gpus"])
        return HostPlan(config_name=str(given["config_name"]), gpus=changes,
                        before=tuple(given["before"]), after=tuple(given["after"]))
    except (KeyError, TypeError) as exc:
        raise GivenPlanError("plan: a GPU change of the plan is malformed (%s)" % exc) from exc


def reusable(given: Mapping[str, Any], plan: HostPlan, config_yaml: str, selected: Optional[str],
             gpus: Sequence[Mapping[str, Any]]) -> bool:
    """The plan may be applied as it is: same document and selection, GPUs as they were read."""
    now = [current_layout(gpu) for gpu in sorted(gpus, key=lambda gpu: int(gpu["index"]))]
    return (given.get("config_digest") == config_digest(config_yaml) and selected == plan.config_name
            and _plain(now) == _plain(list(plan.before)))
