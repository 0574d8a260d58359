# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet plan: which nodes are in scope and what each must advertise.

Pure logic, no I/O. ``gpu_sharing`` and ``gpu_verify`` (and through ``gpu_verify`` the rollout's wait)
read the cluster into a :class:`ClusterView`, turn their options into an :class:`Intent` and call
:func:`plan_fleet`, which answers for the whole fleet at once:

- the MIG strategy (the one rule: the intent's, else the ClusterPolicy's ``spec.mig.strategy``; when
  neither sets one, each node's plugin takes its config's ``flags.migStrategy``, else ``none``:
  ``_mig_strategy.plugin_strategy``);
- the nodes in scope (:data:`SCOPE_GOVERNED`: the nodes whose device-plugin config the plan sets;
  :data:`SCOPE_FLEET`: every GPU node and every planned node; or an explicit list/selector);
- per node: the sharing config in force before and after the plan, whether the node selects it by
  label, its GPUs (MIG layout per GPU from its :class:`HostPlan`, else its GFD labels) and the
  :class:`~._sharing.ExpectedNode` it must advertise.

The per-host plan (:class:`HostPlan`) is the typed form of the modules' ``node_plans`` option: a
host's planned GPUs, or its ``gpu_facts`` and MIG selection, from which each GPU's layout is derived.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Hashable
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import DEFAULT_MIG_CONFIG
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._changes import diff_entry as _changes_entry
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._memo import Memo, frozen
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._component_versions import (
    DevicePlugin,
    VersionError,
    resolve_device_plugin,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import (
    CONFIG_LABEL,
    SharingConfig,
    SharingError,
    assign_nodes,
    configs_from_nodes,
    effective_config_name,
    parse_configs,
    release_problems,
    selector_matches,
    with_rendered_strategies)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode, expected_node
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import node_gpus_for
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._mig_strategy import plugin_strategy
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import find_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import (
    MigPartedError,
    current_layout,
    desired_layout,
    desired_state,
    instance_profile,
    parse_with_defaults,
    select_config,
)

# What "no MIG config given" means, everywhere: MIG off (the mig role's default, what it would apply).

# A node carrying one of these labels (GPU Feature Discovery) is a GPU node.
GPU_NODE_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.count")

SCOPE_GOVERNED = "governed"
SCOPE_FLEET = "fleet"


def plan_from_host(gpu_facts: Sequence[Mapping[str, Any]], mig_config: Optional[str] = None,
                   mig_configs: Optional[Mapping[str, Any]] = None, where: str = "host") -> List[Dict[str, Any]]:
    """Planned GPUs of a host from its gpu_facts entries and its mig-parted selection.

    Each GPU gets the layout the selected mig-parted config asks of it (the ``mig`` role's
    ``mig_config``/``mig_configs``, default named configs included); GPUs the config does not
    touch keep their current layout. Without ``mig_config`` the current layout is the plan.
    """
    desired: Dict[int, Any] = {}
    if mig_config:
        try:
            config = parse_with_defaults(mig_configs or {}, "%s mig_configs" % where)
            name, items = select_config(config, mig_config)
            desired = desired_state(items, gpu_facts, name)
        except MigPartedError as exc:
            raise SharingError(["%s: %s" % (where, p) for p in exc.problems])
    plan: List[Dict[str, Any]] = []
    for gpu in gpu_facts:
        after = desired_layout(current_layout(gpu), desired.get(int(gpu["index"])))
        entry: Dict[str, Any] = {"count": 1, "product": gpu.get("name")}
        model = find_model(str(gpu.get("name") or ""), gpu.get("pci_device_id"))
        if model is not None:
            entry["model"] = model.key
        if after["mig_enabled"]:
            entry["mig"] = dict(after["mig_devices"])
        plan.append(entry)
    return plan


def labels_of(obj: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """An API object's labels (an empty dict for a missing object)."""
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


# --------------------------------------------------------------------------------------------
# The per-host plan


@dataclass(frozen=True)
class HostPlan:
    """One host's intent: planned GPUs, or GPU facts plus the MIG selection that shapes them."""

    node: str
    gpus: Tuple[Mapping[str, Any], ...] = ()
    gpu_facts: Tuple[Mapping[str, Any], ...] = ()
    mig_config: str = DEFAULT_MIG_CONFIG
    mig_configs: Mapping[str, Any] = field(default_factory=dict)
    sharing_config: Optional[Mapping[str, Any]] = None
    problems: Tuple[str, ...] = ()

    def plan_key(self) -> Optional[Hashable]:
        """Equal for hosts whose planned GPUs are equal (what ``planned_gpus`` reads); None: not comparable."""
        if self.problems or not (self.gpus or self.gpu_facts):
            return None
        if self.gpus:
            return frozen(list(self.gpus))
        return _facts_key(self.gpu_facts, self.mig_config, self.mig_configs)

    def planned_gpus(self) -> Optional[List[Mapping[str, Any]]]:
        """``[{model, count, mig, product}]``; None when the host gives neither GPUs nor facts."""
        if self.problems:
            raise SharingError(self.problems)
        if self.gpus:
            return list(self.gpus)
        if self.gpu_facts:
            return planned_from_facts(self.gpu_facts, self.mig_config, self.mig_configs, "node %r" % self.node)
        return None


_ABSENT = object()
# Host plans per (what a plan reads of the GPU facts, MIG selection): the hosts of a group plan alike.
_PLANNED: Memo[List[Dict[str, Any]]] = Memo()


def _planning_key(gpu: Mapping[str, Any]) -> Tuple[Any, ...]:
    """What ``plan_from_host`` reads of one GPU's facts: index, name, PCI ids, MIG mode and instances."""
    mig = gpu.get("mig") or {}
    return (gpu.get("index", _ABSENT), gpu.get("name", _ABSENT), gpu.get("pci_device_id", _ABSENT),
            gpu.get("pci_sub_device_id", _ABSENT), bool(mig.get("capable")), bool(mig.get("current")),
            bool(mig.get("pending")), tuple(instance_profile(i) for i in mig.get("instances") or []))


def _facts_of(key: Tuple[Any, ...]) -> Dict[str, Any]:
    """The GPU facts a planning key stands for (planning runs on these, so it can read nothing else)."""
    fields = dict((name, value) for name, value in zip(("index", "name", "pci_device_id", "pci_sub_device_id"), key)
                  if value is not _ABSENT)
    fields["mig"] = {"capable": key[4], "current": key[5], "pending": key[6],
                     "instances": [{"profile": profile} for profile in key[7]]}
    return fields


def planned_from_facts(gpu_facts: Sequence[Mapping[str, Any]], mig_config: Optional[str],
                       mig_configs: Optional[Mapping[str, Any]], where: str) -> List[Dict[str, Any]]:
    """``plan_from_host``, once per distinct input: a fleet's hosts differ in their GPUs' UUIDs, bus ids
    and serials, which no plan reads. A host whose plan fails is planned on its own (its problems name it)."""
    key = _facts_key(gpu_facts, mig_config, mig_configs)
    if key is None:
        return plan_from_host(gpu_facts, mig_config, mig_configs, where)
    planned = _PLANNED.get(key, lambda: plan_from_host([_facts_of(g) for g in key[1]], mig_config, mig_configs, where))
    return [dict(entry, mig=dict(entry["mig"])) if "mig" in entry else dict(entry) for entry in planned]


def _facts_key(gpu_facts: Sequence[Mapping[str, Any]], mig_config: Optional[str],
               mig_configs: Optional[Mapping[str, Any]]) -> Optional[Tuple[Any, ...]]:
    """("facts", per GPU what a plan reads, the selection); None when some part cannot be a key."""
    try:
        key = ("facts", tuple(_planning_key(gpu) for gpu in gpu_facts), mig_config, frozen(dict(mig_configs or {})))
        hash(key)
    except (AttributeError, TypeError, ValueError):
        return None
    return key if key[3] is not None else None


def host_plan(node: str, entry: Any) -> HostPlan:
    """One ``node_plans`` entry (or ``node_gpus`` value: a GPU list is short for ``{gpus: [...]}``)."""
    if entry is None:
        return HostPlan(node=node)
    if not isinstance(entry, Mapping):
        if isinstance(entry, str) or not isinstance(entry, Sequence):
            raise SharingError(["node %r: the GPU plan must be a list of {model, count, mig, product}" % node])
        return HostPlan(node=node, gpus=tuple(entry))
    gpus = entry.get("gpus") or ()
    if isinstance(gpus, (str, Mapping)) or not isinstance(gpus, Sequence):
        raise SharingError(["node %r: the GPU plan must be a list of {model, count, mig, product}" % node])
    return HostPlan(
        node=node,
        gpus=tuple(gpus),
        gpu_facts=tuple(entry.get("gpu_facts") or ()),
        mig_config=entry.get("mig_config") or DEFAULT_MIG_CONFIG,
        mig_configs=dict(entry.get("mig_configs") or {}),
        sharing_config=entry.get("sharing_config") or None,
    )


def host_plans(node_plans: Sequence[Mapping[str, Any]], node_gpus: Mapping[str, Any]) -> Dict[str, HostPlan]:
    """The modules' ``node_plans`` list and ``node_gpus`` dict as typed plans (``node_gpus`` wins).

    A malformed entry becomes a plan that carries its problems: they are reported for that node.
    """
    plans: Dict[str, HostPlan] = {}
    pairs = [(str(e.get("node")), e) for e in node_plans or ()] + list((node_gpus or {}).items())
    for node, entry in pairs:
        kept = plans[node].sharing_config if node in plans else None
        try:
            plan = host_plan(node, entry)
        except SharingError as exc:
            plan = HostPlan(node=node, problems=tuple(exc.problems))
        plans[node] = plan if plan.sharing_config or not kept else replace(plan, sharing_config=kept)
    return plans


def node_configs_of(plans: Mapping[str, HostPlan]) -> Dict[str, Mapping[str, Any]]:
    """Node -> its sharing config, for the hosts that give one."""
    return {node: plan.sharing_config for node, plan in plans.items() if plan.sharing_config}


def read_intent(params: Mapping[str, Any]) -> Tuple[Dict[str, HostPlan], Optional[List[Dict[str, Any]]]]:
    """The host plans and the raw sharing configs (None: no sharing plan given) from module options.

    Per-node sharing configs come from ``node_configs`` and each host plan's ``sharing_config``.
    """
    plans = host_plans(params.get("node_plans") or [], params.get("node_gpus") or {})
    node_configs = dict(node_configs_of(plans))
    node_configs.update(params.get("node_configs") or {})
    if params.get("configs") is None and not node_configs:
        return plans, None
    return plans, configs_from_nodes(node_configs, params.get("configs") or [])


def device_plugin_of(params: Mapping[str, Any], policy: Optional[Mapping[str, Any]],
                     warn: Optional[Callable[[str], None]] = None) -> DevicePlugin:
    """The device-plugin release the plan is for (``_component_versions.resolve_device_plugin``: the
    option ``device_plugin_version``, the ClusterPolicy's image tag, the option ``operator_version``,
    the default chart); an option that does not parse is a SharingError naming it. What was assumed
    for a chart that is not a released one goes to ``warn``."""
    try:
        plugin = resolve_device_plugin(params.get("device_plugin_version"), dict(policy) if policy else None,
                                       params.get("operator_version"))
    except VersionError as exc:
        raise SharingError([str(exc)])
    if plugin.assumed and warn is not None:
        warn(plugin.assumed)
    return plugin


def checked_configs(raw_configs: Sequence[Mapping[str, Any]], default: Optional[str],
                    plugin: Optional[DevicePlugin], policy_strategy: Optional[str] = None) -> Dict[str, SharingConfig]:
    """The configs validated, checked against what the device-plugin release can do, and with the
    flags.migStrategy gpu_sharing renders under the ClusterPolicy strategy ``policy_strategy``."""
    configs = parse_configs(raw_configs, default)
    problems = release_problems(configs, plugin)
    if problems:
        raise SharingError(problems)
    return with_rendered_strategies(configs, policy_strategy)


# --------------------------------------------------------------------------------------------
# What the cluster reports, what is intended


@dataclass(frozen=True)
class ClusterView:
    """What the cluster reports: node labels and the ClusterPolicy's MIG and device-plugin settings."""

    nodes: Mapping[str, Mapping[str, str]]
    has_policy: bool = False
    mig_strategy: Optional[str] = None
    configmap: Optional[str] = None
    default_config: Optional[str] = None
    live_configs: Tuple[str, ...] = ()

    @classmethod
    def read(cls, nodes: Sequence[Mapping[str, Any]], policy: Optional[Mapping[str, Any]],
             live_configs: Sequence[str] = ()) -> "ClusterView":
        """From a node list and the ClusterPolicy (None: there is none)."""
        spec = (policy or {}).get("spec") or {}
        dp_config = (spec.get("devicePlugin") or {}).get("config") or {}
        return cls(
            nodes={n["metadata"]["name"]: labels_of(n) for n in nodes},
            has_policy=policy is not None,
            mig_strategy=(spec.get("mig") or {}).get("strategy") or None,
            configmap=dp_config.get("name") or None,
            default_config=dp_config.get("default") or None,
            live_configs=tuple(sorted(live_configs)),
        )

    def with_nodes(self, nodes: Sequence[Mapping[str, Any]]) -> "ClusterView":
        """The same cluster with a fresh node list (a poll)."""
        return ClusterView({n["metadata"]["name"]: labels_of(n) for n in nodes}, self.has_policy, self.mig_strategy,
                           self.configmap, self.default_config, self.live_configs)


@dataclass(frozen=True)
class Intent:
    """What the inventory (or the caller) intends.

    ``configs``: the sharing configs in force (the plan's, or the cluster's when verifying without a
    plan). ``default_config``: None keeps the ClusterPolicy's, "" removes it. ``nodes``/``selector``:
    an explicit scope; otherwise ``scope`` decides. ``plugin``: the device-plugin release that runs
    (its version decides how MIG resources are named; None: the newest behaviour).
    """

    configs: Mapping[str, SharingConfig] = field(default_factory=dict)
    default_config: Optional[str] = None
    hosts: Mapping[str, HostPlan] = field(default_factory=dict)
    mig_strategy: Optional[str] = None
    nodes: Tuple[str, ...] = ()
    selector: Tuple[Tuple[str, str], ...] = ()
    scope: str = SCOPE_FLEET
    plugin: Optional[DevicePlugin] = None

    @property
    def explicit(self) -> bool:
        return bool(self.nodes or self.selector)


@dataclass(frozen=True)
class NodePlan:
    """One node in scope: its config now and after the plan, and what it must advertise."""

    node: str
    exists: bool
    config: Optional[str] = None
    config_before: Optional[str] = None
    labelled: bool = False
    expected: Optional[ExpectedNode] = None
    problems: Tuple[str, ...] = ()


@dataclass(frozen=True)
class FleetPlan:
    mig_strategy: Optional[str]  # the ClusterPolicy's; None: each node's config decides
    default_config: Optional[str]
    assignments: Dict[str, str]
    nodes: Dict[str, NodePlan]
    missing_planned: Tuple[str, ...] = ()

    @property
    def expectations(self) -> Dict[str, ExpectedNode]:
        return {name: n.expected for name, n in sorted(self.nodes.items()) if n.expected is not None}

    @property
    def problems(self) -> List[str]:
        return [p for _name, n in sorted(self.nodes.items()) for p in n.problems]


# --------------------------------------------------------------------------------------------
# The plan


def mig_strategy_of(intent: Intent, cluster: ClusterView) -> Optional[str]:
    """The intent's strategy, else the ClusterPolicy's; None: the ClusterPolicy leaves it empty (or there is
    none), so the operator sets no MIG_STRATEGY and each node's plugin takes its config's flags.migStrategy.
    (The chart's default value ``single`` is rendered into the ClusterPolicy; an absent field means the
    value was empty: NVIDIA/gpu-operator deployments/gpu-operator/templates/clusterpolicy.yaml, v26.7.0.)"""
    return intent.mig_strategy or cluster.mig_strategy or None


def configs_as_rendered(configs: Mapping[str, SharingConfig], intent_strategy: Optional[str],
                        cluster: ClusterView) -> Dict[str, SharingConfig]:
    """The configs with the flags.migStrategy the collection writes for this cluster's strategy."""
    return with_rendered_strategies(configs, intent_strategy or cluster.mig_strategy)


def _gpu_nodes(intent: Intent, cluster: ClusterView) -> Set[str]:
    """Nodes GFD marks as GPU nodes, and every planned node."""
    labelled = {n for n, labels in cluster.nodes.items() if any(k in labels for k in GPU_NODE_LABELS)}
    return labelled | set(intent.hosts)


def _candidates(intent: Intent, cluster: ClusterView) -> Set[str]:
    """The scope before the configs' own node choices are added."""
    if intent.explicit:
        chosen = set(intent.nodes)
        if intent.selector:
            chosen |= {n for n, labels in cluster.nodes.items() if selector_matches(intent.selector, labels)}
        return chosen
    if intent.scope == SCOPE_FLEET:
        return _gpu_nodes(intent, cluster)
    return set()


def _scope(intent: Intent, cluster: ClusterView, candidates: Set[str], assignments: Mapping[str, str],
           after: Mapping[str, Mapping[str, str]], default: Optional[str]) -> Set[str]:
    if intent.explicit:
        return candidates
    if intent.scope == SCOPE_FLEET:
        return candidates | set(assignments)
    # governed: the selected nodes, and the unlabelled GPU nodes when a default config is set
    gpu_nodes = _gpu_nodes(intent, cluster)
    unlabelled = {n for n in cluster.nodes if n in gpu_nodes and default and CONFIG_LABEL not in after[n]}
    return set(assignments) | unlabelled


class _Shared:
    """Within one ``plan_fleet``: the GPUs of hosts with equal planned GPUs, and the expectation of nodes with
    equal GPUs, config and strategy, made once (a result that fails is made again per node: it names the node)."""

    def __init__(self, intent: Intent, per_node: bool) -> None:
        self.intent = intent
        self.per_node = per_node
        self.gpus: Dict[Hashable, Any] = {}
        self.expected: Dict[Hashable, ExpectedNode] = {}

    def node_gpus(self, name: str, host: Optional[HostPlan], labels: Mapping[str, str], strategy: str) -> Any:
        key = host.plan_key() if host is not None else None
        if key is None:
            return node_gpus_for(name, host.planned_gpus() if host else None, labels, strategy)
        if key not in self.gpus:
            self.gpus[key] = node_gpus_for(name, host.planned_gpus() if host else None, labels, strategy)
        return self.gpus[key]

    def expectation(self, name: str, gpus: Any, strategy: str, cfg: Optional[SharingConfig], labelled: bool) -> ExpectedNode:
        key = (gpus, strategy, cfg.name if cfg else None, labelled)
        if key not in self.expected:
            self.expected[key] = expected_node(name, gpus, strategy, cfg, labelled=labelled, plugin=self.intent.plugin,
                                               per_node=self.per_node)
        exp = self.expected[key]
        return replace(exp, node=name, resources=dict(exp.resources), labels=dict(exp.labels),
                       product_suffixes=dict(exp.product_suffixes), records=dict(exp.records))


def _node_plan(name: str, intent: Intent, cluster: ClusterView, after: Mapping[str, str], default: Optional[str],
               mig_strategy: Optional[str], shared: _Shared) -> NodePlan:
    labels = cluster.nodes[name]
    config = effective_config_name(after, list(intent.configs), default)
    before = effective_config_name(labels, list(cluster.live_configs), cluster.default_config)
    labelled = config is not None and after.get(CONFIG_LABEL) == config
    host = intent.hosts.get(name)
    cfg = intent.configs.get(config) if config else None
    strategy = plugin_strategy(mig_strategy, cfg.mig_strategy if cfg else None)
    try:
        exp = shared.expectation(name, shared.node_gpus(name, host, labels, strategy), strategy, cfg, labelled)
    except SharingError as exc:
        return NodePlan(name, True, config, before, labelled, None, tuple(exc.problems))
    return NodePlan(name, True, config, before, labelled, exp)


def plan_fleet(intent: Intent, cluster: ClusterView) -> FleetPlan:
    """The whole fleet's plan; raises SharingError only for an impossible node selection."""
    candidates = _candidates(intent, cluster)
    present = dict(cluster.nodes)
    present.update({n: {} for n in candidates if n not in present})
    assignments = assign_nodes(intent.configs, present)
    default = (cluster.default_config if intent.default_config is None else intent.default_config) or None
    after = {n: dict(labels, **({CONFIG_LABEL: assignments[n]} if n in assignments else {}))
             for n, labels in cluster.nodes.items()}
    strategy = mig_strategy_of(intent, cluster)
    nodes: Dict[str, NodePlan] = {}
    shared = _Shared(intent, per_node=strategy is None)
    for name in sorted(_scope(intent, cluster, candidates, assignments, after, default)):
        if name not in cluster.nodes:
            nodes[name] = NodePlan(name, False)
        else:
            nodes[name] = _node_plan(name, intent, cluster, after[name], default, strategy, shared)
    missing = tuple(sorted(n for n in intent.hosts if n not in cluster.nodes))
    return FleetPlan(strategy, default, assignments, nodes, missing)


def removal_problems(plan: FleetPlan, cluster: ClusterView, configs: Sequence[str]) -> List[str]:
    """Nothing may point at a config that writing ``configs`` (exactly these) would remove."""
    problems: List[str] = []
    if plan.default_config and plan.default_config not in configs:
        problems.append("the ClusterPolicy default config %r is not one of the configs; set default_config"
                        % plan.default_config)
    for name, labels in sorted(cluster.nodes.items()):
        label = labels.get(CONFIG_LABEL)
        if name not in plan.assignments and label and label in cluster.live_configs and label not in configs:
            problems.append("node %r uses config %r (label %s, ConfigMap %s), which this run would remove; "
                            "select the node in a config or keep %r" % (name, label, CONFIG_LABEL, cluster.configmap, label))
    return problems


# --------------------------------------------------------------------------------------------
# What writing the plan changes (gpu_sharing)


def _yaml_block(mapping: Mapping[str, Any]) -> str:
    """Readable, stable text for a diff: one 'key: value' block per entry."""
    lines: List[str] = []
    for key in sorted(mapping):
        value = mapping[key]
        if isinstance(value, str) and "\n" in value:
            lines.append("%s: |" % key)
            lines.extend("  " + line for line in value.rstrip("\n").split("\n"))
        else:
            lines.append("%s: %s" % (key, value))
    return "\n".join(lines) + ("\n" if lines else "")


def diff_entry(what: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> Dict[str, Any]:
    return _changes_entry(what, _yaml_block(before), _yaml_block(after))


@dataclass(frozen=True)
class SharingChanges:
    """What writing ``rendered`` as the ConfigMap, the assignments as labels and the default changes."""

    configmap_action: str  # created | updated | unchanged
    changed_keys: Tuple[str, ...]
    labels_changed: Dict[str, Dict[str, Optional[str]]]
    device_plugin_before: Dict[str, Any]
    device_plugin_after: Dict[str, Any]
    cluster_policy_patch: Dict[str, Any]
    restart_nodes: Tuple[str, ...]

    def diff(self, configmap: str, ours: Mapping[str, str], rendered: Mapping[str, str], fleet: FleetPlan,
             cluster: ClusterView, policy_name: str) -> List[Dict[str, Any]]:
        """Three diffs: ConfigMap data, node labels, ClusterPolicy spec.devicePlugin.config."""
        return [
            diff_entry("ConfigMap %s data" % configmap, ours, rendered),
            diff_entry("node labels %s" % CONFIG_LABEL,
                       {n: cluster.nodes[n].get(CONFIG_LABEL) for n in sorted(fleet.assignments)}, fleet.assignments),
            diff_entry("ClusterPolicy %s spec.devicePlugin.config" % policy_name,
                       self.device_plugin_before, self.device_plugin_after),
        ]


def sharing_changes(fleet: FleetPlan, cluster: ClusterView, dp_config: Mapping[str, Any], configmap_name: str,
                    ours: Optional[Mapping[str, str]], rendered: Mapping[str, str], live_data: Mapping[str, str],
                    restart: str) -> SharingChanges:
    """``ours``: our ConfigMap's data (None: absent); ``live_data``: what the plugins load now.

    Restarts (``restart`` changed): nodes whose config in force changes, by name or content.
    """
    changed_keys = tuple(sorted(k for k in set(rendered) | set(live_data) if rendered.get(k) != live_data.get(k)))
    labels_changed = {n: {"before": cluster.nodes[n].get(CONFIG_LABEL), "after": c}
                      for n, c in sorted(fleet.assignments.items()) if cluster.nodes[n].get(CONFIG_LABEL) != c}
    wanted = {"name": configmap_name}
    if fleet.default_config != cluster.default_config:
        wanted["default"] = fleet.default_config or ""
    patch = {k: v for k, v in wanted.items() if (dp_config.get(k) or "") != (v or "")}
    action = "created" if ours is None else ("updated" if dict(ours) != dict(rendered) else "unchanged")
    restart_nodes = tuple(sorted(
        n for n, node in fleet.nodes.items()
        if restart == "always" or (restart == "changed" and (
            node.config != node.config_before or (node.config and node.config in changed_keys)))))
    return SharingChanges(
        configmap_action=action,
        changed_keys=changed_keys,
        labels_changed=labels_changed,
        device_plugin_before={k: dp_config.get(k) for k in ("name", "default")},
        device_plugin_after={k: wanted.get(k, dp_config.get(k)) for k in ("name", "default")},
        cluster_policy_patch={"spec": {"devicePlugin": {"config": patch}}} if patch else {},
        restart_nodes=restart_nodes,
    )
