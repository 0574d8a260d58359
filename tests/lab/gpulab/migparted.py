"""Emulation of ``nvidia-mig-parted`` (apply | assert | export) over a gpustate file.

A test instrument, not the product. Follows SPECS §6.1-§6.3: the v1 schema and its error texts,
the CLI flags and MIG_PARTED_* environment variables, device-filter matching by PCI id, the hooks
file, the apply algorithm (apply-start -> mode -> reset -> config -> apply-exit) and the creation
ordering retries (largest profile first, then other permutations on failure, no explicit
placements: SPECS §3.2).

Entry points:
    main(argv, state_path, env=None) -> exit code       # CLI (stdout/stderr)
    run(argv, state_path, env=None) -> (rc, out, err)
    apply_config(state_path, config, selected, mode_only=False, skip_reset=False) -> (ok, message)
    assert_config(state_path, config, selected, mode_only=False) -> (ok, message)
    export_config(state_path, label="current") -> dict
    python -m gpulab.migparted --state FILE -- <args>

Logrus-style lines (``ERRO[0000]``, ``FATA[0000]``) go to stderr, plain results to stdout; any
error exits 1 (as a Go program calling log.Fatal does).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import yaml

from gpulab import driver, gpustate
from gpulab.driver import DriverError
from gpulab.gpustate import Gpu, HostState
from gpulab.models import load_model, parse_profile_name

APPLIED = "MIG configuration applied successfully"
ASSERT_OK = "Selected MIG configuration currently applied"
ASSERT_MODE_OK = "Selected MIG mode settings from configuration currently applied"
ASSERT_FAIL = "Assertion failure: selected configuration not currently applied"
VALID = "Selected MIG configuration is valid"
HOOK_NAMES = ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
USAGE = """NAME:
   nvidia-mig-parted - GPU lab simulation of the MIG partitioning tool (a test instrument)

USAGE:
   nvidia-mig-parted [--debug] command [command options]

COMMANDS:
   apply    -f FILE [-c CONFIG] [-k HOOKS] [--skip-reset] [--mode-only]
   assert   -f FILE [-c CONFIG] [--mode-only] [--valid-config]
   export   [-o yaml|json] [-l LABEL]
"""

_FILTER_RE = re.compile(r"^0x[0-9a-fA-F]{8}(:0x[0-9a-fA-F]{8})?$")


class MigPartedError(Exception):
    """Fatal error; ``str()`` is the message after the ``FATA[....]`` prefix."""


# --------------------------------------------------------------------------- config schema (SPECS §6.1)

@dataclass
class ConfigItem:
    device_filter: List[str]
    devices: Any  # "all" or list of int
    mig_enabled: bool
    mig_devices: Dict[str, int] = field(default_factory=dict)

    def matches(self, gpu: Gpu) -> bool:
        if self.devices != "all" and gpu.index not in self.devices:
            return False
        if not self.device_filter:
            return True
        device = gpu.pci_device_id.upper().replace("0X", "0x")
        sub = gpu.pci_sub_device_id.upper().replace("0X", "0x")
        for wanted in self.device_filter:
            dev, _colon, subsys = wanted.partition(":")
            if dev.lower() == device.lower() and (not subsys or subsys.lower() == sub.lower()):
                return True
        return False


def _check_keys(data: Mapping[str, Any], allowed: Iterable[str]) -> None:
    for key in data:
        if key not in allowed:
            raise MigPartedError(f"unexpected field: {key}")


def parse_config(data: Any) -> Dict[str, List[ConfigItem]]:
    """Validate a v1 config (already loaded from YAML/JSON); returns config name -> items."""
    if not isinstance(data, dict):
        raise MigPartedError("unable to parse config: expected a mapping with 'version' and 'mig-configs'")
    _check_keys(data, ("version", "mig-configs"))
    if "version" not in data:
        raise MigPartedError("missing required field: version")
    if data["version"] != "v1":
        raise MigPartedError(f"unknown version: {data['version']}")
    if "mig-configs" not in data:
        raise MigPartedError("missing required field: mig-configs")
    configs = data["mig-configs"]
    if not isinstance(configs, dict) or not configs:
        raise MigPartedError("at least one entry in 'mig-configs' is required")
    result: Dict[str, List[ConfigItem]] = {}
    for name, items in configs.items():
        if not isinstance(items, list) or not items:
            raise MigPartedError(f"at least one entry in mig-config '{name}' is required")
        result[str(name)] = [_parse_item(item) for item in items]
    return result


def _parse_item(item: Any) -> ConfigItem:
    if not isinstance(item, dict):
        raise MigPartedError(f"unable to parse mig-config entry: {item!r}")
    _check_keys(item, ("device-filter", "devices", "mig-enabled", "mig-devices"))
    filters: List[str] = []
    if "device-filter" in item:
        raw = item["device-filter"]
        raw_list = raw if isinstance(raw, list) else [raw]
        for value in raw_list:
            if not isinstance(value, str) or not _FILTER_RE.match(value):
                raise MigPartedError(f"invalid device-filter: {value!r}")
            filters.append(value)
    if "devices" not in item:
        raise MigPartedError("missing required field: devices")
    devices = item["devices"]
    if devices != "all":
        if not isinstance(devices, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                    for d in devices):
            raise MigPartedError(f"invalid format for 'devices': {devices!r} (expected 'all' or a list of GPU indexes)")
    if "mig-enabled" not in item:
        raise MigPartedError("missing required field: mig-enabled")
    enabled = item["mig-enabled"]
    if not isinstance(enabled, bool):
        raise MigPartedError(f"invalid format for 'mig-enabled': {enabled!r} (expected a boolean)")
    mig_devices = item.get("mig-devices")
    if enabled and "mig-devices" not in item:
        raise MigPartedError("missing required field 'mig-devices' when 'mig-enabled' is true")
    if not enabled and mig_devices:
        raise MigPartedError("MIG devices included when 'mig-enabled' is false")
    parsed_devices: Dict[str, int] = {}
    for profile, count in (mig_devices or {}).items():
        if parse_profile_name(str(profile)) is None:
            raise MigPartedError(f"invalid MIG profile name in 'mig-devices': {profile}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise MigPartedError(f"invalid count for MIG profile {profile}: {count!r}")
        parsed_devices[str(profile)] = count
    return ConfigItem(device_filter=filters, devices=devices, mig_enabled=enabled, mig_devices=parsed_devices)


def load_config_text(text: str) -> Dict[str, List[ConfigItem]]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise MigPartedError(f"error parsing config file: {error}") from None
    try:
        return parse_config(data)
    except MigPartedError as error:
        raise MigPartedError(f"error parsing config file: {error}") from None


def select_config(configs: Mapping[str, List[ConfigItem]], selected: Optional[str]) -> Tuple[str, List[ConfigItem]]:
    if not selected:
        if len(configs) == 1:
            name = next(iter(configs))
            return name, configs[name]
        raise MigPartedError("missing required flag 'selected-config' (the file holds more than one mig-config)")
    if selected not in configs:
        raise MigPartedError(f"selected mig-config not present: {selected}")
    return selected, configs[selected]


# --------------------------------------------------------------------------- per-GPU desired state

@dataclass
class Desired:
    mig_enabled: bool
    devices: Dict[str, int]


def desired_per_gpu(state: HostState, items: Sequence[ConfigItem]) -> Dict[int, Desired]:
    """Walk items in order; every matching item configures the GPU (SPECS §6.1); later wins."""
    desired: Dict[int, Desired] = {}
    for item in items:
        for gpu in state.gpus:
            if not item.matches(gpu):
                continue
            if not gpu.mig_capable:
                if item.devices == "all" or not item.mig_enabled:
                    continue
                raise MigPartedError(f"cannot set MIG mode on non MIG-capable GPU {gpu.index}")
            desired[gpu.index] = Desired(item.mig_enabled, {k: v for k, v in item.mig_devices.items() if v > 0})
    return desired


def current_devices(gpu: Gpu) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for _gi, ci in gpu.mig_devices():
        counts[ci.profile] = counts.get(ci.profile, 0) + 1
    return counts


def mode_applied(gpu: Gpu, want: Desired) -> bool:
    return gpu.mig_current == want.mig_enabled and gpu.mig_pending == want.mig_enabled


def devices_applied(gpu: Gpu, want: Desired) -> bool:
    return not want.mig_enabled or current_devices(gpu) == want.devices


def _device_plan(gpu: Gpu, devices: Mapping[str, int]) -> List[Tuple[str, Optional[str], int, int]]:
    """Expand counts into (GI profile, CI token, G, memory slices), largest first (SPECS §3.2)."""
    spec = load_model(gpu.model)
    plan = []
    for name, count in devices.items():
        parsed = parse_profile_name(name)
        if parsed is None:
            raise MigPartedError(f"invalid MIG profile name: {name}")
        c, g, gb, attr = parsed
        gi_name = f"{g}g.{gb}gb{attr}"
        profile = spec.profile(gi_name)
        if profile is None:
            raise MigPartedError(f"MIG profile {name} is not supported on GPU {gpu.index} ({gpu.name})")
        ci_token = name if c is not None and c != g else None
        plan.extend([(gi_name, ci_token, g, profile.size)] * count)
    plan.sort(key=lambda entry: (-entry[2], -entry[3], entry[0], entry[1] or ""))
    return plan


def _clear(gpu: Gpu) -> None:
    for gi in list(gpu.gpu_instances):
        for ci in list(gi.compute_instances):
            driver.destroy_compute_instance(gpu, gi, ci)
        driver.destroy_gpu_instance(gpu, gi)


def _try_order(gpu: Gpu, order: Sequence[Tuple[str, Optional[str], int, int]]) -> bool:
    spec = load_model(gpu.model)
    for gi_name, ci_token, _g, _size in order:
        profile = spec.profile(gi_name)
        try:
            gi = driver.create_gpu_instance(gpu, profile)  # no explicit placement (SPECS §3.2)
            driver.create_compute_instance(gpu, gi, ci_token)
        except DriverError:
            return False
    return True


def apply_devices(gpu: Gpu, devices: Mapping[str, int]) -> int:
    """Clear then create; on failure clear and retry the next ordering. Returns attempts used."""
    plan = _device_plan(gpu, devices)
    seen = set()
    attempts = 0
    for order in itertools.permutations(plan):
        if order in seen:
            continue
        seen.add(order)
        attempts += 1
        _clear(gpu)
        if _try_order(gpu, order):
            return attempts
    _clear(gpu)
    raise MigPartedError(f"error attempting multiple config orderings: all orderings failed on GPU {gpu.index}: "
                         f"{driver.INSUFFICIENT_RESOURCES}")


# --------------------------------------------------------------------------- hooks (SPECS §6.3)

def load_hooks(path: Optional[str]) -> Dict[str, List[Dict[str, Any]]]:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as error:
        raise MigPartedError(f"error parsing hooks file: {error}") from None
    except yaml.YAMLError as error:
        raise MigPartedError(f"error parsing hooks file: {error}") from None
    if not isinstance(data, dict):
        raise MigPartedError("error parsing hooks file: expected a mapping")
    _check_keys(data, ("version", "hooks"))
    if data.get("version") != "v1":
        raise MigPartedError(f"error parsing hooks file: unknown version: {data.get('version')}")
    hooks = data.get("hooks") or {}
    if not isinstance(hooks, dict):
        raise MigPartedError("error parsing hooks file: 'hooks' must be a mapping")
    for name, entries in hooks.items():
        if name not in HOOK_NAMES:
            raise MigPartedError(f"error parsing hooks file: unexpected field: {name}")
        for entry in entries or []:
            if not isinstance(entry, dict) or "command" not in entry:
                raise MigPartedError(f"error parsing hooks file: missing required field: command ({name})")
            _check_keys(entry, ("command", "args", "envs", "workdir"))
    return {name: list(entries or []) for name, entries in hooks.items()}


def run_hook(hooks: Mapping[str, List[Dict[str, Any]]], name: str, parted_env: Mapping[str, str]) -> None:
    """Run each command as an argv list (no shell), with the invocation's MIG_PARTED_* injected."""
    for entry in hooks.get(name, []):
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in (entry.get("envs") or {}).items()})
        env.update(parted_env)
        argv = [str(entry["command"])] + [str(arg) for arg in entry.get("args") or []]
        sys.stdout.flush()
        try:
            completed = subprocess.run(argv, cwd=entry.get("workdir") or None, env=env, check=False,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as error:
            raise MigPartedError(f"error running {name} hook: {error}") from None
        sys.stdout.write(completed.stdout)
        if completed.returncode != 0:
            raise MigPartedError(f"error running {name} hook: exit status {completed.returncode}")


# --------------------------------------------------------------------------- apply / assert

@dataclass
class Options:
    config_file: Optional[str] = None
    selected: Optional[str] = None
    hooks_file: Optional[str] = None
    skip_reset: bool = False
    mode_only: bool = False
    debug: bool = False
    valid_config: bool = False
    output_format: str = "yaml"
    config_label: str = "current"

    def parted_env(self) -> Dict[str, str]:
        return {
            "MIG_PARTED_CONFIG_FILE": self.config_file or "",
            "MIG_PARTED_SELECTED_CONFIG": self.selected or "",
            "MIG_PARTED_HOOKS_FILE": self.hooks_file or "",
            "MIG_PARTED_SKIP_RESET": "true" if self.skip_reset else "false",
            "MIG_PARTED_MODE_CHANGE_ONLY": "true" if self.mode_only else "false",
            "MIG_PARTED_DEBUG": "true" if self.debug else "false",
        }


class _Log:
    def __init__(self, debug: bool) -> None:
        self.debug_enabled = debug
        self.start = time.monotonic()

    def _stamp(self) -> str:
        return f"{int(time.monotonic() - self.start):04d}"

    def debug(self, message: str) -> None:
        if self.debug_enabled:
            sys.stderr.write(f"DEBU[{self._stamp()}] {message}\n")

    def error(self, message: str) -> None:
        sys.stderr.write(f"ERRO[{self._stamp()}] {message}\n")

    def fatal(self, message: str) -> None:
        sys.stderr.write(f"FATA[{self._stamp()}] {message}\n")


def _set_modes(state: HostState, desired: Mapping[int, Desired], skip_reset: bool, log: _Log) -> None:
    for index, want in desired.items():
        gpu = state.gpu(index)
        if mode_applied(gpu, want):
            continue
        log.debug(f"Updating MIG mode of GPU {index} to {'enabled' if want.mig_enabled else 'disabled'}")
        try:
            _clear(gpu)  # mig-parted clears instances before a mode change (SPECS §6.2)
            outcome = driver.set_mig_mode(state, gpu, want.mig_enabled)
        except DriverError as error:
            raise MigPartedError(f"Error applying MIG configuration with hooks: error setting MIG mode on GPU "
                                 f"{index}: {error}") from None
        state.record("nvidia-mig-parted", "mig-mode", gpu=index, requested=want.mig_enabled, outcome=outcome,
                     current=gpu.mig_current, pending=gpu.mig_pending)
    if skip_reset:
        return
    pending = [state.gpu(i) for i in desired if state.gpu(i).mig_current != state.gpu(i).mig_pending]
    if not pending:
        return
    blocked = []
    for gpu in pending:
        try:
            driver.reset_gpu(state, gpu)
            state.record("nvidia-mig-parted", "gpu-reset", gpu=gpu.index, mig_current=gpu.mig_current)
        except DriverError as error:
            blocked.append((gpu, str(error)))
    if blocked:
        # nvidia-smi -r output relayed by mig-parted (SPECS §5 "mig-parted reset blocked").
        _write_reset_failure(blocked)
        raise MigPartedError("Error applying MIG configuration with hooks: error resetting all GPUs: exit status 255")


def _write_reset_failure(blocked: Sequence[Tuple[Gpu, str]]) -> None:
    lines = ["The following GPUs could not be reset:"]
    lines += [f"  GPU {gpu.pci_bus_id}: {error}" for gpu, error in blocked]
    count = len(blocked)
    noun = "device is" if count == 1 else "devices are"
    these = "this device" if count == 1 else "these devices"
    lines += ["", f"{count} {noun} currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
              "application, graphics application such as an X server, or a monitoring application such as another "
              f"instance of nvidia-smi). Please first kill all processes using {these} and all compute applications "
              "running in the system."]
    sys.stdout.write("\n".join(lines) + "\n")


def _apply_devices(state: HostState, desired: Mapping[int, Desired], log: _Log) -> None:
    for index, want in desired.items():
        gpu = state.gpu(index)
        if devices_applied(gpu, want):
            continue
        if not gpu.mig_current:
            raise MigPartedError("Error applying MIG configuration with hooks: unable to apply MIG config with "
                                 "MIG mode disabled")
        try:
            attempts = apply_devices(gpu, want.devices)
        except DriverError as error:
            raise MigPartedError(f"Error applying MIG configuration with hooks: error clearing MIG config on GPU "
                                 f"{index}: {error}") from None
        except MigPartedError as error:
            state.record("nvidia-mig-parted", "apply-config-failed", gpu=index, devices=want.devices)
            raise MigPartedError(f"Error applying MIG configuration with hooks: {error}") from None
        log.debug(f"GPU {index}: created {want.devices} after {attempts} ordering(s)")
        state.record("nvidia-mig-parted", "apply-config", gpu=index, devices=want.devices, attempts=attempts,
                     layout=[f"{gi.profile}@{gi.start}:{gi.size}" for gi in gpu.gpu_instances])


def _needs(state_path: str, items: Sequence[ConfigItem]) -> Tuple[Dict[int, Desired], bool, bool]:
    state = gpustate.load(state_path)
    if not state.powered_on:
        raise MigPartedError("error getting device handles: the host is powered off")
    desired = desired_per_gpu(state, items)
    for index, want in desired.items():
        if want.mig_enabled:
            _device_plan(state.gpu(index), want.devices)  # validate profiles before touching anything
    mode_change = any(not mode_applied(state.gpu(i), w) for i, w in desired.items())
    config_change = any(not devices_applied(state.gpu(i), w) for i, w in desired.items())
    return desired, mode_change, config_change


def do_apply(state_path: str, items: Sequence[ConfigItem], options: Options, log: _Log) -> None:
    """SPECS §6.2 apply algorithm. State is locked per step, never while a hook runs (hooks may
    call the lab's systemctl shim, which writes the same state file)."""
    hooks = load_hooks(options.hooks_file)
    parted_env = options.parted_env()
    desired, mode_change, _config_change = _needs(state_path, items)
    try:
        run_hook(hooks, "apply-start", parted_env)
        if mode_change:
            run_hook(hooks, "pre-apply-mode", parted_env)
            with gpustate.locked(state_path) as state:
                desired = desired_per_gpu(state, items)
                try:
                    _set_modes(state, desired, options.skip_reset, log)
                except MigPartedError:
                    gpustate.save(state_path, state)  # a mode set before a failed reset stays set
                    raise
        if options.mode_only:
            return
        _desired, _mode_change, config_change = _needs(state_path, items)
        if config_change:
            run_hook(hooks, "pre-apply-config", parted_env)
            with gpustate.locked(state_path) as state:
                desired = desired_per_gpu(state, items)
                try:
                    _apply_devices(state, desired, log)
                except MigPartedError:
                    # keep what the failed attempt did to the GPU (real mig-parted leaves it cleared)
                    gpustate.save(state_path, state)
                    raise
    finally:
        run_hook(hooks, "apply-exit", parted_env)


def do_assert(state_path: str, items: Sequence[ConfigItem], mode_only: bool) -> bool:
    state = gpustate.load(state_path)
    desired = desired_per_gpu(state, items)
    for index, want in desired.items():
        gpu = state.gpu(index)
        if not mode_applied(gpu, want):
            return False
        if not mode_only and not devices_applied(gpu, want):
            return False
    return True


# --------------------------------------------------------------------------- export

def export_config(state_path: str, label: str = "current") -> Dict[str, Any]:
    """The current configuration as a v1 config (SPECS §6.2 ``export``)."""
    state = gpustate.load(state_path)
    per_gpu: List[Tuple[int, bool, Dict[str, int]]] = []
    for gpu in state.gpus:
        if not gpu.mig_capable:
            continue
        enabled = bool(gpu.mig_current)
        devices = current_devices(gpu) if enabled else {}
        per_gpu.append((gpu.index, enabled, devices))
    groups: List[Tuple[bool, Dict[str, int], List[int]]] = []
    for index, enabled, devices in per_gpu:
        for group in groups:
            if group[0] == enabled and group[1] == devices:
                group[2].append(index)
                break
        else:
            groups.append((enabled, devices, [index]))
    all_capable = len(per_gpu) == len(state.gpus)
    items = []
    for enabled, devices, indexes in groups:
        item: Dict[str, Any] = {"devices": "all" if len(groups) == 1 and all_capable else indexes,
                                "mig-enabled": enabled}
        if enabled:
            item["mig-devices"] = dict(sorted(devices.items(), key=lambda kv: _profile_sort_key(kv[0])))
        items.append(item)
    return {"version": "v1", "mig-configs": {label: items}}


def _profile_sort_key(name: str) -> Tuple[int, int, int, str]:
    parsed = parse_profile_name(name) or (None, 0, 0, "")
    return (parsed[1], parsed[0] or parsed[1], parsed[2], name)


def render_yaml(config: Mapping[str, Any]) -> str:
    lines = [f"version: {config['version']}", "mig-configs:"]
    for label, items in config["mig-configs"].items():
        lines.append(f"  {label}:")
        for item in items:
            devices = item["devices"]
            devices_text = devices if devices == "all" else "[" + ", ".join(str(d) for d in devices) + "]"
            lines.append(f"  - devices: {devices_text}")
            lines.append(f"    mig-enabled: {'true' if item['mig-enabled'] else 'false'}")
            if "mig-devices" in item:
                if item["mig-devices"]:
                    lines.append("    mig-devices:")
                    lines.extend(f"      {name}: {count}" for name, count in item["mig-devices"].items())
                else:
                    lines.append("    mig-devices: {}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- Python API

def apply_config(state_path: str, config: Mapping[str, Any], selected: str, mode_only: bool = False,
                 skip_reset: bool = False) -> Tuple[bool, str]:
    """Apply ``config`` (a v1 dict) like ``nvidia-mig-parted apply`` without hooks.

    Returns (True, "MIG configuration applied successfully") or (False, error text); reset-blocked
    output is included in the message.
    """
    out = io.StringIO()
    with redirect_stdout(out):
        try:
            configs = parse_config(config)
            _name, items = select_config(configs, selected)
            do_apply(state_path, items, Options(selected=selected, mode_only=mode_only, skip_reset=skip_reset),
                     _Log(False))
        except MigPartedError as error:
            return False, (out.getvalue() + str(error)).strip()
    return True, APPLIED


def assert_config(state_path: str, config: Mapping[str, Any], selected: str, mode_only: bool = False) -> Tuple[bool, str]:
    """Like ``nvidia-mig-parted assert``: (True, success text) or (False, failure text)."""
    try:
        configs = parse_config(config)
        _name, items = select_config(configs, selected)
        ok = do_assert(state_path, items, mode_only)
    except MigPartedError as error:
        return False, str(error)
    if not ok:
        return False, ASSERT_FAIL
    return True, ASSERT_MODE_OK if mode_only else ASSERT_OK


# --------------------------------------------------------------------------- CLI

_TRUE = ("1", "t", "true", "yes", "y", "on")


def _env_bool(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in _TRUE


_VALUE_FLAGS = {
    "apply": {"-f": "config_file", "--config-file": "config_file", "-c": "selected", "--selected-config": "selected",
              "-k": "hooks_file", "--hooks-file": "hooks_file"},
    "assert": {"-f": "config_file", "--config-file": "config_file", "-c": "selected", "--selected-config": "selected"},
    "export": {"-o": "output_format", "--output-format": "output_format", "-l": "config_label",
               "--config-label": "config_label"},
}
_BOOL_FLAGS = {
    "apply": {"-s": "skip_reset", "--skip-reset": "skip_reset", "-m": "mode_only", "--mode-only": "mode_only",
              "-d": "debug", "--debug": "debug"},
    "assert": {"-m": "mode_only", "--mode-only": "mode_only", "-a": "valid_config", "--valid-config": "valid_config",
               "-d": "debug", "--debug": "debug"},
    "export": {"-d": "debug", "--debug": "debug"},
}


def parse_cli(argv: Sequence[str], env: Mapping[str, str]) -> Tuple[str, Options]:
    args = list(argv)
    options = Options(
        config_file=env.get("MIG_PARTED_CONFIG_FILE") or None,
        selected=env.get("MIG_PARTED_SELECTED_CONFIG") or None,
        hooks_file=env.get("MIG_PARTED_HOOKS_FILE") or None,
        skip_reset=_env_bool(env, "MIG_PARTED_SKIP_RESET"),
        mode_only=_env_bool(env, "MIG_PARTED_MODE_CHANGE_ONLY"),
        debug=_env_bool(env, "MIG_PARTED_DEBUG"),
        valid_config=_env_bool(env, "MIG_PARTED_VALID_CONFIG"),
        output_format=env.get("MIG_PARTED_OUTPUT_FORMAT") or "yaml",
        config_label=env.get("MIG_PARTED_CONFIG_LABEL") or "current",
    )
    while args and args[0] in ("-d", "--debug"):
        options.debug = True
        args.pop(0)
    if not args:
        raise MigPartedError("a command is required: apply | assert | export")
    if args[0] in ("-h", "--help", "help", "-v", "--version"):
        return args[0], options
    command = args.pop(0)
    if command not in _VALUE_FLAGS:
        raise MigPartedError(f"unknown command: {command} (the lab supports apply, assert, export)")
    while args:
        arg = args.pop(0)
        name, eq, inline = arg.partition("=")
        if name in _VALUE_FLAGS[command]:
            if eq:
                value = inline
            elif args:
                value = args.pop(0)
            else:
                raise MigPartedError(f"flag needs an argument: {name}")
            setattr(options, _VALUE_FLAGS[command][name], value)
        elif name in _BOOL_FLAGS[command]:
            setattr(options, _BOOL_FLAGS[command][name], (inline.lower() in _TRUE) if eq else True)
        else:
            raise MigPartedError(f"flag provided but not defined: {name}")
    return command, options


def _read_config_file(options: Options) -> Dict[str, List[ConfigItem]]:
    if not options.config_file:
        raise MigPartedError("missing required flag 'config-file' (-f or MIG_PARTED_CONFIG_FILE)")
    try:
        if options.config_file == "-":
            text = sys.stdin.read()
        else:
            with open(options.config_file, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as error:
        raise MigPartedError(f"error parsing config file: {error}") from None
    return load_config_text(text)


def main(argv: Sequence[str], state_path: str, env: Optional[Mapping[str, str]] = None) -> int:
    """Run ``nvidia-mig-parted <argv>``; ``env`` defaults to os.environ (for MIG_PARTED_*)."""
    env = os.environ if env is None else env
    log = _Log(_env_bool(env, "MIG_PARTED_DEBUG") or "-d" in argv[:1] or "--debug" in argv[:1])
    try:
        command, options = parse_cli(argv, env)
        log.debug_enabled = options.debug
        if command in ("-v", "--version"):
            sys.stdout.write("nvidia-mig-parted version lab (GPU lab simulation, config API v1)\n")
            return 0
        if command in ("-h", "--help", "help"):
            sys.stdout.write(USAGE)
            return 0
        if command == "export":
            config = export_config(state_path, options.config_label)
            if options.output_format == "json":
                sys.stdout.write(json.dumps(config, indent=2) + "\n")
            elif options.output_format in ("yaml", "yml"):
                sys.stdout.write(render_yaml(config))
            else:
                raise MigPartedError(f"unrecognized output format: {options.output_format}")
            return 0
        log.debug("Parsing config file...")
        configs = _read_config_file(options)
        name, items = select_config(configs, options.selected)
        options.selected = name
        if command == "assert":
            if options.valid_config:
                sys.stdout.write(VALID + "\n")
                return 0
            log.debug("Asserting MIG mode configuration...")
            if not do_assert(state_path, items, options.mode_only):
                log.error(ASSERT_FAIL)
                return 1
            sys.stdout.write((ASSERT_MODE_OK if options.mode_only else ASSERT_OK) + "\n")
            return 0
        do_apply(state_path, items, options, log)
        sys.stdout.write(APPLIED + "\n")
        return 0
    except MigPartedError as error:
        sys.stdout.flush()
        log.fatal(str(error))
        return 1
    except gpustate.StateError as error:
        log.fatal(f"error getting device handles: {error}")
        return 1


def run(argv: Sequence[str], state_path: str, env: Optional[Mapping[str, str]] = None) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(argv, state_path, env)
    return rc, out.getvalue(), err.getvalue()


def cli(argv: Optional[Sequence[str]] = None) -> int:
    return driver.state_cli("python -m gpulab.migparted", main, argv)


if __name__ == "__main__":
    sys.exit(cli())
