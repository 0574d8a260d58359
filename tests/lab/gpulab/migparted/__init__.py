"""Emulation of ``nvidia-mig-parted`` (apply | assert | export) over a gpustate file.

A test instrument, not the product. Follows docs/reference/specs.md §6.1-§6.3: the v1 schema and its error texts,
the CLI flags and MIG_PARTED_* environment variables, device-filter matching by PCI id, the hooks
file, the apply algorithm (apply-start -> mode -> reset -> config -> apply-exit) and the creation
ordering retries (largest profile first, then other permutations on failure, no explicit
placements: docs/reference/specs.md §3.2).

Entry points:
    main(argv, state_path, env=None) -> exit code       # CLI (stdout/stderr)
    run(argv, state_path, env=None) -> (rc, out, err)
    apply_config(state_path, config, selected, mode_only=False, skip_reset=False) -> (ok, message)
    assert_config(state_path, config, selected, mode_only=False) -> (ok, message)
    export_config(state_path, label="current") -> dict
    python -m gpulab.migparted --state FILE -- <args>

Logrus-style lines (``ERRO[0000]``, ``FATA[0000]``) go to stderr, plain results to stdout; any
error exits 1 (as a Go program calling log.Fatal does).

Modules: ``config`` (v1 schema), ``plan`` (per-GPU desired state, creation orderings), ``hooks``,
``apply`` (apply/assert and their Python API), ``export``, ``command`` (flags, ``main``).
"""

from gpulab import driver
from gpulab.migparted.apply import (
    APPLIED,
    ASSERT_FAIL,
    ASSERT_MODE_OK,
    ASSERT_OK,
    VALID,
    Options,
    apply_config,
    assert_config,
    do_apply,
    do_assert,
)
from gpulab.migparted.command import USAGE, cli, main, parse_cli, run
from gpulab.migparted.config import ConfigItem, MigPartedError, load_config_text, parse_config, select_config
from gpulab.migparted.export import export_config, render_yaml
from gpulab.migparted.hooks import HOOK_NAMES, load_hooks, run_hook
from gpulab.migparted.plan import Desired, apply_devices, current_devices, desired_per_gpu, devices_applied, mode_applied

__all__ = [
    "APPLIED", "ASSERT_FAIL", "ASSERT_MODE_OK", "ASSERT_OK", "HOOK_NAMES", "USAGE", "VALID", "ConfigItem", "Desired",
    "MigPartedError", "Options", "apply_config", "apply_devices", "assert_config", "cli", "current_devices",
    "desired_per_gpu", "devices_applied", "do_apply", "do_assert", "driver", "export_config", "load_config_text",
    "load_hooks", "main", "mode_applied", "parse_cli", "parse_config", "render_yaml", "run", "run_hook", "select_config",
]
