# -*- coding: utf-8 -*-
"""mig_operator_config against an in-memory API: validation, check mode (dry runs), diff, idempotence."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.modules import mig_operator_config  # noqa: E402

HALVES = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]
OTHER = [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.40gb": 1}}]
ARGS = {"configs_by_host": {"gpu-a": {"halves": HALVES}}, "selected": {"gpu-a": "halves", "gpu-b": "all-balanced"}}


def cluster(policy_ref=None, namespace=True):
    fake = FakeK8s()
    if namespace:
        fake.add("Namespace", "gpu-operator")
    spec = {"migManager": {"config": {"name": policy_ref}}} if policy_ref else {}
    fake.add("ClusterPolicy", "cluster-policy", spec=spec)
    return fake


def test_creates_configmap_and_points_the_cluster_policy_at_it(monkeypatch):
    fake = cluster()
    result, failed = run(mig_operator_config, ARGS, fake, monkeypatch, diff=True)
    assert not failed and result["changed"] and result["action"] == "created", result
    assert result["config_map"] == "gpu-operator/gpufleet-mig-parted-config"
    assert result["cluster_policy_found"] and result["cluster_policy_changed"]
    assert "halves" in result["config_names"] and "all-balanced" in result["config_names"]
    text = fake.obj("ConfigMap", "gpufleet-mig-parted-config", "gpu-operator")["data"]["config.yaml"]
    assert "halves:" in text
    assert fake.obj("ClusterPolicy", "cluster-policy")["spec"]["migManager"]["config"]["name"] == \
        "gpufleet-mig-parted-config"
    assert [entry["before_header"] for entry in result["diff"]] == [
        "configmap gpu-operator/gpufleet-mig-parted-config config.yaml", "clusterpolicy cluster-policy"]
    assert result["diff"][0]["before"] == "" and result["diff"][0]["after"] == text
    assert result["diff"][1]["after"] == {"migManager.config.name": "gpufleet-mig-parted-config"}
    assert fake.dry_writes == []


def test_check_mode_sends_dry_runs_also_into_a_missing_namespace(monkeypatch):
    fake = cluster(namespace=False)
    result, failed = run(mig_operator_config, ARGS, fake, monkeypatch, check_mode=True)
    assert not failed and result["changed"] and result["action"] == "created", result
    assert result["cluster_policy_found"] and result["cluster_policy_changed"]
    assert fake.writes == []
    assert [w[:2] for w in fake.dry_writes] == [("apply", "Namespace"), ("apply", "ConfigMap"),
                                                ("patch", "ClusterPolicy")]
    assert fake.obj("Namespace", "gpu-operator") is None


def test_invalid_or_missing_configs_change_nothing(monkeypatch):
    fake = cluster()
    result, failed = run(mig_operator_config, {"configs_by_host": {"a": {"x": HALVES}, "b": {"x": OTHER}}},
                         fake, monkeypatch)
    assert failed and result["msg"].startswith("invalid MIG configs: MIG config 'x' is defined differently")
    assert result["problems"] and not result["changed"]
    result, failed = run(mig_operator_config, dict(ARGS, selected={"gpu-b": "nope"}), fake, monkeypatch)
    assert failed and result["msg"].startswith("host gpu-b: MIG config 'nope' is not defined")
    assert result["config_map"] == "gpu-operator/gpufleet-mig-parted-config"
    assert fake.writes == [] and fake.dry_writes == [] and fake.request_count == 0


def test_policy_already_pointing_and_no_policy(monkeypatch):
    fake = cluster(policy_ref="gpufleet-mig-parted-config")
    result, failed = run(mig_operator_config, dict(ARGS, cluster_policy=""), fake, monkeypatch)
    assert not failed and result["cluster_policy_found"] is False and not result["cluster_policy_changed"]
    result, failed = run(mig_operator_config, ARGS, fake, monkeypatch)
    assert not failed and result["cluster_policy_found"] and not result["cluster_policy_changed"]
    assert [w[:2] for w in fake.writes] == [("apply", "ConfigMap"), ("apply", "ConfigMap")]
