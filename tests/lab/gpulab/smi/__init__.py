"""Emulation of ``nvidia-smi`` over a gpustate file (a test instrument, not the product).

Read-only output on the H200 reference host reproduces tests/fixtures/h200/* byte for byte;
mutating commands follow docs/reference/specs.md §4-§5 (messages verbatim where the reference has them). Usage:

    main(argv, state_path) -> exit code          # writes to sys.stdout / sys.stderr
    run(argv, state_path) -> (rc, stdout, stderr)  # same, captured
    python -m gpulab.smi --state FILE -- <nvidia-smi args>

Exit codes (nvidia-smi documents 0 ok, 2 invalid argument, 3 not supported, 6 not found,
9 driver not reachable, 255 other): "Insufficient Resources" and "In use by another client"
map to 255 (modelling choice; docs/reference/specs.md §5 shows mig-parted reporting "exit status 255" for a
blocked reset).

Modules: ``common`` (exit codes, output, ``-i`` selection), ``queries`` (``-L``, ``--query-*``),
``summary`` (plain output, ``--version``), ``mig_tables`` (``mig -lgip|-lgipp|-lgi|-lci|-lcip``),
``changes`` (``-mig``, ``-r``, ``mig -cgi|-cci|-dci|-dgi``), ``command`` (options, ``main``).
"""

from gpulab.smi.changes import reset_blocked_lines
from gpulab.smi.command import cli, main, run
from gpulab.smi.common import RC_INVALID, RC_NO_DRIVER, RC_NOT_FOUND, RC_NOT_SUPPORTED, RC_OK, RC_OTHER, SmiExit, select_gpus

__all__ = ["RC_INVALID", "RC_NOT_FOUND", "RC_NOT_SUPPORTED", "RC_NO_DRIVER", "RC_OK", "RC_OTHER", "SmiExit", "cli", "main",
           "reset_blocked_lines", "run", "select_gpus"]
