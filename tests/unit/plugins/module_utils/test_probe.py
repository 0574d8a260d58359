# -*- coding: utf-8 -*-
"""Unit tests for _probe (issue 15): parsing the probe's JSON line, fair share, latency inflation,
memory isolation, MIG fractions, thresholds, the table and JUnit properties."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import DEFAULT_IMAGE
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof import _probe as p
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _sharing as s
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _expected
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing import _node_gpus
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof import _verify as v


def line(large=600.0, small=15.0, small_ms=0.143, total=143771, allocatable=140000, backend="torch", kernels=None, **extra):
    data = {"probe": p.PROBE_MARKER, "version": 1, "ok": True, "backend": backend, "dtype": "bf16",
            "device": {"name": "NVIDIA H200", "smi": "GPU 0: NVIDIA H200 (UUID: GPU-1)", "mig": False},
            "small": {"n": 1024, "tflops": small, "ms": small_ms},
            "large": {"n": 8192, "tflops": large, "ms": 1.8},
            "copy_gbps": 3900.0, "memory": {"total_mib": total, "allocatable_mib": allocatable}, "seconds": 12.5}
    data.update(extra)
    data.update(kernels or {})
    return json.dumps(data)


# ------------------------------------------------------------------ parsing


def test_parse_takes_the_last_probe_line_after_other_output():
    result = p.parse_probe_output("warming up\n" + line(large=1.0) + "\n" + line(large=640.6) + "\n")
    assert result.large == p.Kernel(8192, 640.6, 1.8)
    assert (result.backend, result.device, result.memory_allocatable_mib, result.mig) == ("torch", "NVIDIA H200", 140000, False)


@pytest.mark.parametrize("log, words", [
    (None, "printed nothing"),
    ("", "printed nothing"),
    ("   \n\n", "printed nothing"),
    ("Traceback (most recent call last):\nImportError: no torch", "no JSON line"),
    (line()[:57], "truncated or malformed JSON"),
    ('{"probe": "gpufleet-probe", "ok": tru', "truncated or malformed JSON"),
    ('{"something": "else"}', "not the probe's"),
    ('[1, 2]', "no JSON line"),
    ('{"probe": "other"}', "not the probe's"),
    (json.dumps({"probe": p.PROBE_MARKER, "ok": False, "error": "no GPU: torch.cuda.is_available() is False"}),
     "the probe failed: no GPU: torch.cuda.is_available() is False"),
    (json.dumps({"probe": p.PROBE_MARKER, "ok": False}), "the probe failed: no reason given"),
    (line(device=None), "field device is missing"),
    (line(memory="lots"), "field memory is missing"),
    (line(kernels={"small": None}), "field small is missing"),
    (line(kernels={"large": {"n": 8192, "tflops": "fast", "ms": 1}}), "large.tflops is 'fast'"),
    (line(kernels={"large": {"n": 8192, "tflops": -1, "ms": 1}}), "large.tflops is -1"),
    (line(kernels={"large": {"n": 8192, "tflops": True, "ms": 1}}), "large.tflops is True"),
    (line(copy_gbps=None), "copy_gbps is None"),
    (line(memory={"total_mib": 1}), "memory.allocatable_mib is None"),
])
def test_malformed_output_is_named(log, words):
    with pytest.raises(p.ProbeOutputError, match=None) as exc:
        p.parse_probe_output(log)
    assert words in str(exc.value)


# ------------------------------------------------------------------ arithmetic


def test_fair_share_and_share_of_fair():
    assert p.fair_share(640.0, 4) == 160.0
    assert p.share_of_fair(160.0, 640.0, 4) == 1.0
    assert p.share_of_fair(80.0, 640.0, 4) == 0.5
    # our H200: 1024^3 time-sliced by 2: 7.5 per process of 39.6 exclusive
    assert round(p.share_of_fair(7.5, 39.6, 2), 2) == 0.38
    assert p.share_of_fair(1.0, 0.0, 2) is None
    with pytest.raises(ValueError, match="replicas must be at least 1"):
        p.fair_share(1.0, 0)


def test_inflation():
    assert p.inflation(0.284, 0.0284) == pytest.approx(10.0)
    assert p.inflation(1.0, 1.0) == 1.0
    assert p.inflation(1.0, 0.0) is None


def test_memory_isolation_allows_slack_only():
    assert p.memory_isolated(143771 // 4, 143771, 4)
    assert p.memory_isolated(int(143771 / 4 * 1.09), 143771, 4)
    assert not p.memory_isolated(140000, 143771, 4)
    assert p.memory_isolated(100, 100, 1)


@pytest.mark.parametrize("profile, slices", [("3g.71gb", 3), ("1g.18gb+me", 1), ("7g.141gb", 7), ("1c.3g.71gb", 1),
                                             ("", None), (None, None), ("gpu", None), ("g.1gb", None)])
def test_profile_compute_slices(profile, slices):
    assert p.profile_compute_slices(profile) == slices


def test_mig_fraction():
    assert p.mig_fraction(3, 7) == pytest.approx(3 / 7)
    assert p.mig_fraction(None, 7) is None
    assert p.mig_fraction(1, None) is None


# ------------------------------------------------------------------ rows and checks


TS = p.ProbeTarget("gpu-a", "nvidia.com/gpu", "time-slicing", 2)
MPS = p.ProbeTarget("gpu-a", "nvidia.com/gpu", "mps", 4)


def out(name, log):
    return p.PodOutput(name, log)


def test_time_slicing_row_from_the_h200_figures():
    runs = {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(
        out("x", line(large=667.0, small=39.6, small_ms=0.0284)),
        [out("s0", line(large=320.3, small=7.5, small_ms=0.284)), out("s1", line(large=320.4, small=7.6, small_ms=0.294))])}
    rows, checks = p.probe_rows([TS], runs, p.Thresholds(min_share=0.5, max_inflation=4))
    row = rows[0]
    assert (row["aggregate_tflops"], row["shared_tflops"], row["share"], row["inflation"]) == (640.7, 320.3, 0.38, 10.35)
    assert row["isolation"] == "no"  # one sharer alone allocated nearly all memory
    failed = [c.message for c in checks if not c.ok]
    assert failed == [
        "probe nvidia.com/gpu on node gpu-a: the worst sharer got 0.38 of its fair share, the minimum is 0.50",
        "probe nvidia.com/gpu on node gpu-a: latency 10.3x the exclusive run, the maximum is 4.0x"]


# Issue 25, a real H200 under MPS as the device plugin runs it (N = 4: active thread percentage 25,
# pinned memory 143,155 / 4 MiB): one client alone 228 TFLOP/s bf16 at 8192^3 and 33,552 MiB
# allocatable; the whole GPU without MPS 659; four clients at once 157-160 each, 635 together,
# latency 1.2x. The small-kernel figures are illustrative (above a quarter, as MPS gives).
H200_WHOLE = p.ProbeTarget("h200-a", "nvidia.com/gpu", "none")
H200_MPS = p.ProbeTarget("h200-b", "nvidia.com/gpu", "mps", 4)


def h200_mps_runs(sharers=(157.0, 158.0, 160.0, 160.0), whole=True):
    runs = {("h200-b", "nvidia.com/gpu"): p.TargetRuns(
        out("x", line(large=228.0, small=40.0, small_ms=0.05, total=143155, allocatable=33552)),
        [out("s%d" % i, line(large=tflops, small=60.0, small_ms=0.06)) for i, tflops in enumerate(sharers)])}
    if whole:
        runs[("h200-a", "nvidia.com/gpu")] = p.TargetRuns(out("w", line(large=659.0, small=77.7, small_ms=0.027)))
    return runs


def test_mps_is_judged_against_a_quarter_of_the_whole_gpu():
    """The lone MPS client is capped (228 of 659): 157 / (228 / 4) = 2.75 'of its fair share' is
    wrong; against a quarter of the whole H200 the worst sharer got 0.95."""
    rows, checks = p.probe_rows([H200_WHOLE, H200_MPS], h200_mps_runs(), p.Thresholds(min_share=0.5, max_inflation=2))
    row = {r["node"]: r for r in rows}["h200-b"]
    assert (row["exclusive_tflops"], row["shared_tflops"], row["aggregate_tflops"]) == (228.0, 157.0, 635.0)
    assert row["share"] == 0.95 and row["inflation"] == 1.2 and row["isolation"] == "yes"
    assert (row["baseline"], row["baseline_tflops"]) == ("whole GPU on node h200-a", 659.0)
    assert all(c.ok for c in checks)
    assert "0.95 (of 659/4)" in p.render_probe_table(rows)


def test_a_starved_mps_client_fails_the_minimum_share():
    rows, checks = p.probe_rows([H200_WHOLE, H200_MPS], h200_mps_runs((60.0, 158.0, 160.0, 160.0)),
                                p.Thresholds(min_share=0.5))
    assert {r["node"]: r for r in rows}["h200-b"]["share"] == 0.36  # 60 / (659 / 4); the capped run / 4 gave 1.05
    assert [c.message for c in checks if not c.ok] == [
        "probe nvidia.com/gpu on node h200-b: the worst sharer got 0.36 of its fair share "
        "(1/4 of the whole GPU on node h200-a), the minimum is 0.50"]


def test_mps_without_a_whole_gpu_of_its_model_is_judged_against_the_sharers_together():
    rows, _checks = p.probe_rows([H200_MPS], h200_mps_runs(whole=False), p.Thresholds())
    assert (rows[0]["share"], rows[0]["baseline"], rows[0]["baseline_tflops"]) == (0.99, "the sharers together", 635.0)
    assert "0.99 (of sum/4)" in p.render_probe_table(rows)
    rows, checks = p.probe_rows([H200_MPS], h200_mps_runs((60.0, 158.0, 160.0, 160.0), whole=False), p.Thresholds(0.5))
    assert rows[0]["share"] == 0.45  # 60 / (538 / 4)
    assert [c.message for c in checks if not c.ok] == [
        "probe nvidia.com/gpu on node h200-b: the worst sharer got 0.45 of its fair share "
        "(1/4 of the sharers together), the minimum is 0.50"]


def test_the_whole_gpu_baseline_prefers_the_node_and_needs_the_same_model():
    here = p.ProbeTarget("h200-b", "nvidia.com/gpu.full", "none")
    h100 = p.ProbeTarget("h100-a", "nvidia.com/gpu", "none")
    sliced = p.ProbeTarget("h200-c", "nvidia.com/gpu", "time-slicing", 2)
    runs = h200_mps_runs()
    runs[("h200-b", here.resource)] = p.TargetRuns(out("h", line(large=640.0, small=70.0)))
    runs[("h100-a", "nvidia.com/gpu")] = p.TargetRuns(out("o", line(large=400.0).replace("NVIDIA H200", "NVIDIA H100")))
    runs[("h200-c", "nvidia.com/gpu")] = p.TargetRuns(out("t", line(large=700.0)), [out("t0", line()), out("t1", line())])
    rows, _checks = p.probe_rows([H200_WHOLE, h100, sliced, here, H200_MPS], runs, p.Thresholds())
    assert {(r["node"], r["resource"]): r for r in rows}[("h200-b", "nvidia.com/gpu")]["baseline"] == "whole GPU on node h200-b"
    del runs[("h200-b", here.resource)]
    rows, _checks = p.probe_rows([H200_WHOLE, h100, sliced, H200_MPS], runs, p.Thresholds())
    row = {r["node"]: r for r in rows}["h200-b"]
    # a lone time-sliced pod holds the whole GPU; the median of the H200s (659, 700), never the H100
    assert (row["baseline"], row["baseline_tflops"]) == ("whole GPU, median of nodes h200-a, h200-c", 679.5)


def test_time_slicing_is_judged_against_its_exclusive_run():
    sharers = [out("a", line(large=320.3)), out("b", line(large=320.6))]
    runs = {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(out("x", line(large=666.0)), sharers)}
    rows, _checks = p.probe_rows([TS], runs, p.Thresholds())
    assert (rows[0]["baseline"], rows[0]["baseline_tflops"]) == ("the lone pod (a whole GPU)", 666.0)


def test_sharers_on_different_devices_are_shown():
    other = line(large=300.0).replace("GPU-1", "GPU-2")
    runs = {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(out("x", line()), [out("a", line(large=300.0)), out("b", other)])}
    rows, _checks = p.probe_rows([TS], runs, p.Thresholds())
    assert rows[0]["sharer_devices"] == 2
    assert "time-slicing  2 on 2 devices" in p.render_probe_table(rows)
    assert dict(p.junit_properties(rows))["probe.gpu-a.nvidia.com/gpu.sharer_devices"] == "2"


def test_no_thresholds_means_only_a_measured_check():
    runs = {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(out("x", line()), [out("a", line(large=1)), out("b", line(large=1))])}
    rows, checks = p.probe_rows([TS], runs, p.Thresholds())
    assert len(rows) == 1 and [(c.name, c.ok, c.actual) for c in checks] == [("nvidia.com/gpu", True, "torch on NVIDIA H200")]


@pytest.mark.parametrize("exclusive, shared, message", [
    (None, [], "probe on node gpu-a (nvidia.com/gpu, exclusive): no probe pod ran"),
    (p.PodOutput("pod-x", None, "FailedScheduling: 0/1 nodes"), [],
     "probe pod pod-x on node gpu-a (nvidia.com/gpu, exclusive): did not finish: FailedScheduling: 0/1 nodes"),
    (p.PodOutput("pod-x", ""), [], "probe pod pod-x on node gpu-a (nvidia.com/gpu, exclusive): the probe printed nothing"),
    (p.PodOutput("pod-x", "", "Error: exit code 2"), [],
     "probe pod pod-x on node gpu-a (nvidia.com/gpu, exclusive): the probe printed nothing (Error: exit code 2)"),
    (out("pod-x", line()), [out("pod-s0", line()[:40])],
     "probe pod pod-s0 on node gpu-a (nvidia.com/gpu, 2 sharers): truncated or malformed JSON"),
])
def test_unusable_output_fails_naming_node_and_pod(exclusive, shared, message):
    runs = {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(exclusive, shared)}
    rows, checks = p.probe_rows([TS], runs, p.Thresholds())
    assert rows == []
    assert any(message in c.message for c in checks if not c.ok), [c.message for c in checks]
    assert all(c.kind == "probe" and c.node == "gpu-a" for c in checks)


def test_missing_sharers_are_reported():
    runs = {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(out("x", line()), [out("s0", line())])}
    rows, checks = p.probe_rows([TS], runs, p.Thresholds())
    assert rows == [] and [c.message for c in checks] == ["probe on node gpu-a (nvidia.com/gpu, 2 sharers): no probe pod ran"]


def test_no_gpu_is_reported():
    no_gpu = json.dumps({"probe": p.PROBE_MARKER, "ok": False, "error": "no GPU visible"})
    _rows, checks = p.probe_rows([TS], {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(out("x", no_gpu))}, p.Thresholds())
    assert "the probe failed: no GPU visible" in checks[0].message


def test_mig_slices_against_the_largest_slice():
    big = p.ProbeTarget("gpu-m", "nvidia.com/mig-3g.71gb", "mig", 1, 3, 7)
    small = p.ProbeTarget("gpu-m", "nvidia.com/mig-1g.18gb", "mig", 1, 1, 7)
    runs = {("gpu-m", big.resource): p.TargetRuns(out("b", line(large=270.0))),
            ("gpu-m", small.resource): p.TargetRuns(out("s", line(large=72.0)))}
    rows, checks = p.probe_rows([big, small], runs, p.Thresholds(min_share=0.9))
    by = {r["resource"]: r for r in rows}
    assert by[big.resource]["share"] == 1.0 and by[big.resource]["expected_fraction"] == 0.429
    assert by[small.resource]["share"] == 0.8 and by[small.resource]["isolation"] == "hardware (MIG)"
    assert [c.message for c in checks if not c.ok] == [
        "probe nvidia.com/mig-1g.18gb on node gpu-m: the slice delivered 0.80 of what its compute slices promise, "
        "the minimum is 0.90"]


def test_mig_slice_against_a_full_gpu_on_the_node():
    full = p.ProbeTarget("gpu-m", "nvidia.com/gpu", "none")
    slice_ = p.ProbeTarget("gpu-m", "nvidia.com/mig-1g.18gb", "mig", 1, 1, 7)
    runs = {("gpu-m", full.resource): p.TargetRuns(out("f", line(large=700.0))),
            ("gpu-m", slice_.resource): p.TargetRuns(out("s", line(large=100.0)))}
    rows, _checks = p.probe_rows([full, slice_], runs, p.Thresholds())
    by = {r["resource"]: r for r in rows}
    assert by[slice_.resource]["share"] == 1.0 and by[full.resource]["share"] is None
    assert by[full.resource]["isolation"] == "exclusive"
    assert p.whole_gpu_tflops([]) is None


# ------------------------------------------------------------------ targets, table, JUnit


def test_targets_from_a_time_sliced_h100_node():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "count": 8, "product": "NVIDIA H100 80GB HBM3"}])
    cfg = s.parse_config({"name": "ts", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]})
    expected = _expected.expected_node("gpu-a", gpus, "none", cfg, labelled=True)
    assert p.probe_targets(expected) == [p.ProbeTarget("gpu-a", "nvidia.com/gpu", "time-slicing", 4)]


def test_targets_from_a_mixed_mig_node():
    gpus = _node_gpus.node_gpus_from_plan([{"model": "H100-80GB", "count": 1, "product": "NVIDIA H100 80GB HBM3",
                                            "mig": {"3g.40gb": 2}}])
    expected = _expected.expected_node("gpu-m", gpus, "mixed", None, labelled=False)
    targets = p.probe_targets(expected)
    assert p.ProbeTarget("gpu-m", "nvidia.com/mig-3g.40gb", "mig", 1, 3, 7) in targets


def test_table_and_junit_properties():
    runs = {("gpu-a", "nvidia.com/gpu"): p.TargetRuns(
        out("x", line(large=667.0, small=39.6, small_ms=0.0284, backend=p.LAB_BACKEND)),
        [out("s0", line(large=320.3, small=7.5, small_ms=0.284)), out("s1", line(large=320.4, small=7.6, small_ms=0.294))])}
    rows, _checks = p.probe_rows([TS], runs, p.Thresholds())
    table = p.render_probe_table(rows).splitlines()
    assert table[0].split()[:3] == ["NODE", "RESOURCE", "SHARING"]
    assert "gpu-a" in table[1] and "0.38" in table[1] and "10.3x" in table[1] and table[1].endswith("lab CPU backend")
    assert "0.0284 -> 0.294" in table[1]
    assert p.render_probe_table([]) == ""
    props = dict(p.junit_properties(rows))
    assert props["probe.gpu-a.nvidia.com/gpu.share"] == "0.38" and props["probe.gpu-a.nvidia.com/gpu.isolation"] == "no"
    assert "probe.gpu-a.nvidia.com/gpu.expected_fraction" not in props


# ------------------------------------------------------------------ options and pods


def params(**extra):
    base = {"probe": True, "probe_program": "print('gpufleet-probe')", "probe_image": DEFAULT_IMAGE,
            "probe_python": "python3", "probe_seconds": 20, "probe_min_share": 0.0, "probe_max_inflation": 0.0}
    base.update(extra)
    return base


def test_probe_options_are_checked_only_when_on():
    assert p.probe_option_problems(params()) == []
    assert p.probe_option_problems(params(probe=False, probe_program=None, probe_seconds=0)) == []
    problems = p.probe_option_problems(params(probe_program=" ", probe_seconds=0, probe_min_share=-1, probe_image=""))
    assert problems == [
        "probe_seconds must be an integer from 1 to 3600, got 0",
        "probe_min_share must be a number from 0 to 1, got -1: a fraction of the fair share; above 1 can never pass, "
        "0 only reports",
        "probe_program must hold the probe's source (the verify role reads roles/verify/files/gpufleet_probe.py)",
        "probe_image must not be empty"]
    assert p.probe_option_problems(params(probe_program="print('hello')")) == [
        "probe_program is not the gpufleet probe (it does not print 'gpufleet-probe')"]


def test_probe_pod_keeps_the_restricted_context_and_mounts_the_program():
    wanted = v.PodSpecWanted("gpu-a", "nvidia.com/gpu", "gpu")
    base = v.pod_manifest(wanted, "pod-1", "gpufleet-verify", "run1", DEFAULT_IMAGE, p.probe_command(params(probe_seconds=5)))
    pod = p.with_probe_volume(base, p.PROBE_CONFIGMAP, "contended")
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["python3", "/opt/gpufleet-probe/gpufleet_probe.py", "--seconds", "5"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "probe", "mountPath": "/opt/gpufleet-probe", "readOnly": True} in container["volumeMounts"]
    assert pod["spec"]["volumes"][0] == {"name": "probe", "configMap": {"name": "gpufleet-probe"}}
    assert pod["metadata"]["labels"][p.PHASE_LABEL] == "contended"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}


def test_only_the_exclusive_probe_measures_allocation():
    assert "--no-allocation" not in p.probe_command(params())
    assert p.probe_command(params(), "contended")[-1] == "--no-allocation"


def test_thresholds_of_params():
    assert p.thresholds_of(params(probe_min_share=0.5, probe_max_inflation=3.0)) == p.Thresholds(0.5, 3.0)
