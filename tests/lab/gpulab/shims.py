"""``reboot``, ``shutdown`` and ``systemctl`` of a simulated host: they only ever touch the host's
GPU state file (and read unit files), never the machine the lab runs on.

    reboot_main(argv, state_path) -> exit code
    shutdown_main(argv, state_path) -> exit code
    systemctl_main(argv, state_path, env=None) -> exit code

Reboot semantics are gpustate.apply_reboot (docs/reference/specs.md §4.1). Delays (``shutdown -r +5``) are
announced but not waited for: the lab reboots at once (modelling choice, keeps runs fast).
Units are the keys of ``HostState.services`` plus any ``*.service`` file found in the directories
of ``GPULAB_SYSTEMD_UNIT_PATH`` (colon-separated; default: none, so tests never depend on the
machine). Messages and exit codes follow systemd's (3 = inactive for is-active/status, 4 = no
such unit for status, 5 = unit not found for start/stop, 1 otherwise).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import io
import os
import re
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from gpulab import gpustate, migparted

_REBOOT_FLAGS = ("-f", "--force", "-p", "--poweroff", "-w", "--wtmp-only", "-d", "--no-wtmp", "-n", "--no-sync",
                 "--no-wall", "-r", "--reboot")


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


MIG_MANAGER = "nvidia-mig-manager"
_SELECTED_RE = re.compile(r'^\s*Environment\s*=\s*"?MIG_PARTED_SELECTED_CONFIG=([^"\s]*)"?\s*$', re.MULTILINE)


def _selected_config(env: Mapping[str, str]) -> str:
    """MIG_PARTED_SELECTED_CONFIG from the unit's drop-ins (docs/reference/specs.md §6.4 override.conf); the
    packaged default is all-disabled."""
    selected = "all-disabled"
    for directory in _boot_unit_dirs(env):
        for path in sorted(glob.glob(os.path.join(directory, MIG_MANAGER + ".service.d", "*.conf"))):
            with open(path, encoding="utf-8") as handle:
                for match in _SELECTED_RE.finditer(handle.read()):
                    selected = match.group(1)
    return selected


def _boot_unit_dirs(env: Mapping[str, str]) -> List[str]:
    return _unit_dirs(env) or ["/etc/systemd/system"]


def boot_services(state_path: str, env: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """What enabled boot-time units do to the GPUs after a simulated reboot.

    Only ``nvidia-mig-manager.service`` acts on GPUs (docs/reference/specs.md §6.4): when it is enabled in the state,
    it applies the selected config (override.conf drop-in) from ``config.yaml`` in
    ``GPULAB_MIG_MANAGER_DIR`` (default /etc/nvidia-mig-manager), as service.sh's ``apply`` does.
    Not simulated: service.sh's regeneration of config.yaml with ``generate-config``, its hooks,
    and the failsafe reboot. Returns mig-parted's exit code, or None when the unit is not enabled.
    """
    env = os.environ if env is None else env
    state = gpustate.load(state_path)
    if not state.powered_on or not state.services_enabled.get(MIG_MANAGER):
        return None
    config_file = os.path.join(env.get("GPULAB_MIG_MANAGER_DIR", "/etc/nvidia-mig-manager"), "config.yaml")
    selected = _selected_config(env)
    output = io.StringIO()
    with redirect_stdout(output), redirect_stderr(output):
        rc = migparted.main(["apply", "-f", config_file, "-c", selected], state_path, env={})
    with gpustate.locked(state_path) as state:
        state.services[MIG_MANAGER] = "inactive"  # Type=oneshot: inactive once it has run
        state.record(MIG_MANAGER, "boot-apply", selected=selected, config_file=config_file, rc=rc,
                     output=output.getvalue()[-2000:])
    return rc


def _reboot(state_path: str, actor: str, env: Optional[Mapping[str, str]]) -> None:
    gpustate.reboot(state_path, actor=actor)
    boot_services(state_path, env)


def reboot_main(argv: Sequence[str], state_path: str, env: Optional[Mapping[str, str]] = None) -> int:
    """``reboot [--force] ...``: a simulated reboot (``-p``/``--poweroff`` powers off instead)."""
    for arg in argv:
        if arg in ("-h", "--help"):
            _out("reboot [OPTIONS...] -- simulated by the GPU lab: reboots the simulated host")
            return 0
        if arg not in _REBOOT_FLAGS:
            _err(f"reboot: unrecognized option '{arg}'")
            return 1
    if "-p" in argv or "--poweroff" in argv:
        gpustate.power_off(state_path, actor="reboot")
    else:
        _reboot(state_path, "reboot", env)
    return 0


def _parse_delay(token: str) -> Optional[int]:
    """Minutes from now for "now", "+N", "N" or "hh:mm"; None when not a time argument."""
    if token == "now":
        return 0
    if token.startswith("+") and token[1:].isdigit():
        return int(token[1:])
    if token.isdigit():
        return int(token)
    hours, colon, minutes = token.partition(":")
    if colon and hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60:
        now = datetime.datetime.now()
        target = now.replace(hour=int(hours), minute=int(minutes), second=0, microsecond=0)
        if target < now:
            target += datetime.timedelta(days=1)
        return int((target - now).total_seconds() // 60)
    return None


def shutdown_main(argv: Sequence[str], state_path: str, env: Optional[Mapping[str, str]] = None) -> int:
    """``shutdown [-r|-h|-P|-H|-c|-k] [TIME] [WALL...]``: only ``-r`` reboots; ``-h``/``-P``/``-H``
    (and no mode, as systemd's default is power-off) mark the host down; ``-k`` only warns."""
    action = "poweroff"
    delay: Optional[int] = None
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-r", "--reboot"):
            action = "reboot"
        elif arg in ("-h", "-P", "-H", "--halt", "--poweroff"):
            action = "poweroff"
        elif arg == "-k":
            action = "wall"
        elif arg == "-c":
            _out("No scheduled shutdown to cancel.")  # the lab never leaves a shutdown pending
            return 0
        elif arg == "--no-wall":
            continue
        elif arg == "--help":
            _out("shutdown [OPTIONS...] [TIME] [WALL...] -- simulated by the GPU lab")
            return 0
        elif arg.startswith("-"):
            _err(f"shutdown: invalid option -- '{arg.lstrip('-')}'")
            return 1
        else:
            delay = _parse_delay(arg)
            if delay is None:
                _err(f'Failed to parse time specification: {arg}')
                return 1
            break  # the remaining words are the wall message
    if delay:
        when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=delay)
        verb = {"reboot": "Reboot", "poweroff": "Shutdown", "wall": "Shutdown"}[action]
        _out(f"{verb} scheduled for {when.strftime('%a %Y-%m-%d %H:%M:%S UTC')}, use 'shutdown -c' to cancel.")
    if action == "reboot":
        _reboot(state_path, "shutdown", env)
    elif action == "poweroff":
        gpustate.power_off(state_path, actor="shutdown")
    return 0


# --------------------------------------------------------------------------- systemctl

def _unit(name: str) -> str:
    return name[:-len(".service")] if name.endswith(".service") else name


def _unit_dirs(env: Mapping[str, str]) -> List[str]:
    return [d for d in env.get("GPULAB_SYSTEMD_UNIT_PATH", "").split(":") if d]


def _unit_file(name: str, env: Mapping[str, str]) -> Optional[str]:
    for directory in _unit_dirs(env):
        path = os.path.join(directory, name + ".service")
        if os.path.isfile(path):
            return path
    return None


def _known(state: gpustate.HostState, name: str, env: Mapping[str, str]) -> bool:
    return name in state.services or _unit_file(name, env) is not None


def _status_block(state: gpustate.HostState, name: str, env: Mapping[str, str]) -> Tuple[str, int]:
    active = state.services.get(name, "inactive")
    enabled = "enabled" if state.services_enabled.get(name) else "disabled"
    path = _unit_file(name, env) or f"/usr/lib/systemd/system/{name}.service"
    sub = "running" if active == "active" else "dead"
    lines = [
        f"{'●' if active == 'active' else '○'} {name}.service",
        f"     Loaded: loaded ({path}; {enabled}; preset: enabled)",
        f"     Active: {active} ({sub})",
    ]
    return "\n".join(lines), 0 if active == "active" else 3


def _cat(state: gpustate.HostState, name: str, env: Mapping[str, str]) -> Optional[str]:
    path = _unit_file(name, env)
    if path is None:
        if name not in state.services:
            return None
        return (f"# /usr/lib/systemd/system/{name}.service (generated by the GPU lab)\n[Unit]\n"
                f"Description={name}\n\n[Service]\nType=simple\n\n[Install]\nWantedBy=multi-user.target\n")
    parts = []
    for file_path in [path] + sorted(glob.glob(os.path.join(os.path.dirname(path), name + ".service.d", "*.conf"))):
        with open(file_path, encoding="utf-8") as handle:
            parts.append(f"# {file_path}\n{handle.read()}")
    return "\n".join(parts)


_SHOW_DEFAULT = ("Id", "Names", "LoadState", "ActiveState", "SubState", "UnitFileState")


def _show(state: gpustate.HostState, name: str, env: Mapping[str, str], props: List[str], value_only: bool) -> str:
    known = _known(state, name, env)
    active = state.services.get(name, "inactive")
    values: Dict[str, str] = {
        "Id": f"{name}.service",
        "Names": f"{name}.service",
        "LoadState": "loaded" if known else "not-found",
        "ActiveState": active,
        "SubState": ("running" if active == "active" else "dead"),
        "UnitFileState": ("enabled" if state.services_enabled.get(name) else "disabled") if known else "",
        "FragmentPath": _unit_file(name, env) or "",
    }
    keys = props or list(_SHOW_DEFAULT)
    return "\n".join(values.get(key, "") if value_only else f"{key}={values.get(key, '')}" for key in keys)


def systemctl_main(argv: Sequence[str], state_path: str, env: Optional[Mapping[str, str]] = None) -> int:
    """A systemctl over ``HostState.services``; ``reboot``/``poweroff`` verbs are simulated."""
    env = os.environ if env is None else env
    props: List[str] = []
    value_only = now = False
    positional: List[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-p", "--property") and args:
            props.extend(args.pop(0).split(","))
        elif arg.startswith("--property="):
            props.extend(arg.split("=", 1)[1].split(","))
        elif arg == "--value":
            value_only = True
        elif arg == "--now":
            now = True
        elif arg == "--":  # getopt_long(3), as systemd's src/systemctl/systemctl.c parses argv: the options end
            positional.extend(args)
            break
        elif arg in ("--no-block", "-q", "--quiet", "--no-pager", "--system", "--no-ask-password", "--full", "-l",
                     "--no-legend", "-f", "--force"):
            continue
        elif arg.startswith("-"):
            _err(f"systemctl: unrecognized option '{arg}'")
            return 1
        else:
            positional.append(arg)
    if not positional:
        _err("systemctl (gpulab): a verb is required")
        return 1
    verb, units = positional[0], [_unit(u) for u in positional[1:]]
    if verb == "reboot":
        _reboot(state_path, "systemctl", env)
        return 0
    if verb in ("poweroff", "halt"):
        gpustate.power_off(state_path, actor="systemctl")
        return 0
    if verb == "daemon-reload":
        with gpustate.locked(state_path) as state:
            for directory in _unit_dirs(env):
                for path in glob.glob(os.path.join(directory, "*.service")):
                    name = _unit(os.path.basename(path))
                    if name not in state.services:
                        state.services[name] = "inactive"
                        state.services_enabled.setdefault(name, False)
            state.record("systemctl", "daemon-reload")
        return 0
    if verb in ("start", "stop", "restart", "reload", "try-restart", "reload-or-restart", "enable", "disable"):
        if not units:
            _err("Too few arguments.")
            return 1
        with gpustate.locked(state_path) as state:
            for name in units:
                if not _known(state, name, env):
                    if verb in ("enable", "disable"):
                        _err(f"Failed to {verb} unit: Unit file {name}.service does not exist.")
                        return 1
                    _err(f"Failed to {verb} {name}.service: Unit {name}.service not found.")
                    return 5
            for name in units:
                _change(state, verb, name, now)
        return 0
    state = gpustate.load(state_path)
    if verb == "is-active":
        states = [state.services.get(name, "inactive") if _known(state, name, env) else "inactive" for name in units]
        for value in states:
            _out(value)
        return 0 if states and all(value == "active" for value in states) else 3
    if verb == "is-enabled":
        rc = 0
        for name in units:
            if not _known(state, name, env):
                _err(f"Failed to get unit file state for {name}.service: No such file or directory")
                return 1
            enabled = bool(state.services_enabled.get(name))
            _out("enabled" if enabled else "disabled")
            rc = rc if enabled else 1
        return rc
    if verb == "status":
        rc = 0
        for name in units:
            if not _known(state, name, env):
                _err(f"Unit {name}.service could not be found.")
                return 4
            text, code = _status_block(state, name, env)
            _out(text)
            rc = max(rc, code)
        return rc
    if verb == "cat":
        rc = 0
        for name in units:
            text = _cat(state, name, env)
            if text is None:
                _err(f"No files found for {name}.service.")
                rc = 1
                continue
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return rc
    if verb == "show":
        _out("\n\n".join(_show(state, name, env, props, value_only) for name in units))
        return 0
    _err(f'Unknown command verb {verb}.')
    return 1


def _change(state: gpustate.HostState, verb: str, name: str, now: bool) -> None:
    before = (state.services.get(name, "inactive"), state.services_enabled.get(name, False))
    if verb in ("start", "restart", "reload-or-restart"):
        state.services[name] = "active"
    elif verb == "stop":
        state.services[name] = "inactive"
    elif verb in ("reload", "try-restart"):
        state.services.setdefault(name, "inactive")
    elif verb == "enable":
        state.services.setdefault(name, "inactive")
        state.services_enabled[name] = True
        if now:
            state.services[name] = "active"
    elif verb == "disable":
        state.services.setdefault(name, "inactive")
        state.services_enabled[name] = False
        if now:
            state.services[name] = "inactive"
    after = (state.services[name], state.services_enabled.get(name, False))
    state.record("systemctl", verb, unit=name, before=list(before), after=list(after))


def cli(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m gpulab.shims {reboot|shutdown|systemctl} --state FILE -- <args>``."""
    parser = argparse.ArgumentParser(prog="python -m gpulab.shims")
    parser.add_argument("tool", choices=("reboot", "shutdown", "systemctl"))
    parser.add_argument("--state", default=os.environ.get("GPULAB_STATE"), help="GPU state file of the host")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if not ns.state:
        parser.error("--state FILE (or GPULAB_STATE) is required")
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    if ns.tool == "reboot":
        return reboot_main(args, ns.state)
    if ns.tool == "shutdown":
        return shutdown_main(args, ns.state)
    return systemctl_main(args, ns.state)


if __name__ == "__main__":
    sys.exit(cli())
