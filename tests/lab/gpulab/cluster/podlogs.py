"""Container logs of the virtual cluster's pods (what ``kubectl logs`` reads), kept per pod."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from gpulab.cluster.errors import bad_request
from gpulab.cluster.objects import Obj


class PodLogs:
    """Log text per (namespace, pod name) and container. Not thread-safe: the store locks."""

    def __init__(self) -> None:
        self._logs: Dict[Tuple[str, str], Dict[str, str]] = {}

    def write(self, pod: Obj, text: str, container: Optional[str], append: bool) -> None:
        meta = pod["metadata"]
        container = container or pod["spec"]["containers"][0]["name"]
        logs = self._logs.setdefault((meta.get("namespace") or "", meta["name"]), {})
        logs[container] = (logs.get(container, "") if append else "") + text

    def read(self, pod: Obj, container: Optional[str]) -> str:
        """The log of one container (the only one when `container` is None), like the API."""
        name = pod["metadata"]["name"]
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        if container is None:
            if len(names) > 1:
                raise bad_request("a container name must be specified for pod %s, choose one "
                                  "of: [%s]" % (name, " ".join(names)))
            container = names[0]
        elif container not in names:
            raise bad_request("container %s is not valid for pod %s" % (container, name))
        logs = self._logs.get((pod["metadata"].get("namespace") or "", name), {})
        if container not in logs:
            phase = (pod.get("status") or {}).get("phase")
            if phase in (None, "Pending"):
                raise bad_request('container "%s" in pod "%s" is waiting to start: '
                                  'ContainerCreating' % (container, name))
            return ""
        return logs[container]

    def forget(self, namespace: str, name: str) -> None:
        self._logs.pop((namespace, name), None)


__all__ = ["PodLogs"]
