"""GPU Feature Discovery: the node labels of docs/reference/specs.md §8 / §9.4, from the GPUs' *current* state
on every pass, with the config GFD loaded when it started (edit the ConfigMap, restart GFD too).
Labels that no longer apply are removed (``devices.is_gfd_label``); ``nvidia.com/device-plugin.config``
is never written."""

from __future__ import annotations

from typing import Dict, Mapping, Optional

from gpulab.cluster import devices as devmod
from gpulab.cluster.objects import Obj
from gpulab.cluster.operator.context import OperatorContext

GFD_DS = "gpu-feature-discovery"


class GfdController:
    def __init__(self, context: OperatorContext):
        self.context = context

    def sync_node(self, node: Obj, annotations: Mapping[str, Optional[str]]) -> None:
        """Label the node (and write `annotations` in the same update)."""
        name = node["metadata"]["name"]
        gfd_pod = self.context.running_operand_pod(name, GFD_DS)
        gfd = self.context.instance("gpu-feature-discovery", gfd_pod["metadata"]["uid"]) if gfd_pod else None
        if gfd is None:
            self.context.set_labels(name, {}, annotations)
            return
        views = self.context.gpu_views(name)
        labels = devmod.compute_node(views, gfd.strategy, gfd.sharing, self.context.driver_version(name)).labels
        labels["nvidia.com/gfd.timestamp"] = str(int(gfd.started))
        current = node["metadata"].get("labels") or {}
        wanted: Dict[str, Optional[str]] = {key: None for key in current if devmod.is_gfd_label(key) and key not in labels}
        wanted.update(labels)
        self.context.set_labels(name, wanted, annotations)


__all__ = ["GFD_DS", "GfdController"]
