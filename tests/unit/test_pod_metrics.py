"""Parsing the DCGM exporter's Prometheus text and the per-pod attribution check (issue 13 part 5)."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._pod_metrics import (
    MetricsError, attributed_pods, attribution_checks, hold_command, metrics_option_problems, parse_prometheus, proxy_path)

TEXT = """# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n1",container="c",namespace="v",pod="p1",vgpu="0"} 12
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n1",container="c",namespace="v",pod="p2",vgpu="1"} 12
DCGM_FI_DEV_FB_USED{gpu="1",UUID="MIG-b",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",modelName="H \\"x\\""} 0 1700000000

up 1
"""


def test_parse_samples_labels_and_escapes():
    samples = parse_prometheus(TEXT)
    assert [s.name for s in samples] == ["DCGM_FI_DEV_GPU_UTIL"] * 2 + ["DCGM_FI_DEV_FB_USED", "up"]
    assert samples[1].labels["pod"] == "p2" and samples[1].value == 12.0
    assert samples[2].labels["modelName"] == 'H "x"' and samples[2].labels["GPU_I_PROFILE"] == "3g.40gb"
    assert samples[3].labels == {}


@pytest.mark.parametrize("text, where", [
    ('DCGM_FI_DEV_GPU_UTIL{gpu="0" 1', "line 1"),
    ('ok 1\nDCGM_FI_DEV_GPU_UTIL{gpu=0} 1', "line 2: malformed labels"),
    ("DCGM_FI_DEV_GPU_UTIL{} abc", "not a number"),
    ("<html>503</html>", "line 1: not a sample"),
])
def test_malformed_text_names_the_line(text, where):
    with pytest.raises(MetricsError, match=where):
        parse_prometheus(text)


def test_every_pod_needs_a_series_of_its_own():
    attributed = attributed_pods(parse_prometheus(TEXT))
    assert sorted(attributed) == [("v", "p1"), ("v", "p2")]
    checks = attribution_checks("n1", "v", [("p1", "nvidia.com/gpu"), ("p3", "nvidia.com/mig-3g.40gb")], attributed)
    assert [c.ok for c in checks] == [True, False]
    assert "node n1" in checks[1].message and "v/p3" in checks[1].message and "nvidia.com/mig-3g.40gb" in checks[1].message
    failed = attribution_checks("n1", "v", [("p3", "nvidia.com/gpu")], {}, problem="no exporter pod on the node")
    assert not failed[0].ok and "no exporter pod" in failed[0].message and failed[0].actual == "no exporter pod on the node"


def test_options_and_helpers():
    assert metrics_option_problems({"metrics": False, "pods": False}) == []
    assert "needs pods=true" in metrics_option_problems({"metrics": True, "pods": False, "metrics_hold": 5})[0]
    assert "metrics_hold" in metrics_option_problems({"metrics": True, "pods": True, "metrics_hold": 0})[0]
    assert hold_command(["nvidia-smi", "-L"], 5)[-2:] == ["nvidia-smi", "-L"] and "sleep 5" in hold_command(["x"], 5)[2]
    assert proxy_path("gpu-operator", "e-1") == "/api/v1/namespaces/gpu-operator/pods/e-1:9400/proxy/metrics"
