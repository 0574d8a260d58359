"""``apply`` and ``assert`` (docs/reference/specs.md §6.2), for the CLI and as a Python API."""

from __future__ import annotations

import io
import sys
import time
from contextlib import redirect_stdout
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from gpulab import driver, gpustate
from gpulab.driver import DriverError
from gpulab.gpustate import HostState
from gpulab.migparted.config import ConfigItem, MigPartedError, parse_config, select_config
from gpulab.migparted.hooks import load_hooks, run_hook
from gpulab.migparted.plan import Desired, apply_devices, clear, desired_per_gpu, device_plan, devices_applied, mode_applied
from gpulab.smi import reset_blocked_lines

APPLIED = "MIG configuration applied successfully"
ASSERT_OK = "Selected MIG configuration currently applied"
ASSERT_MODE_OK = "Selected MIG mode settings from configuration currently applied"
ASSERT_FAIL = "Assertion failure: selected configuration not currently applied"
VALID = "Selected MIG configuration is valid"


@dataclass
class Options:
    """Flags of an invocation (also read from MIG_PARTED_* variables)."""

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


class Log:
    """Logrus-style lines on stderr (``DEBU``/``ERRO``/``FATA[seconds]``)."""

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


def _set_modes(state: HostState, desired: Mapping[int, Desired], skip_reset: bool, log: Log) -> None:
    """Called when the mode assertion failed for a GPU: like ApplyMigMode (nvidia-mig-parted v0.15.0,
    cmd/nvidia-mig-parted/apply/mode.go) every selected GPU is cleared and gets the wanted mode set, also one
    already in it (which undoes a change pending away from it)."""
    for index, want in desired.items():
        gpu = state.gpu(index)
        log.debug(f"Updating MIG mode of GPU {index} to {'enabled' if want.mig_enabled else 'disabled'}")
        try:
            clear(gpu)  # mig-parted clears instances before a mode change (docs/reference/specs.md §6.2)
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
        # nvidia-smi -r output relayed by mig-parted (docs/reference/specs.md §5 "mig-parted reset blocked").
        sys.stdout.write("\n".join(reset_blocked_lines(blocked)) + "\n")
        raise MigPartedError("Error applying MIG configuration with hooks: error resetting all GPUs: exit status 255")


def _apply_devices(state: HostState, desired: Mapping[int, Desired], log: Log) -> None:
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
            device_plan(state.gpu(index), want.devices)  # validate profiles before touching anything
    mode_change = any(not mode_applied(state.gpu(i), w) for i, w in desired.items())
    config_change = any(not devices_applied(state.gpu(i), w) for i, w in desired.items())
    return desired, mode_change, config_change


def do_apply(state_path: str, items: Sequence[ConfigItem], options: Options, log: Log) -> None:
    """docs/reference/specs.md §6.2 apply algorithm. State is locked per step, never while a hook runs (hooks may
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
                     Log(False))
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
