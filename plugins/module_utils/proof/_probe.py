# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sharing probe (issue 15): what a share of a GPU delivers, judged from the probe's JSON line.

Pure logic, no I/O. The probe program (``roles/verify/files/gpufleet_probe.py``) prints one JSON
line; ``parse_probe_output`` turns a pod log into a ``ProbeResult`` or a clear ``ProbeOutputError``
(no output, truncated JSON, no GPU). ``probe_rows`` turns the exclusive and contended runs of one
node into report rows and ``Check`` objects: fair share, latency inflation, memory isolation and
the user's thresholds.

What a sharer's fair share is measured against (issue 25; docs/sharing.md, "How each sharing kind
is judged"): 1/N of the whole GPU. Under time-slicing the lone pod of the exclusive run holds the
whole GPU. Under MPS it does not: NVIDIA's control daemon caps every client, a lone one too, at
100/N of the threads and 1/N of the memory, and puts the GPU in EXCLUSIVE_PROCESS compute mode
(k8s-device-plugin v0.20.0, ``cmd/mps-control-daemon/mps/daemon.go``), so no pod can measure the
uncapped GPU and the capped figure is not proportional to the thread share (a real H200: 25 % of
the threads gave 228 of 659 TFLOP/s). An MPS share is therefore judged against a whole GPU of the
same model probed in the same run (this node first, else the median of the other nodes), else
against the sharers' sum.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import find_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs import interpreter_problem, probe_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check, pods_for

PROBE_MARKER = "gpufleet-probe"
LAB_BACKEND = "lab CPU backend"
# A sharer that can allocate more than its 1/N of the memory by this factor is not memory-isolated.
ISOLATION_SLACK = 1.1
SHARINGS = ("time-slicing", "mps", "mig", "none")
# What a contended resource's fair share is 1/N of (row "baseline"), besides "whole GPU on node X".
LONE_POD = "the lone pod (a whole GPU)"
SHARERS_TOGETHER = "the sharers together"
PROGRAM_KEY = "gpufleet_probe.py"
PROBE_CONFIGMAP = "gpufleet-probe"  # in the verification namespace; created or updated, left in place
PROGRAM_DIR = "/opt/gpufleet-probe"
PHASE_LABEL = "gpufleet.sharing/probe-phase"


class ProbeOutputError(ValueError):
    """The probe printed nothing usable; the message says what was wrong with the output."""


@dataclass(frozen=True)
class Kernel:
    """One matrix-multiply measurement: size n (n x n x n), throughput and time per call."""

    n: int
    tflops: float
    ms: float


@dataclass(frozen=True)
class ProbeResult:
    backend: str
    device: str
    smi: str
    mig: bool
    dtype: str
    small: Kernel
    large: Kernel
    copy_gbps: float
    memory_total_mib: int
    memory_allocatable_mib: int


@dataclass(frozen=True)
class PodOutput:
    """A probe pod as the run saw it: its log (None when it never finished) and why not."""

    pod: str
    log: Optional[str]
    reason: str = ""


@dataclass(frozen=True)
class ProbeTarget:
    """One node and resource type to probe; ``replicas`` sharers run at once when > 1."""

    node: str
    resource: str
    sharing: str  # one of SHARINGS
    replicas: int = 1
    compute_slices: Optional[int] = None  # MIG: the profile's compute slices
    total_slices: Optional[int] = None  # MIG: the GPU's compute slices (7 on 8-slice models)

    @property
    def contended(self) -> bool:
        return self.replicas > 1


@dataclass(frozen=True)
class Thresholds:
    """``min_share``: worst sharer / fair share (0 = no limit); ``max_inflation``: latency x (0 = no limit)."""

    min_share: float = 0.0
    max_inflation: float = 0.0


@dataclass
class TargetRuns:
    """The exclusive run (one pod alone) and the contended runs (``replicas`` pods at once) of one target."""

    exclusive: Optional[PodOutput] = None
    shared: List[PodOutput] = field(default_factory=list)


def _number(data: Mapping[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ProbeOutputError("field %s%s is %r, not a non-negative number" % (where, key, value))
    return float(value)


def _kernel(data: Mapping[str, Any], key: str) -> Kernel:
    raw = data.get(key)
    if not isinstance(raw, dict):
        raise ProbeOutputError("field %s is missing" % key)
    return Kernel(int(_number(raw, "n", key + ".")), _number(raw, "tflops", key + "."), _number(raw, "ms", key + "."))


def _last_json_line(log: str) -> Dict[str, Any]:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    if not lines:
        raise ProbeOutputError("the probe printed nothing")
    candidates = [line for line in lines if line.startswith("{")]
    if not candidates:
        raise ProbeOutputError("no JSON line in the output (last line: %s)" % lines[-1][:200])
    try:
        data = json.loads(candidates[-1])
    except ValueError as exc:
        raise ProbeOutputError("truncated or malformed JSON line (%s): %s" % (exc, candidates[-1][:200])) from None
    if not isinstance(data, dict) or data.get("probe") != PROBE_MARKER:
        raise ProbeOutputError("the JSON line is not the probe's (no \"probe\": %r)" % PROBE_MARKER)
    return data


def parse_probe_output(log: Optional[str]) -> ProbeResult:
    """The probe's result from a pod log; ProbeOutputError names what is wrong."""
    data = _last_json_line(log or "")
    if data.get("ok") is not True:
        raise ProbeOutputError("the probe failed: %s" % (data.get("error") or "no reason given"))
    device = data.get("device")
    if not isinstance(device, dict):
        raise ProbeOutputError("field device is missing")
    memory = data.get("memory")
    if not isinstance(memory, dict):
        raise ProbeOutputError("field memory is missing")
    return ProbeResult(
        backend=str(data.get("backend") or "unknown"), device=str(device.get("name") or "unknown"),
        smi=str(device.get("smi") or ""), mig=bool(device.get("mig")), dtype=str(data.get("dtype") or "?"),
        small=_kernel(data, "small"), large=_kernel(data, "large"), copy_gbps=_number(data, "copy_gbps", ""),
        memory_total_mib=int(_number(memory, "total_mib", "memory.")),
        memory_allocatable_mib=int(_number(memory, "allocatable_mib", "memory.")))


# --------------------------------------------------------------------------------------------
# Arithmetic


def fair_share(whole: float, replicas: int) -> float:
    """What each of ``replicas`` sharers would get of the whole GPU's figure if nothing were lost."""
    if replicas < 1:
        raise ValueError("replicas must be at least 1, not %d" % replicas)
    return whole / replicas


def share_of_fair(value: float, whole: float, replicas: int) -> Optional[float]:
    """``value`` as a fraction of the fair share (1.0 = no loss); None without a whole-GPU figure."""
    fair = fair_share(whole, replicas)
    return None if fair <= 0 else value / fair


def inflation(shared_ms: float, exclusive_ms: float) -> Optional[float]:
    """How many times longer one call takes when shared; None without an exclusive figure."""
    return None if exclusive_ms <= 0 else shared_ms / exclusive_ms


def memory_isolated(allocatable_mib: int, total_mib: int, replicas: int) -> bool:
    """Could one sharer allocate no more than its 1/N of the memory (with ISOLATION_SLACK)?"""
    return allocatable_mib <= total_mib / max(1, replicas) * ISOLATION_SLACK


def mig_fraction(compute_slices: Optional[int], total_slices: Optional[int]) -> Optional[float]:
    """The share of the GPU's compute a MIG slice should deliver (compute slices / the GPU's)."""
    if not compute_slices or not total_slices:
        return None
    return compute_slices / total_slices


def profile_compute_slices(profile: Optional[str]) -> Optional[int]:
    """'3g.71gb' -> 3, '1c.3g.71gb' -> 1 (the compute instance's), else None."""
    head = (profile or "").split(".", 1)[0]
    return int(head[:-1]) if len(head) > 1 and head[-1] in "gc" and head[:-1].isdigit() else None


# --------------------------------------------------------------------------------------------
# Rows and checks


def _round(value: Optional[float], digits: int = 2) -> Optional[float]:
    return None if value is None else round(value, digits)


def _sig(value: Optional[float]) -> Optional[float]:
    """Four significant digits (the lab CPU backend's figures are a million times smaller than a GPU's)."""
    return None if value is None else float("%.4g" % value)


def read_output(target: ProbeTarget, phase: str, output: Optional[PodOutput]) -> Tuple[Optional[ProbeResult], List[Check]]:
    """One pod's result, or a failed check naming the node, the pod and what was wrong."""
    where = "%s, %s" % (target.resource, phase)
    if output is None:
        return None, [Check(target.node, "probe", target.resource, "probe output", "no pod", False,
                            "probe on node %s (%s): no probe pod ran" % (target.node, where))]
    if output.log is None:
        problem = "did not finish: %s" % (output.reason or "no reason reported")
    else:
        try:
            return parse_probe_output(output.log), []
        except ProbeOutputError as exc:
            problem = str(exc) + (" (%s)" % output.reason if output.reason else "")
    return None, [Check(target.node, "probe", target.resource, "probe output", "unusable", False,
                        "probe pod %s on node %s (%s): %s" % (output.pod, target.node, where, problem))]


def _base_row(target: ProbeTarget, exclusive: ProbeResult) -> Dict[str, Any]:
    return {
        "node": target.node, "resource": target.resource, "sharing": target.sharing, "replicas": target.replicas,
        "backend": exclusive.backend, "device": exclusive.device, "smi": exclusive.smi, "mig": exclusive.mig,
        "dtype": exclusive.dtype, "small_n": exclusive.small.n, "large_n": exclusive.large.n,
        "exclusive_tflops": _sig(exclusive.large.tflops), "exclusive_small_tflops": _sig(exclusive.small.tflops),
        "exclusive_ms": _sig(exclusive.small.ms), "copy_gbps": _sig(exclusive.copy_gbps),
        "memory_total_mib": exclusive.memory_total_mib, "memory_allocatable_mib": exclusive.memory_allocatable_mib,
        "shared_tflops": None, "shared_small_tflops": None, "aggregate_tflops": None, "aggregate_small_tflops": None,
        "shared_ms": None, "share": None, "inflation": None, "expected_fraction": None, "sharer_devices": None,
        "baseline": None, "baseline_tflops": None,
        "isolation": "hardware (MIG)" if target.sharing == "mig" else (
            "exclusive" if not target.contended else
            "yes" if memory_isolated(exclusive.memory_allocatable_mib, exclusive.memory_total_mib, target.replicas) else "no"),
    }


@dataclass(frozen=True)
class Baseline:
    """The whole GPU's large and small figures a fair share is 1/N of, and where they come from."""

    large: float
    small: float
    source: str


def contended_row(target: ProbeTarget, exclusive: ProbeResult, shared: Sequence[ProbeResult],
                  baseline: Optional[Baseline] = None) -> Dict[str, Any]:
    """Per-replica (the worst sharer), aggregate and latency next to the exclusive run; the share
    against 1/N of ``baseline`` (default: the exclusive run, a whole GPU under time-slicing)."""
    row = _base_row(target, exclusive)
    whole = baseline or Baseline(exclusive.large.tflops, exclusive.small.tflops, LONE_POD)
    worst_large = min(r.large.tflops for r in shared)
    worst_small = min(r.small.tflops for r in shared)
    shares = [s for s in (share_of_fair(worst_large, whole.large, target.replicas),
                          share_of_fair(worst_small, whole.small, target.replicas)) if s is not None]
    row.update(shared_tflops=_sig(worst_large), shared_small_tflops=_sig(worst_small),
               aggregate_tflops=_sig(sum(r.large.tflops for r in shared)),
               aggregate_small_tflops=_sig(sum(r.small.tflops for r in shared)),
               baseline=whole.source, baseline_tflops=_sig(whole.large),
               shared_ms=_sig(max(r.small.ms for r in shared)), sharer_devices=len({r.smi for r in shared}),
               share=_round(min(shares) if shares else None),
               inflation=_round(inflation(max(r.small.ms for r in shared), exclusive.small.ms)))
    return row


def mig_row(target: ProbeTarget, exclusive: ProbeResult, whole_tflops: Optional[float]) -> Dict[str, Any]:
    """A MIG slice's figure as a fraction of what its compute slices promise of the whole GPU."""
    row = _base_row(target, exclusive)
    fraction = mig_fraction(target.compute_slices, target.total_slices)
    row["expected_fraction"] = _round(fraction, 3)
    if fraction and whole_tflops:
        row["share"] = _round(exclusive.large.tflops / (whole_tflops * fraction))
    return row


@dataclass(frozen=True)
class TargetResult:
    target: ProbeTarget
    result: ProbeResult
    shared: Tuple[ProbeResult, ...] = ()


def whole_gpu_tflops(targets: Sequence[TargetResult]) -> Optional[float]:
    """The whole GPU's large-kernel figure on a node: a full GPU probed alone, else the largest
    MIG slice scaled by its compute fraction."""
    full = [t.result.large.tflops for t in targets if t.target.sharing == "none"]
    if full:
        return max(full)
    slices = [(mig_fraction(t.target.compute_slices, t.target.total_slices) or 0, t.result.large.tflops)
              for t in targets if t.target.sharing == "mig"]
    fraction, tflops = max(slices, default=(0, 0.0))
    return tflops / fraction if fraction else None


def _holds_a_whole_gpu(item: TargetResult) -> bool:
    """An unshared GPU, or the lone pod of a time-sliced one (time-slicing caps nothing); not a MIG slice."""
    return item.target.sharing in ("none", "time-slicing") and item.target.compute_slices is None and not item.result.mig


def mps_baseline(item: TargetResult, done: Sequence[TargetResult]) -> Baseline:
    """What an MPS resource's fair share is 1/N of: a whole GPU of the same model (device name and
    backend) probed in this run, on this node if there is one, else the median of the other nodes';
    else the sharers' sum (they hold all the threads together: a lower bound that still shows a
    sharer starved by the others). Never the exclusive run: the control daemon capped it at 1/N."""
    same = [t for t in done if t is not item and _holds_a_whole_gpu(t) and t.result.device == item.result.device
            and t.result.backend == item.result.backend]
    whole = [t for t in same if t.target.node == item.target.node] or same
    if not whole:
        return Baseline(sum(r.large.tflops for r in item.shared), sum(r.small.tflops for r in item.shared),
                        SHARERS_TOGETHER)
    nodes = sorted({t.target.node for t in whole})
    source = "whole GPU on node %s" % nodes[0] if len(nodes) == 1 else "whole GPU, median of nodes %s" % ", ".join(
        nodes[:3] + (["and %d more" % (len(nodes) - 3)] if len(nodes) > 3 else []))
    return Baseline(median(t.result.large.tflops for t in whole), median(t.result.small.tflops for t in whole), source)


def _share_message(row: Mapping[str, Any], min_share: float) -> str:
    if row["sharing"] == "mig":
        got = "the slice delivered %.2f of what its compute slices promise" % row["share"]
    else:
        got = "the worst sharer got %.2f of its fair share" % row["share"]
        if row["sharing"] == "mps":
            got += " (1/%d of %s)" % (row["replicas"], "the " + row["baseline"] if row["baseline"].startswith("whole")
                                      else row["baseline"])
    return "probe %s on node %s: %s, the minimum is %.2f" % (row["resource"], row["node"], got, min_share)


def threshold_checks(row: Mapping[str, Any], thresholds: Thresholds) -> List[Check]:
    """The measured row against the user's thresholds (one passing 'measured' check otherwise)."""
    node, resource = row["node"], row["resource"]
    checks = [Check(node, "probe", resource, "measured", "%s on %s" % (row["backend"], row["device"]), True)]
    share, factor = row["share"], row["inflation"]
    if thresholds.min_share > 0 and share is not None:
        ok = share >= thresholds.min_share
        checks.append(Check(node, "probe", resource + " share", ">= %.2f" % thresholds.min_share, "%.2f" % share, ok,
                            "" if ok else _share_message(row, thresholds.min_share)))
    if thresholds.max_inflation > 0 and factor is not None:
        ok = factor <= thresholds.max_inflation
        checks.append(Check(node, "probe", resource + " latency", "<= %.1fx" % thresholds.max_inflation, "%.1fx" % factor, ok,
                            "" if ok else "probe %s on node %s: latency %.1fx the exclusive run, the maximum is %.1fx"
                            % (resource, node, factor, thresholds.max_inflation)))
    return checks


def probe_rows(targets: Sequence[ProbeTarget], runs: Mapping[Tuple[str, str], TargetRuns],
               thresholds: Thresholds) -> Tuple[List[Dict[str, Any]], List[Check]]:
    """Rows (one per node and resource that gave usable output) and checks for every target.

    ``runs`` maps (node, resource) to its pods' outputs. A contended target needs its exclusive
    run and all ``replicas`` contended runs; any unusable output fails a check naming the pod.
    """
    checks: List[Check] = []
    done: List[TargetResult] = []
    for target in targets:
        run = runs.get((target.node, target.resource)) or TargetRuns()
        exclusive, problems = read_output(target, "exclusive", run.exclusive)
        shared: List[ProbeResult] = []
        if target.contended:
            missing: List[Optional[PodOutput]] = [None] * max(0, target.replicas - len(run.shared))
            for output in list(run.shared) + missing:
                result, more = read_output(target, "%d sharers" % target.replicas, output)
                problems += more
                shared += [result] if result else []
        checks += problems
        if exclusive is not None and not problems:
            done.append(TargetResult(target, exclusive, tuple(shared)))
    rows = []
    for item in done:
        if item.target.contended:
            row = contended_row(item.target, item.result, item.shared,
                                mps_baseline(item, done) if item.target.sharing == "mps" else None)
        elif item.target.sharing == "mig":
            row = mig_row(item.target, item.result, whole_gpu_tflops([t for t in done if t.target.node == item.target.node]))
        else:
            row = _base_row(item.target, item.result)
        rows.append(row)
        checks += threshold_checks(row, thresholds)
    return rows, checks


# --------------------------------------------------------------------------------------------
# What to probe, and the table


def probe_targets(expected: ExpectedNode) -> List[ProbeTarget]:
    """One target per resource type the node advertises (the verification pods' resources)."""
    models = expected.gpus.models if expected.gpus is not None else ()
    model = find_model(models[0]) if models else None
    total = model.compute_slices if model is not None else None
    targets = []
    for wanted in pods_for(expected):
        record = expected.record_for(wanted.resource)
        replicas, strategy = max(1, record.replicas), record.strategy
        sharing = strategy if replicas > 1 and strategy in SHARINGS else ("mig" if wanted.device_kind == "mig" else "none")
        slices = profile_compute_slices(wanted.mig_profile) if wanted.device_kind == "mig" else None
        targets.append(ProbeTarget(expected.node, wanted.resource, sharing, replicas, slices, total if slices else None))
    return targets


def _cell(value: Any, fmt: str = "%s") -> str:
    return "-" if value is None else fmt % value


def _gib(mib: int) -> str:
    return "%.1f" % (mib / 1024.0)


PROBE_HEADER = ["NODE", "RESOURCE", "SHARING", "N", "EXCL TFLOPS", "PER-REPLICA", "AGGREGATE", "SHARE",
                "LATENCY ms", "INFLATION", "MEM GiB", "ISOLATED", "BACKEND"]


def probe_table_rows(rows: Sequence[Mapping[str, Any]]) -> List[List[str]]:
    """The cells of the probe table (docs/sharing.md, "Measuring your own fleet", explains each)."""
    cells = []
    for row in rows:
        latency = _cell(row["exclusive_ms"], "%.4g") + ("" if row["shared_ms"] is None else " -> %.4g" % row["shared_ms"])
        share = _cell(row["share"], "%.2f") + ("" if row["expected_fraction"] is None else " (of %.3f)" % row["expected_fraction"])
        if row["sharing"] == "mps" and row["share"] is not None:  # what the share is 1/N of
            share += " (of %s/%d)" % ("sum" if row["baseline"] == SHARERS_TOGETHER else "%.4g" % row["baseline_tflops"],
                                      row["replicas"])
        spread = row["sharer_devices"] or 1  # sharers the device plugin put on different devices contend less
        count = str(row["replicas"]) + (" on %d devices" % spread if spread > 1 else "")
        cells.append([row["node"], row["resource"].replace("nvidia.com/", ""), row["sharing"], count,
                      "%.4g / %.4g" % (row["exclusive_tflops"], row["exclusive_small_tflops"]),
                      "-" if row["shared_tflops"] is None else "%.4g / %.4g" % (row["shared_tflops"], row["shared_small_tflops"]),
                      "-" if row["aggregate_tflops"] is None else "%.4g / %.4g" % (row["aggregate_tflops"], row["aggregate_small_tflops"]),
                      share, latency, _cell(row["inflation"], "%.1fx"),
                      "%s / %s" % (_gib(row["memory_allocatable_mib"]), _gib(row["memory_total_mib"])),
                      row["isolation"], row["backend"]])
    return cells


def render_probe_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A fixed-width table: one line per node and resource; '' when nothing was probed."""
    if not rows:
        return ""
    body = probe_table_rows(rows)
    widths = [max(len(r[i]) for r in [PROBE_HEADER] + body) for i in range(len(PROBE_HEADER))]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(len(r))).rstrip() for r in [PROBE_HEADER] + body)


def junit_properties(rows: Sequence[Mapping[str, Any]]) -> List[Tuple[str, str]]:
    """JUnit <property> name/value pairs: probe.<node>.<resource>.<figure>."""
    keys = ("backend", "replicas", "sharer_devices", "exclusive_tflops", "shared_tflops", "aggregate_tflops", "share", "exclusive_ms",
            "shared_ms", "inflation", "memory_allocatable_mib", "memory_total_mib", "isolation", "expected_fraction",
            "baseline", "baseline_tflops")
    return [("probe.%s.%s.%s" % (row["node"], row["resource"], key), str(row[key]))
            for row in rows for key in keys if row.get(key) is not None]


# --------------------------------------------------------------------------------------------
# Options and pods


def probe_option_problems(params: Mapping[str, Any]) -> List[str]:
    """Every bad probe option of gpu_verify (each names the option); none when probe is off."""
    if not params.get("probe"):
        return []
    problems = probe_problems(params)  # the bounds preflight checks too (_run_inputs)
    if not (params.get("probe_program") or "").strip():
        problems.append("probe_program must hold the probe's source (the verify role reads roles/verify/files/%s)"
                        % PROGRAM_KEY)
    elif PROBE_MARKER not in params["probe_program"]:
        problems.append("probe_program is not the gpufleet probe (it does not print %r)" % PROBE_MARKER)
    problems += ["%s must not be empty" % option for option in ("probe_image", "probe_python") if not params.get(option)]
    # argv[0] of the probe container's command (exec form: "python3; id" is no program, the pod would fail to start)
    problems += [p for p in [interpreter_problem("probe_python", params.get("probe_python"))] if p and params.get("probe_python")]
    return problems


def thresholds_of(params: Mapping[str, Any]) -> Thresholds:
    return Thresholds(min_share=params["probe_min_share"], max_inflation=params["probe_max_inflation"])


def probe_command(params: Mapping[str, Any], phase: str = "exclusive") -> List[str]:
    """The probe's argv; sharers run together do not try to allocate all memory (it would fail the others)."""
    command = [params["probe_python"], "%s/%s" % (PROGRAM_DIR, PROGRAM_KEY), "--seconds", str(params["probe_seconds"])]
    return command + (["--no-allocation"] if phase != "exclusive" else [])


def with_probe_volume(manifest: Dict[str, Any], configmap: str, phase: str) -> Dict[str, Any]:
    """A verification pod manifest turned into a probe pod: the program from the ConfigMap
    (read-only), a writable /tmp (HOME) for the library's caches, the restricted context kept."""
    manifest["metadata"]["labels"][PHASE_LABEL] = phase
    spec = manifest["spec"]
    spec["volumes"] = [{"name": "probe", "configMap": {"name": configmap}}, {"name": "tmp", "emptyDir": {}}]
    container = spec["containers"][0]
    container["volumeMounts"] = [{"name": "probe", "mountPath": PROGRAM_DIR, "readOnly": True},
                                 {"name": "tmp", "mountPath": "/tmp"}]
    container["env"] = [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}]
    return manifest
