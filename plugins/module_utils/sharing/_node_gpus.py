# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUs of a node as the sharing plan sees them (``NodeGpus``): from the host's plan, or from the
feature-discovery labels; MIG resource names; the GPUs the device plugin advertises under a strategy.

Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._memo import Memo, frozen
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._component_versions import DevicePlugin, MIG_SUFFIX_RESOURCES
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import CatalogError, find_model, resolve_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import LayoutError, plan_layout
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import (
    MIG_RESOURCE_PREFIX,
    SharingError)

# The base of a MIG resource with a suffix, and the characters GFD drops from a product name.
_MIG_BASE_RE = re.compile(r"^(nvidia\.com/mig-[0-9]+g\.[0-9]+gb)[-.][a-z.]+$")
_PRODUCT_UNSAFE_RE = re.compile(r"[^A-Za-z0-9\-_. ]")


def sanitize_product(name: str) -> str:
    """GFD product label value: drop characters outside [A-Za-z0-9-_. ], spaces become '-' (docs/reference/specs.md §8)."""
    return _PRODUCT_UNSAFE_RE.sub("", name).strip().replace(" ", "-")


def mig_resource_name(profile: str) -> str:
    """Mixed-strategy resource of a GI profile: ``+`` becomes ``.`` (docs/reference/specs.md §9.1)."""
    return MIG_RESOURCE_PREFIX + profile.replace("+", ".")


def profile_of_mig_resource(resource: str) -> str:
    return resource[len(MIG_RESOURCE_PREFIX):]


def advertised_mig_resource(resource: str, plugin: Optional[DevicePlugin]) -> str:
    """The mixed-strategy resource a device-plugin release advertises for a profile's resource: before
    v0.20.0 a profile with a suffix (``+me``, ``-me``, ``+me.all``, ``+gfx``) is counted under its base
    profile, ``nvidia.com/mig-1g.10gb.me`` as ``nvidia.com/mig-1g.10gb`` (docs/reference/specs.md §9.10)."""
    if plugin is None or plugin.at_least(MIG_SUFFIX_RESOURCES):
        return resource
    match = _MIG_BASE_RE.match(resource)
    return match.group(1) if match else resource


@dataclass(frozen=True)
class NodeGpus:
    """The GPUs of one node as the device plugin sees them (physical, before sharing).

    ``mig_devices`` maps the mixed-strategy resource name to the number of MIG devices.
    ``known_mig_resources`` is every mixed resource the node's GPU models can have (for validating
    config resource names); ``None`` when the models are unknown.
    """

    full_gpus: int = 0
    mig_gpus: int = 0
    mig_devices: Tuple[Tuple[str, int], ...] = ()
    product: Optional[str] = None
    models: Tuple[str, ...] = ()
    known_mig_resources: Optional[FrozenSet[str]] = None
    source: str = "plan"

    @property
    def mig_enabled(self) -> bool:
        return self.mig_gpus > 0 or bool(self.mig_devices)

    def mig_dict(self) -> Dict[str, int]:
        return dict(self.mig_devices)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "full_gpus": self.full_gpus,
            "mig_gpus": self.mig_gpus,
            "mig_devices": self.mig_dict(),
            "product": self.product,
            "models": list(self.models),
            "source": self.source,
        }


# Per catalog model, and per model and MIG layout: the same for every host (planned once per fleet).
_MODEL_RESOURCES: Memo[FrozenSet[str]] = Memo()
_LAYOUT_RESOURCES: Memo[Tuple[Optional[Dict[str, int]], str]] = Memo()


def _model_mig_resources(model: Any) -> FrozenSet[str]:
    """Every mixed-strategy resource a catalog model can have (its GI profiles with C == G)."""
    def compute() -> FrozenSet[str]:
        names = set()
        for profile in getattr(model, "profiles", ()) or ():
            pname = getattr(profile, "name", profile)
            if isinstance(pname, str):
                names.add(mig_resource_name(pname))
        return frozenset(names)
    key = getattr(model, "key", None)
    return _MODEL_RESOURCES.get(key if isinstance(key, str) else None, compute)


def _layout_resources(model: Any, layout: Dict[str, Any]) -> Tuple[Optional[Dict[str, int]], str]:
    """(mixed-strategy resources, "") of a valid layout, (None, why) of an invalid one; planned once per
    model and layout (the placement search is the costliest step of a host's plan)."""
    def compute() -> Tuple[Optional[Dict[str, int]], str]:
        try:
            return plan_layout(model, layout).resources("mixed"), ""
        except LayoutError as exc:
            return None, "; ".join(getattr(exc, "problems", None) or [str(exc)])
    plain = all(type(k) is str and type(v) is int for k, v in layout.items())  # pylint: disable=unidiomatic-typecheck
    shape = tuple(sorted(layout.items())) if plain else frozen(layout)  # the usual {profile: count}: a cheap key
    key = getattr(model, "key", None)
    return _LAYOUT_RESOURCES.get((key, shape) if shape is not None and isinstance(key, str) else None, compute)


def _mig_resources(model: Any, model_name: Any, layout: Mapping[str, int], where: str,
                   problems: List[str]) -> Optional[Dict[str, int]]:
    """Mixed-strategy resources of one MIG layout (None, with the problem noted, when it is invalid)."""
    if model is None:
        problems.append("%s: a MIG layout needs the GPU model" % where)
        return None
    resources, detail = _layout_resources(model, dict(layout))
    if resources is None:
        problems.append("%s: MIG layout %s is invalid for %s: %s" % (where, dict(layout), model_name, detail))
        return None
    return dict(resources)


def node_gpus_from_plan(gpus: Sequence[Mapping[str, Any]], where: str = "node") -> NodeGpus:
    """Build NodeGpus from planned GPUs: ``[{model, count=1, mig: {profile: n} | None, product}]``.

    MIG devices come from the planner (``plan_layout(...).resources("mixed")``), so the layout is
    validated against the model's geometry here too.
    """
    problems: List[str] = []
    full = 0
    mig_gpus = 0
    mig: Dict[str, int] = {}
    products = set()
    models: List[str] = []
    known: set = set()
    for index, gpu in enumerate(gpus):
        gwhere = "%s gpus[%d]" % (where, index)
        count = gpu.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            problems.append("%s: count must be an integer >= 1, got %r" % (gwhere, count))
            continue
        model_name = gpu.get("model")
        try:
            model = resolve_model(str(model_name), gpu.get("pci_device_id")) if model_name else None
        except CatalogError as exc:
            problems.append("%s: unknown GPU model %r (%s)" % (gwhere, model_name, exc))
            continue
        if model is not None:
            key = getattr(model, "key", None) or str(model_name)
            models.extend([key] if key not in models else [])
            known.update(_model_mig_resources(model))
        if gpu.get("product"):
            products.add(sanitize_product(str(gpu["product"])))
        if not gpu.get("mig"):
            full += count
            continue
        resources = _mig_resources(model, model_name, gpu["mig"], gwhere, problems)
        if resources is None:
            continue
        mig_gpus += count
        for rname, n in resources.items():
            mig[rname] = mig.get(rname, 0) + n * count
    if len(products) > 1:
        problems.append("%s: GPUs of different products on one node (%s) are not supported" % (where, ", ".join(sorted(products))))
    if problems:
        raise SharingError(problems)
    return NodeGpus(
        full_gpus=full,
        mig_gpus=mig_gpus,
        mig_devices=tuple(sorted(mig.items())),
        product=products.pop() if products else None,
        models=tuple(models),
        known_mig_resources=frozenset(known) if known else None,
        source="plan",
    )


def _int_label(labels: Mapping[str, str], key: str) -> Optional[int]:
    try:
        return int(labels[key])
    except (KeyError, TypeError, ValueError):
        return None


def _mixed_from_labels(labels: Mapping[str, str], count: int, mig: Mapping[str, int], product: Optional[str],
                       where: str) -> NodeGpus:
    """A node with MIG device labels: every GPU MIG-enabled (``nvidia.com/gpu.replicas=0``: GFD labels
    MIG parents without sharing, docs/reference/specs.md §8, §8.2), else the labels cannot tell the layout."""
    if labels.get("nvidia.com/gpu.replicas") == "0":
        return NodeGpus(
            full_gpus=0,
            mig_gpus=count,
            mig_devices=tuple(sorted(mig.items())),
            product=product,
            source="labels",
            **_label_model(product),
        )
    raise SharingError(
        [
            "%s: has MIG devices (%s) next to full GPUs; give its GPU plan (nodes[].gpus) so the expected "
            "capacity can be computed" % (where, ", ".join(sorted(mig)))
        ]
    )


def node_gpus_from_labels(labels: Mapping[str, str], mig_strategy: str, where: str = "node") -> NodeGpus:
    """Physical GPUs read back from GFD labels, for nodes without a GPU plan.

    Works for MIG-disabled nodes, and for MIG nodes whose layout the labels fully determine
    (single strategy; mixed with every GPU MIG-enabled, shown by ``nvidia.com/gpu.replicas=0``).
    Anything else needs a plan, and the error says so.
    """
    count = _int_label(labels, "nvidia.com/gpu.count")
    if count is None:
        raise SharingError(["%s: no GPU plan given and no nvidia.com/gpu.count label (is GPU feature discovery running?)" % where])
    product = labels.get("nvidia.com/gpu.product") or None
    mig = {}
    for key in labels:
        if key.startswith(MIG_RESOURCE_PREFIX) and key.endswith(".count"):
            n = _int_label(labels, key)
            if n:
                mig[key[: -len(".count")]] = n
    if product is not None and product.endswith("-MIG-INVALID"):
        # GFD's invalid single-strategy labels (docs/reference/specs.md §8.1): no layout to read back.
        raise SharingError(["%s: GPU feature discovery reports nvidia.com/gpu.product=%s: the GPUs do not fit the "
                            "single MIG strategy (MIG on and off mixed, several profiles, or MIG on without devices); "
                            "give its GPU plan or fix its MIG layout" % (where, product)])
    single_mig = product is not None and "-MIG-" in product
    if product:
        product = re.sub(r"(-MIG-.*)?(-SHARED)?$", "", product, count=1)
    if single_mig:
        profile = (labels.get("nvidia.com/gpu.product") or "").split("-MIG-", 1)[1]
        profile = re.sub(r"-SHARED$", "", profile)
        return NodeGpus(
            mig_gpus=0,
            mig_devices=((mig_resource_name(profile), count),),
            product=product,
            source="labels",
            **_label_model(product),
        )
    if mig or (mig_strategy == "none" and labels.get("nvidia.com/gpu.replicas") == "0"):
        return _mixed_from_labels(labels, count, mig, product, where)
    if labels.get("nvidia.com/mig.config") not in (None, "", "all-disabled") and mig_strategy == "none":
        raise SharingError(
            ["%s: MIG config %r is set but the MIG strategy is none; give its GPU plan" % (where, labels.get("nvidia.com/mig.config"))]
        )
    return NodeGpus(full_gpus=count, product=product, source="labels", **_label_model(product))


def _label_model(product: Optional[str]) -> Dict[str, Any]:
    """The catalog model of a GFD product label (``NVIDIA-H100-80GB-HBM3``), so that a config naming a MIG
    resource the model cannot have is refused for a node known only by its labels, as for a planned one."""
    # GFD writes the product name with '-' for spaces (docs/reference/specs.md §8): undo the prefix's.
    model = find_model(re.sub(r"^NVIDIA-", "NVIDIA ", product)) if product else None
    if model is None:
        return {}
    return {"models": (model.key,), "known_mig_resources": _model_mig_resources(model)}


def node_gpus_for(node: str, gpus: Optional[Sequence[Mapping[str, Any]]], labels: Mapping[str, str],
                  mig_strategy: str) -> NodeGpus:
    """The node's GPUs from its planned GPU list (``[{model, count, mig, product}]``), else from its labels.

    Turning a host's intent (GPU facts + MIG selection) into that list is ``_fleet_plan.HostPlan``'s job.
    """
    where = "node %r" % node
    if gpus:
        if isinstance(gpus, (str, Mapping)) or not isinstance(gpus, Sequence) or not all(isinstance(g, Mapping) for g in gpus):
            raise SharingError(["%s: the GPU plan must be a list of {model, count, mig, product}" % where])
        return node_gpus_from_plan(gpus, where)
    return node_gpus_from_labels(labels, mig_strategy, where)


def advertised_gpus(gpus: NodeGpus, mig_strategy: str, plugin: Optional[DevicePlugin]) -> NodeGpus:
    """``gpus`` with the mixed-strategy MIG resources named as ``plugin`` advertises them (§9.10)."""
    if mig_strategy != "mixed":
        return gpus
    merged: Dict[str, int] = {}
    for resource, count in gpus.mig_devices:
        name = advertised_mig_resource(resource, plugin)
        merged[name] = merged.get(name, 0) + count
    known = gpus.known_mig_resources
    return replace(gpus, mig_devices=tuple(sorted(merged.items())),
                   known_mig_resources=None if known is None else frozenset(advertised_mig_resource(r, plugin) for r in known))
