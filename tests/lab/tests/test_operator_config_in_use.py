"""mig_operator_config refuses new items under a config name a node uses (issue 10 #6, specs §7.8).

The MIG manager applies the node's label again whenever its pod starts, reading the ConfigMap then:
new items under a name in use would change that node's layout undrained.
"""

from __future__ import annotations

from labtools import run_module, serve_lab, wait_until

HALVES = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]
THIRDS = [{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.10gb": 3}}]


def test_changed_items_of_a_config_in_use_are_refused_and_nothing_written(tmp_path):
    lab_dir = tmp_path / "lab"
    lab_dir.mkdir()
    running, _states = serve_lab(str(lab_dir), [("gpu-a", "A100-40GB", 1)])
    try:
        base = {"kubeconfig": running.kubeconfig, "cluster_policy": "", "selected": {"gpu-a": "mine"}}
        made = run_module("mig_operator_config", dict(base, configs_by_host={"gpu-a": {"mine": HALVES}}), str(tmp_path))
        assert made["changed"] and not made.get("failed"), made
        # A new name while nothing uses the old one yet: fine (no node label names 'mine').
        unused = run_module("mig_operator_config", dict(base, configs_by_host={"gpu-a": {"mine": THIRDS}}), str(tmp_path))
        assert unused["changed"] and not unused.get("failed"), unused
        running.store.patch("v1/nodes", None, "gpu-a", {"metadata": {"labels": {"nvidia.com/mig.config": "mine"}}},
                            "merge")
        wait_until("label", lambda: running.store.get("v1/nodes", None, "gpu-a")["metadata"]["labels"]
                   .get("nvidia.com/mig.config") == "mine")
        stored = running.store.get("v1/configmaps", "gpu-operator", "gpufleet-mig-parted-config")
        refused = run_module("mig_operator_config", dict(base, configs_by_host={"gpu-a": {"mine": HALVES}}),
                             str(tmp_path))
        assert refused["failed"] and refused["msg"].startswith(
            "MIG config 'mine' in ConfigMap gpu-operator/gpufleet-mig-parted-config would get other items while "
            "node(s) gpu-a use it"), refused
        assert "Give the new layout a new name" in refused["msg"]
        assert running.store.get("v1/configmaps", "gpu-operator", "gpufleet-mig-parted-config") == stored
        renamed = run_module("mig_operator_config", dict(base, configs_by_host={"gpu-a": {"mine": THIRDS, "mine-v2": HALVES}},
                                                         selected={"gpu-a": "mine-v2"}), str(tmp_path))
        assert renamed["changed"] and not renamed.get("failed"), renamed
    finally:
        running.stop()
