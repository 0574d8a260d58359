"""Issue 43 (3): gpufleet_dra_manage: true on a Kubernetes 1.33 cluster (no resource.k8s.io/v1) used to pass
preflight; site.yml installed the GPU Operator, and only the DRA play refused the cluster. Now preflight reads
the cluster first and nothing changes: no object's resourceVersion moves, no host state file changes."""

from __future__ import annotations

import pytest

from gpulab import hosts

from rollout_lab import flat, start_lab

pytestmark = pytest.mark.lab_hosts


def snapshot(lab):
    versions = {}
    for kind in ("Node", "Namespace", "ConfigMap", "Secret", "DaemonSet", "ClusterPolicy"):
        try:
            items = lab.k8s.list(kind)
        except Exception:  # pylint: disable=broad-except  # a kind the fresh lab does not serve yet (no CRD)
            items = []
        for obj in items:
            meta = obj["metadata"]
            versions[(kind, meta.get("namespace"), meta["name"])] = meta["resourceVersion"]
    states = {}
    for name, host in lab.hosts.items():
        with open(host["state_file"], "rb") as handle:
            states[name] = handle.read()
    return versions, states


def test_dra_manage_on_kubernetes_1_33_is_refused_by_preflight_before_anything_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULAB_KUBERNETES_VERSION", "1.33.5")  # the lab's API server inherits it
    lab = start_lab(str(tmp_path))
    try:
        before = snapshot(lab)
        result = lab.play("site.yml", gpufleet_dra_manage=True)
        output = flat(result.stdout + result.stderr)
        assert result.returncode != 0, output[-3000:]
        assert "Kubernetes v1.33.5-gpulab is too old for DRA: 1.34 or newer is required" in output, output[-3000:]
        assert "PLAY [Cluster - the GPU Operator]" not in output
        assert snapshot(lab) == before
    finally:
        hosts.down(str(tmp_path))
