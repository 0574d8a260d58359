"""The lab's node lifecycle, from the hosts' GPU state files.

A host that rebooted (its state's ``boot_id`` changed) restarts every container on its node (the
kubelet's ``node_rebooted``). A powered-off host (``shutdown -h``) turns its node's ``Ready``
condition ``Unknown`` (``NodeStatusUnknown``) with ``node.kubernetes.io/unreachable``
NoSchedule/NoExecute taints, at once rather than after the real 40 s grace period; powered on
again, ``Ready=True`` and the taints go (pods are not evicted by the NoExecute taint).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List

from gpulab.cluster.objects import Obj, now_rfc3339

LOG = logging.getLogger("gpulab.cluster.nodelifecycle")


class NodeLifecycleController:
    def __init__(self, store: Any, host_state: Callable[[str], Any],
                 node_rebooted: Callable[[str], None]):
        self.store = store
        self.host_state = host_state  # node -> its gpustate.HostState (None: no state file)
        self.node_rebooted = node_rebooted
        self._boot_ids: Dict[str, str] = {}

    def run_once(self) -> None:
        self._notice_reboots(self.store.items("v1/nodes"))

    def _notice_reboots(self, nodes: List[Obj]) -> None:
        """A host that rebooted restarts all its containers: the device plugin re-enumerates the
        GPUs and the MIG manager applies its label again (how MIG layouts come back on Hopper)."""
        for node in nodes:
            name = node["metadata"]["name"]
            state = self.host_state(name)
            if state is None:
                continue
            previous = self._boot_ids.get(name)
            self._boot_ids[name] = state.boot_id
            if previous is not None and previous != state.boot_id:
                LOG.info("node %s rebooted: restarting its containers", name)
                self.node_rebooted(name)
            self._node_readiness(node, bool(getattr(state, "powered_on", True)))

    def _node_readiness(self, node: Obj, powered_on: bool) -> None:
        """A powered-off host stops posting status: the node lifecycle controller marks it
        Unknown and taints it unreachable; powered on again, its kubelet reports Ready."""
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        lost = ready is not None and ready.get("reason") == "NodeStatusUnknown"
        if powered_on == (not lost):
            return
        stamp = now_rfc3339(time.time())

        def mutate(obj: Obj) -> None:
            for condition in obj.setdefault("status", {}).setdefault("conditions", []):
                if condition.get("type") != "Ready":
                    continue
                if powered_on:
                    condition.update(status="True", reason="KubeletReady", message="kubelet is posting ready status (gpulab)",
                                     lastHeartbeatTime=stamp, lastTransitionTime=stamp)
                else:
                    condition.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.",
                                     lastTransitionTime=stamp)
            taints = [t for t in obj.setdefault("spec", {}).get("taints") or [] if t.get("key") != "node.kubernetes.io/unreachable"]
            if not powered_on:
                taints += [{"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": stamp}
                           for effect in ("NoSchedule", "NoExecute")]
            if taints:
                obj["spec"]["taints"] = taints
            else:
                obj["spec"].pop("taints", None)
        try:
            self.store.controller_update("v1/nodes", None, node["metadata"]["name"], mutate)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot update readiness of %s", node["metadata"]["name"])


__all__ = ["NodeLifecycleController"]
