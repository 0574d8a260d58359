"""The MIG manager (docs/reference/specs.md §7.4), per MIG-capable node, when its pod starts and whenever
``nvidia.com/mig.config`` changes: validate the name against the mig-parted ConfigMap,
``success`` at once when already applied, else ``pending``, operands paused
(``paused-for-mig-change``; ``false`` stays) and, as mig-parted v0.15.0 does, the third-party
clients' ``nvidia.com/gpu.deploy.client`` when the node carries it; wait for their pods to go
(the DaemonSet pods of any namespace whose nodeSelector uses that key), apply with
``gpulab.migparted`` on the host's state file (busy GPUs make it fail), restore the labels,
``success`` or ``failed``. A failure also goes to the node annotation
``lab.gpufleet.io/mig-config-failure``, a Warning event ``MigConfigFailed`` and the pod's log.
Each reconfiguration runs in its own short-lived thread.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any, Dict, List, Mapping, Optional

import yaml

from gpulab import migparted
from gpulab.cluster.objects import Obj
from gpulab.cluster.operator.common import (CLIENT_LABEL, DEFAULT_MIG_CONFIGMAP, MIG_CONFIG_LABEL,
                                            MIG_FAILURE_ANNOTATION, MIG_STATE_LABEL,
                                            OPERANDS_BY_KEY, PAUSABLE, PAUSED, configmap_volume,
                                            log_line)
from gpulab.cluster.operator.context import OperatorContext

LOG = logging.getLogger("gpulab.cluster.operator")

MIG_MANAGER_DS = "nvidia-mig-manager"


class _Failed(Exception):
    """A reconfiguration step failed before anything was paused (message for the log)."""


class MigManager:
    def __init__(self, context: OperatorContext):
        self.context = context
        self.store = context.store
        self._processed: Dict[str, Optional[str]] = {}  # node -> label value handled
        self._jobs: Dict[str, threading.Thread] = {}
        self._pods: Dict[str, str] = {}  # node -> running mig-manager pod uid
        # the last ConfigMap text parsed, and what it parsed to: every node's MIG manager reads the
        # same ~50-config document; parsing it once per text keeps N nodes' starts linear and cheap
        # (each real MIG manager parses it on its own node, in parallel; here they share 2 cores)
        self._parsed: Optional[tuple] = None
        self._parse_lock = threading.Lock()  # the managers' threads start together: one parses, the others wait

    def started(self, pod: Obj) -> None:
        """A (re)started MIG manager applies the current label again (real: reconcile at start)."""
        node = pod["spec"]["nodeName"]
        with self.context.lock:
            self._processed.pop(node, None)
            self._pods[node] = pod["metadata"]["uid"]

    def run_once(self) -> None:
        """Start a reconfiguration on every node whose label changed since the last one."""
        with self.context.pods_snapshot():
            for node in self.store.items("v1/nodes"):
                self._trigger(node)

    def _trigger(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        pod = self.context.running_operand_pod(name, MIG_MANAGER_DS)
        if pod is None:
            return
        wanted = (node["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL)
        with self.context.lock:
            job = self._jobs.get(name)
            if not wanted or (job is not None and job.is_alive()) or self._processed.get(name) == wanted:
                return
            self._processed[name] = wanted
            thread = threading.Thread(target=self._job, args=(name, wanted, pod), daemon=True, name=f"gpulab-mig-{name}")
            self._jobs[name] = thread
        thread.start()

    def _log(self, pod: Obj, message: str, level: str = "info") -> None:
        try:
            self.store.set_pod_log(pod["metadata"]["namespace"], pod["metadata"]["name"], log_line(message, level), append=True)
        except Exception:  # pylint: disable=broad-except
            pass

    def _job(self, node: str, wanted: str, pod: Obj) -> None:
        try:
            self._reconfigure(node, wanted, pod)
        except _Failed as failure:
            self._finish(node, pod, {}, False, str(failure))
        except Exception as exc:  # pylint: disable=broad-except
            LOG.exception("MIG manager on %s", node)
            self._finish(node, pod, {}, False, f"internal error: {exc}")

    def _state(self, node: str, value: str, failure: Optional[str] = None, extra: Optional[Mapping[str, Optional[str]]] = None) -> None:
        wanted: Dict[str, Optional[str]] = {MIG_STATE_LABEL: value}
        wanted.update(extra or {})
        annotations = {MIG_FAILURE_ANNOTATION: failure} if value in ("success", "failed") else None
        self.context.set_labels(node, wanted, annotations)

    def _load_config(self, pod: Obj, wanted: str) -> Any:
        """The mig-parted config of the pod's ConfigMap, checked to hold `wanted`."""
        volume = configmap_volume(pod["spec"], "mig-parted-config") or DEFAULT_MIG_CONFIGMAP
        data = self.context.configmap_data(pod["metadata"]["namespace"], volume)
        if data is None or "config.yaml" not in data:
            raise _Failed(f'unable to read the MIG configuration: configmap "{volume}" with key config.yaml not found')
        config = self._parse(data["config.yaml"])
        self._log(pod, "Asserting that the requested configuration is present in the configuration file")
        configs = (config or {}).get("mig-configs") if isinstance(config, dict) else None
        if not isinstance(configs, dict) or wanted not in configs:
            raise _Failed(f"Error validating MIG configuration: selected mig-config '{wanted}' not present in the configuration file")
        return config

    def _parse(self, text: str) -> Any:
        with self._parse_lock:
            cached = self._parsed
            if cached is None or cached[0] != text:
                try:
                    cached = (text, yaml.safe_load(text))
                except yaml.YAMLError as exc:
                    raise _Failed(f"unable to parse the MIG configuration file: {exc}") from None
                self._parsed = cached
        return copy.deepcopy(cached[1])

    def _reconfigure(self, node: str, wanted: str, pod: Obj) -> None:
        self._log(pod, f"Updating to MIG config: {wanted}")
        path = self.context.hosts.get(node)
        config = self._load_config(pod, wanted)
        if not path:
            raise _Failed("no GPU state for this node")
        applied, message = migparted.assert_config(path, config, wanted)
        if not applied and "not currently applied" not in message:
            raise _Failed(f"Error validating MIG configuration: {message}")
        self._log(pod, "Checking if the selected MIG config is currently applied or not")
        if applied:
            self._log(pod, "Selected MIG configuration currently applied")
            self._finish(node, pod, {}, True, None)
            return
        paused = self._pause(node, pod)
        if paused is None:
            return
        time.sleep(self.context.settings.mig_apply_delay)
        if self.context.fault("mig-manager-fail") or self.context.fault("mig-manager-fails"):
            self._finish(node, pod, paused, False, "fault injected: mig-manager-fail")
            return
        self._log(pod, "Applying the selected MIG config to the node")
        ok, message = migparted.apply_config(path, config, wanted)
        if ok:
            self._log(pod, message)
            self._restart_validator(node, pod)
        failure = None
        if not ok:
            failure = message if "Error applying" in message else f"Error applying MIG configuration with hooks: {message}"
        self._finish(node, pod, paused, ok, failure)

    def _pause(self, node: str, pod: Obj) -> Optional[Dict[str, str]]:
        """Pause the GPU operands and wait for their pods to go; the labels paused (None: timed
        out, already finished as a failure)."""
        self._log(pod, "Changing the 'nvidia.com/mig.config.state' node label to 'pending'")
        labels = (self.context.node(node) or {}).get("metadata", {}).get("labels") or {}
        # Values "false" stay "false"; absent operands are not touched (docs/reference/specs.md §7.4).
        paused = {f"nvidia.com/gpu.deploy.{key}": PAUSED for key in PAUSABLE
                  if labels.get(f"nvidia.com/gpu.deploy.{key}") not in (None, "false")}
        # mig-parted v0.15.0 (pkg/mig/reconfigure/reconfigure.go, shutdownKubernetesGPUClients):
        # the third-party clients' label only when the node carries it with a value.
        if labels.get(CLIENT_LABEL) not in (None, "", "false"):
            paused[CLIENT_LABEL] = PAUSED
        self._state(node, "pending", extra=paused)
        self._log(pod, "Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector labels")
        deadline = time.time() + self.context.settings.mig_pause_timeout
        watched = [OPERANDS_BY_KEY[key.rsplit(".", 1)[-1]].ds_name for key in paused if key.rsplit(".", 1)[-1] in OPERANDS_BY_KEY]
        while time.time() < deadline and not self.context.stop_event.is_set():
            if not self._operand_pods_on(node, watched) and not self._client_pods_on(node):
                return paused
            time.sleep(0.05)
        self._finish(node, pod, paused, False, "timed out waiting for the operands to shut down")
        return None

    def _restart_validator(self, node: str, pod: Obj) -> None:
        """NVIDIA restarts the validator after a change so that it validates the new devices (§7.7)."""
        self._log(pod, "Restarting validator pod to re-run all validations")
        ds_name = OPERANDS_BY_KEY["operator-validator"].ds_name
        for other in self.store.items("v1/pods", self.context.namespace, field_selector=f"spec.nodeName={node}"):
            if any(ref.get("name") == ds_name for ref in other["metadata"].get("ownerReferences") or []):
                try:
                    self.store.delete("v1/pods", self.context.namespace, other["metadata"]["name"])
                except Exception:  # pylint: disable=broad-except
                    LOG.info("validator pod %s already gone", other["metadata"]["name"])

    def _operand_pods_on(self, node: str, ds_names: List[str]) -> bool:
        for other in self.store.items("v1/pods", self.context.namespace, field_selector=f"spec.nodeName={node}"):
            refs = other["metadata"].get("ownerReferences") or []
            if any(ref.get("name") in ds_names for ref in refs):
                return True
        return False

    def _client_pods_on(self, node: str) -> bool:
        """A DaemonSet pod of any namespace on the node whose nodeSelector uses the client label
        (waitForPodsWithNodeSelector, reconfigure.go, mig-parted v0.15.0)."""
        for other in self.store.items("v1/pods", None, field_selector=f"spec.nodeName={node}"):
            owners = [ref for ref in other["metadata"].get("ownerReferences") or [] if ref.get("controller")]
            if (owners and owners[0].get("kind") == "DaemonSet"
                    and CLIENT_LABEL in ((other.get("spec") or {}).get("nodeSelector") or {})):
                return True
        return False

    def _finish(self, node: str, pod: Obj, paused: Mapping[str, str], ok: bool, failure: Optional[str]) -> None:
        if paused:
            self._log(pod, "Restarting all GPU clients previously shutdown in Kubernetes by reenabling their component-specific nodeSelector labels")
        restore = {key: "true" for key in paused}
        state = "success" if ok else "failed"
        if failure:
            for line in failure.splitlines():
                self._log(pod, line, "error")
            self.store.record_event(self.context.node(node) or {"kind": "Node", "apiVersion": "v1", "metadata": {"name": node}},
                                    "MigConfigFailed", f"MIG manager failed to apply '{self._processed.get(node)}': {failure}",
                                    type="Warning", component="nvidia-mig-manager")
        self._state(node, state, failure=failure, extra=restore)
        self._log(pod, f"Changing the 'nvidia.com/mig.config.state' node label to '{state}'")
        self._log(pod, "Waiting for change to 'nvidia.com/mig.config' label")
        self.context.forget_state(node)


__all__ = ["MIG_MANAGER_DS", "MigManager"]
