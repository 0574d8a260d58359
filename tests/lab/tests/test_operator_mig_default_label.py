"""The operator's default `nvidia.com/mig.config` label on MIG-capable nodes (docs/reference/specs.md §7.8).

NVIDIA labels a MIG-capable node that has no `nvidia.com/mig.config` label with `all-disabled` only
when the ClusterPolicy's `migManager.config.default` is `all-disabled` (the CRD and chart default);
for "" or any other value the node gets no label and the MIG manager leaves its GPUs alone.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import pytest

from gpulab import gpustate
from gpulab.cluster import manager
from gpulab.cluster.operator.common import mig_default_config
from gpulab.cluster.server import add_nodes
from gpulab.cluster.store import Store

from labtools import wait_until

FAST = manager.Settings(resync_seconds=0.2, operand_start_delay=0.05, pod_start_delay=0.02, pod_stop_delay=0.02,
                        default_runtime=0.05, crash_backoff=0.1, mig_apply_delay=0.01, mig_pause_timeout=5)


@pytest.mark.parametrize("config, label", [
    (None, "all-disabled"),          # no migManager.config: the CRD default
    ({}, "all-disabled"),            # no default key: the CRD default
    ({"default": "all-disabled"}, "all-disabled"),
    ({"default": ""}, ""),
    ({"default": "all-balanced"}, ""),  # only all-disabled is ever set by the operator
    ({"default": "all-1g.5gb"}, ""),
])
def test_default_label_value(config: Optional[Dict[str, Any]], label: str) -> None:
    spec: Dict[str, Any] = {"migManager": {"enabled": True}}
    if config is not None:
        spec["migManager"]["config"] = config
    assert mig_default_config(spec) == label


@pytest.mark.parametrize("default, wanted", [("all-disabled", "all-disabled"), ("", None), ("all-1g.5gb", None)])
def test_unlabelled_node_and_its_layout(tmp_path, default: str, wanted: Optional[str]) -> None:
    path = str(tmp_path / "gpu-a.json")
    gpustate.create(path, "gpu-a", [("A100-40GB", 1)])
    with gpustate.locked(path) as state:  # a layout made before the operator came
        state.gpus[0].mig_current = state.gpus[0].mig_pending = True
    before = gpustate.load(path).gpus[0].mig_current
    store = Store()
    add_nodes(store, [{"name": "gpu-a", "state_file": path}])
    store.create("v1/namespaces", {"metadata": {"name": "gpu-operator"}})
    controllers = manager.start_controllers(store, [{"name": "gpu-a", "state_file": path}], settings=FAST)
    try:
        store.create("nvidia.com/v1/clusterpolicies", {"metadata": {"name": "cluster-policy"}, "spec": {
            "migManager": {"enabled": True, "config": {"default": default}}}})

        def labels() -> Dict[str, str]:
            return store.get("v1/nodes", None, "gpu-a")["metadata"].get("labels") or {}
        wait_until("the MIG manager running", lambda: any(
            (p["metadata"].get("ownerReferences") or [{}])[0].get("name") == "nvidia-mig-manager"
            and (p.get("status") or {}).get("phase") == "Running" for p in store.items("v1/pods", "gpu-operator")))
        assert labels()["nvidia.com/mig.capable"] == "true"
        if wanted:
            wait_until("all-disabled applied", lambda: labels().get("nvidia.com/mig.config.state") == "success")
            assert not gpustate.load(path).gpus[0].mig_current
        else:
            time.sleep(0.5)  # a few controller passes
            assert "nvidia.com/mig.config" not in labels() and "nvidia.com/mig.config.state" not in labels()
            assert gpustate.load(path).gpus[0].mig_current == before
    finally:
        controllers.stop()
