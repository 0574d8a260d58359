"""Command line of the nvidia-mig-parted emulator: flags, MIG_PARTED_* environment, ``main``."""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from gpulab import driver, gpustate
from gpulab.migparted.apply import APPLIED, ASSERT_FAIL, ASSERT_MODE_OK, ASSERT_OK, VALID, Log, Options, do_apply, do_assert
from gpulab.migparted.config import ConfigItem, MigPartedError, load_config_text, select_config
from gpulab.migparted.export import export_config, render_yaml

USAGE = """NAME:
   nvidia-mig-parted - GPU lab simulation of the MIG partitioning tool (a test instrument)

USAGE:
   nvidia-mig-parted [--debug] command [command options]

COMMANDS:
   apply    -f FILE [-c CONFIG] [-k HOOKS] [--skip-reset] [--mode-only]
   assert   -f FILE [-c CONFIG] [--mode-only] [--valid-config]
   export   [-o yaml|json] [-l LABEL]
"""

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
    log = Log(_env_bool(env, "MIG_PARTED_DEBUG") or "-d" in argv[:1] or "--debug" in argv[:1])
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
