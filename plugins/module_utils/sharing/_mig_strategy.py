# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which MIG strategy each node's device plugin runs with, and whether it starts (pure, no I/O).

docs/reference/mig-strategy-sharing.md has the table and its sources. In short:

- The plugin takes ``--mig-strategy`` from its command line, then its environment (``MIG_STRATEGY``),
  then the config file's ``flags.migStrategy``, else ``none`` (NVIDIA/k8s-device-plugin
  ``api/config/v1/config.go`` ``NewConfig``). The GPU Operator sets ``MIG_STRATEGY`` on the plugin,
  GFD and the MPS control daemon from ClusterPolicy ``spec.mig.strategy`` unless that is empty
  (NVIDIA/gpu-operator ``controllers/object_controls.go`` ``applyMIGConfiguration``): so a per-config
  ``flags.migStrategy`` counts only when the ClusterPolicy leaves the strategy empty ("per node").
- The plugin refuses to start when its config shares with MPS under ``mixed``
  (``cmd/nvidia-device-plugin/main.go`` ``validateFlags``, v0.17.0 to v0.20.0), whatever the GPUs.

The collection's choice when the ClusterPolicy leaves the strategy to the nodes: a config that does
not say ``mig_strategy`` is rendered with ``flags.migStrategy`` ``none`` when it shares with MPS (MPS
needs MIG off, and ``none`` is the plugin's own default) and ``mixed`` otherwise (the collection's
default strategy, which time-slicing ``nvidia.com/mig-*`` needs).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

MIG_STRATEGIES = ("none", "single", "mixed")
# The plugin's own default for --mig-strategy (cmd/nvidia-device-plugin/main.go, flag mig-strategy).
PLUGIN_DEFAULT = "none"
# The collection's default strategy (the gpu_operator role's gpu_operator_mig_strategy).
COLLECTION_DEFAULT = "mixed"
# The per-node strategy rendered into a config that shares with MPS.
MPS_STRATEGY = "none"

MPS_MIXED_MESSAGE = "using --mig-strategy=mixed is not supported with MPS"


def plugin_strategy(policy_strategy: Optional[str], flags_strategy: Optional[str]) -> str:
    """The strategy the plugin runs with: the ClusterPolicy's (the operator's MIG_STRATEGY) when it
    is set, else the config's ``flags.migStrategy``, else the plugin default ``none``."""
    return policy_strategy or flags_strategy or PLUGIN_DEFAULT


def rendered_strategy(policy_strategy: Optional[str], flags_strategy: Optional[str], sharing: str) -> Optional[str]:
    """The ``flags.migStrategy`` the collection renders into a config (None: not rendered).

    ``sharing`` is the config's kind (``none``, ``time-slicing``, ``mps``). With a ClusterPolicy
    strategy the config's own value is rendered as given (it must equal the policy's); per node, a
    config without one gets ``none`` for MPS and the collection's default ``mixed`` otherwise.
    """
    if policy_strategy or flags_strategy:
        return flags_strategy
    return MPS_STRATEGY if sharing == "mps" else COLLECTION_DEFAULT


def start_refusal(strategy: str, sharing: str, shared: bool) -> Optional[str]:
    """Why the plugin would not start with ``strategy`` and a config of kind ``sharing`` that replicates
    some resource (``shared``), or None. Only MPS under ``mixed``: validateFlags checks it before it
    looks at any GPU, so no layout and no other flag of the config makes it work."""
    if sharing == "mps" and shared and strategy == "mixed":
        return MPS_MIXED_MESSAGE
    return None


def refusal_problem(where: str, policy_strategy: Optional[str], node_strategy: str) -> str:
    """The problem text for an MPS config the plugin would refuse, saying where the strategy came from."""
    if policy_strategy:
        source = ("the ClusterPolicy's spec.mig.strategy %s, which the GPU Operator passes to the plugin as "
                  "MIG_STRATEGY and which overrides any flags.migStrategy of the config" % policy_strategy)
        fix = ("leave the ClusterPolicy's strategy to the nodes (gpu_operator_mig_strategy: \"\"; the collection then "
               "renders flags.migStrategy none for MPS configs and mixed for the others), or share with time-slicing")
    else:
        source = "the config's flags.migStrategy %s (mig_strategy)" % node_strategy
        fix = "set mig_strategy none or single (or leave it out: MPS configs get none)"
    return ("%s: shares with MPS but the device plugin would run with the mixed MIG strategy (%s); the plugin then "
            "refuses to start (\"%s\", validateFlags, device plugin v0.17.0 to v0.20.0) and the node advertises no GPU; %s"
            % (where, source, MPS_MIXED_MESSAGE, fix))


def _replicated(config: Mapping[str, Any]) -> bool:
    resources = config.get("resources") or []
    return isinstance(resources, list) and any(
        isinstance(item, Mapping) and isinstance(item.get("replicas"), int) and item["replicas"] > 1 for item in resources)


def preflight_problem(policy_strategy: Any, config: Any, groups: Sequence[str]) -> Optional[str]:
    """A host's ``gpu_sharing_config`` that its device plugin would refuse, under the run's
    ``gpu_operator_mig_strategy`` (``policy_strategy``; "" = per node), naming the host's groups, the
    config and the reason; None when it can work (or is not a config: gpu_sharing reports that)."""
    if not isinstance(config, Mapping) or not isinstance(policy_strategy, str):
        return None
    flags = config.get("mig_strategy") if isinstance(config.get("mig_strategy"), str) else None
    sharing = config.get("strategy", "time-slicing")
    node_strategy = plugin_strategy(policy_strategy or None, rendered_strategy(policy_strategy or None, flags, sharing))
    if not start_refusal(node_strategy, sharing, _replicated(config)):
        return None
    named = "/".join(g for g in groups if g not in ("all", "ungrouped")) or "ungrouped"
    where = "group %s, sharing config %r" % (named, config.get("name"))
    return refusal_problem(where, policy_strategy or None, node_strategy)
