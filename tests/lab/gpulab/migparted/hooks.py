"""The hooks file of nvidia-mig-parted and running its commands (docs/reference/specs.md §6.3)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List, Mapping, Optional

import yaml

from gpulab.migparted.config import MigPartedError, check_keys

HOOK_NAMES = ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")


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
    check_keys(data, ("version", "hooks"))
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
            check_keys(entry, ("command", "args", "envs", "workdir"))
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
