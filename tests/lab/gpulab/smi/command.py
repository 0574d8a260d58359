"""Command line of the nvidia-smi emulator: option parsing and dispatch, ``main``, ``run``, ``cli``."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Dict, Optional, Sequence, Tuple

from gpulab import driver, gpustate
from gpulab.smi.changes import mig_cci, mig_cgi, mig_dci, mig_dgi, reset, set_mig
from gpulab.smi.common import (
    RC_INVALID,
    RC_NO_DRIVER,
    RC_OK,
    SmiExit,
    driver_text,
    id_filter,
    out,
    require_power,
    select_gpus,
)
from gpulab.smi.mig_tables import mig_lci, mig_lcip, mig_lgi, mig_lgip, mig_lgipp
from gpulab.smi.queries import list_gpus, query_apps, query_gpu
from gpulab.smi.summary import summary, version

_MIG_OPTIONS_WITH_VALUE = {
    "-i": "id", "--id": "id", "-gi": "gi", "--gpu-instance-id": "gi", "-ci": "ci",
    "--compute-instance-id": "ci", "-cgi": "cgi", "--create-gpu-instance": "cgi",
}
_MIG_FLAGS = {
    "-lgip": "lgip", "--list-gpu-instance-profiles": "lgip",
    "-lgipp": "lgipp", "--list-gpu-instance-possible-placements": "lgipp",
    "-lgi": "lgi", "--list-gpu-instances": "lgi", "-lci": "lci", "--list-compute-instances": "lci",
    "-lcip": "lcip", "--list-compute-instance-profiles": "lcip", "-C": "default_ci",
    "--default-compute-instance": "default_ci", "-dci": "dci", "--destroy-compute-instance": "dci",
    "-dgi": "dgi", "--destroy-gpu-instance": "dgi", "-h": "help", "--help": "help",
}
_MUTATING = ("cgi", "cci", "dci", "dgi")


def _parse_options(argv: Sequence[str], with_value: Dict[str, str], flags: Dict[str, str], help_command: str,
                   optional_value: Optional[Dict[str, str]] = None) -> Dict[str, Optional[str]]:
    """Options as nvidia-smi reads them: NAME VALUE or NAME=VALUE, flags, optional values (-cci [x])."""
    opts: Dict[str, Optional[str]] = {}
    optional_value = optional_value or {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, inline = arg.partition("=")
        if name in with_value:
            if eq:
                opts[with_value[name]] = inline
            elif args:
                opts[with_value[name]] = args.pop(0)
            else:
                raise SmiExit(RC_INVALID, f"Option {name} requires a value. Please run '{help_command}' for help.")
        elif name in optional_value:
            if eq:
                opts[optional_value[name]] = inline
            elif args and not args[0].startswith("-"):
                opts[optional_value[name]] = args.pop(0)
            else:
                opts[optional_value[name]] = ""
        elif arg in flags:
            opts[flags[arg]] = ""
        else:
            raise SmiExit(RC_INVALID, f"Invalid combination of input arguments. Please run '{help_command}' for help.")
    return opts


def _parse_mig_args(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    return _parse_options(argv, _MIG_OPTIONS_WITH_VALUE, _MIG_FLAGS, "nvidia-smi mig -h",
                          optional_value={"-cci": "cci", "--create-compute-instance": "cci"})


def _run_mig(argv: Sequence[str], state_path: str) -> int:
    opts = _parse_mig_args(argv)
    if "help" in opts or not opts:
        sys.stdout.write(driver_text("help_mig.txt"))
        return RC_OK
    gi_filter = id_filter(opts.get("gi"), "-gi")
    ci_filter = id_filter(opts.get("ci"), "-ci")
    if any(key in opts for key in _MUTATING):
        with gpustate.locked(state_path) as state:
            require_power(state)
            gpus = select_gpus(state, opts.get("id"))
            if "cgi" in opts:
                return mig_cgi(state, gpus, opts["cgi"] or "", "default_ci" in opts)
            if "cci" in opts:
                return mig_cci(state, gpus, opts["cci"], gi_filter)
            if "dci" in opts:
                return mig_dci(state, gpus, gi_filter, ci_filter)
            return mig_dgi(state, gpus, gi_filter)
    state = gpustate.load(state_path)
    require_power(state)
    gpus = select_gpus(state, opts.get("id"))
    if "lgip" in opts:
        return mig_lgip(gpus)
    if "lgipp" in opts:
        return mig_lgipp(gpus)
    if "lgi" in opts:
        return mig_lgi(gpus, gi_filter)
    if "lci" in opts:
        return mig_lci(gpus, gi_filter, ci_filter)
    if "lcip" in opts:
        return mig_lcip(gpus, gi_filter)
    raise SmiExit(RC_INVALID, "Invalid combination of input arguments. Please run 'nvidia-smi mig -h' for help.")


def _parse_top(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    with_value = {"-i": "id", "--id": "id", "--query-gpu": "query_gpu", "--query-compute-apps": "query_apps",
                  "--format": "format", "-mig": "mig", "--multi-instance-gpu": "mig"}
    flags = {"-L": "list", "--list-gpus": "list", "-r": "reset", "--gpu-reset": "reset", "-h": "help",
             "--help": "help", "--version": "version"}
    return _parse_options(argv, with_value, flags, "nvidia-smi -h")


def _dispatch(argv: Sequence[str], state_path: str) -> int:
    if "mig" in argv:
        position = argv.index("mig")
        if position == 0 or argv[position - 1] not in ("-i", "--id"):
            return _run_mig(list(argv[:position]) + list(argv[position + 1:]), state_path)
    opts = _parse_top(argv)
    if "help" in opts:
        sys.stdout.write(driver_text("help.txt"))
        return RC_OK
    if "mig" in opts or "reset" in opts:
        with gpustate.locked(state_path) as state:
            require_power(state)
            gpus = select_gpus(state, opts.get("id"))
            if "mig" in opts:
                return set_mig(state, gpus, opts["mig"] or "")
            return reset(state, gpus)
    state = gpustate.load(state_path)
    if "version" in opts:
        version(state)
        return RC_OK
    require_power(state)
    gpus = select_gpus(state, opts.get("id"))
    if "list" in opts:
        list_gpus(gpus)
    elif "query_gpu" in opts:
        query_gpu(state, gpus, opts["query_gpu"] or "", opts.get("format"))
    elif "query_apps" in opts:
        query_apps(gpus, opts["query_apps"] or "", opts.get("format"))
    else:
        summary(state, gpus)
    return RC_OK


def main(argv: Sequence[str], state_path: str) -> int:
    """Run ``nvidia-smi <argv>`` against ``state_path``; output on sys.stdout; returns the exit code."""
    try:
        return _dispatch(list(argv), state_path)
    except SmiExit as stop:
        if stop.message:
            out(stop.message)
        return stop.rc
    except gpustate.StateError as error:
        sys.stderr.write(f"nvidia-smi (gpulab): {error}\n")
        return RC_NO_DRIVER


def run(argv: Sequence[str], state_path: str) -> Tuple[int, str, str]:
    """``main`` with output captured: (rc, stdout, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        rc = main(argv, state_path)
    return rc, stdout.getvalue(), stderr.getvalue()


def cli(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m gpulab.smi --state FILE -- <nvidia-smi args>``."""
    return driver.state_cli("python -m gpulab.smi", main, argv)
