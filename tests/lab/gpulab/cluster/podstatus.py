"""Pod status pieces the lab kubelet writes: conditions and container statuses."""

from __future__ import annotations

from typing import List, Optional

from gpulab.cluster.objects import Obj, now_rfc3339


def conditions(pod: Obj, scheduled: bool, initialized: bool, ready: bool, stamp: float, reason: Optional[str] = None) -> List[Obj]:
    """Pod conditions, keeping lastTransitionTime when a condition's status did not change."""
    previous = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    wanted = [
        ("PodReadyToStartContainers", True),
        ("Initialized", initialized),
        ("Ready", ready),
        ("ContainersReady", ready),
        ("PodScheduled", scheduled),
    ]
    result = []
    for kind, value in wanted:
        text = "True" if value else "False"
        old = previous.get(kind)
        condition = {"type": kind, "status": text, "lastProbeTime": None,
                     "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == text else now_rfc3339(stamp)}
        if not value and kind in ("Ready", "ContainersReady"):
            condition["reason"] = reason or "ContainersNotReady"
        result.append(condition)
    return result


def container_status(container: Obj, state: Obj, ready: bool, restarts: int, last: Optional[Obj] = None) -> Obj:
    image = container.get("image", "")
    running = "running" in state
    status = {
        "name": container["name"],
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{'0' * 64}" if image else "",
        "ready": ready,
        "started": running,
        "restartCount": restarts,
        "state": state,
        "lastState": last or {},
    }
    if "waiting" not in state or restarts:
        status["containerID"] = "containerd://" + format(abs(hash((container["name"], image, restarts))) % (1 << 64), "016x") * 4
    return status


__all__ = ["conditions", "container_status"]
