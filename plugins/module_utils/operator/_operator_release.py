# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU Operator release rules: chart versions and the upgrade path, secrets in values, and the
ClusterPolicy fields carried forward into the values (pure, no I/O).

- Versions (docs/reference/specs.md §7.5): calendar versions ``vYY.MM.P``; ``YY.MM`` is the
  release line ("major release"). NVIDIA supports upgrades within a release line or to the next
  one; ``upgrade_problem`` refuses a jump over a known line, ``downgrade_problem`` any step back.
- Secrets: a value whose key looks secret (token, password, secret, key, credential, license, ...)
  or is named by the user is never shown: ``redact`` replaces it, ``secret_strings`` lists the
  strings the module must mask everywhere else (Ansible's no_log values).
- Carry forward: fields that other modules of this collection write on the chart's ClusterPolicy
  (``devicePlugin.config``, ``migManager.config.name``) are put into the values with their live
  value when the user did not set them, so that a chart upgrade neither reverts them nor meets a
  field-manager conflict (the chart applies server-side; specs §7.5).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._values_tree import get_path, set_path

# Release lines ("major releases", YY.MM) NVIDIA has published, oldest first (specs §7.5).
RELEASE_LINES: Tuple[Tuple[int, int], ...] = (
    (22, 9), (23, 3), (23, 6), (23, 9), (24, 3), (24, 6), (24, 9), (25, 3), (25, 10), (26, 3), (26, 7))

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")

# Keys that hold secrets; a bare "key" (tolerations, selectors) is not one, "apiKey"/"privateKey" are.
SECRET_KEY = re.compile(r"(token|passw(or)?d|secret|credential|licen[cs]|private[-_]?key|api[-_]?key|access[-_]?key|"
                        r"auth)", re.IGNORECASE)
REDACTED = "<redacted>"

# ClusterPolicy fields this collection writes besides the chart (gpu_sharing, mig_operator_config).
CARRIED_FIELDS: Tuple[Tuple[str, ...], ...] = (
    ("devicePlugin", "config", "name"), ("devicePlugin", "config", "default"), ("migManager", "config", "name"))


def parse_chart_version(text: Any) -> Tuple[int, int, int]:
    """"v26.7.0" / "26.7.0" / "0.1.0-rc.1" -> (26, 7, 0); ValueError naming the text otherwise."""
    match = _VERSION.match(str(text).strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError("chart version %r does not parse: expected vMAJOR.MINOR.PATCH such as v26.7.0" % (text,))
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def chart_version_problems(text: Any) -> List[str]:
    """The ``chart_version`` option: [] when unset (the chart's newest) or a version that parses, else one problem.

    Checked before helm runs: for a repository chart helm reads ``--version`` as a semver range, so "26.7"
    would pick a chart silently."""
    if text is None:
        return []
    try:
        parse_chart_version(text)
    except ValueError as exc:
        return ["invalid chart_version: %s" % exc]
    return []


def _line(version: Tuple[int, int, int]) -> Tuple[int, int]:
    return version[0], version[1]


def _show(line: Tuple[int, int]) -> str:
    return "v%d.%d" % line


def upgrade_problem(installed: str, asked: str) -> Optional[str]:
    """Why going from ``installed`` to ``asked`` skips a release line (None when it does not).

    A jump is refused when a published release line lies strictly between the two lines; the
    message names the installed and asked versions and the supported next step."""
    old, new = _line(parse_chart_version(installed)), _line(parse_chart_version(asked))
    skipped = [line for line in RELEASE_LINES if old < line < new]
    if not skipped:
        return None
    return ("chart upgrade from %s to %s skips the release line%s %s; NVIDIA supports upgrades only within a "
            "release line or to the next one: upgrade to the latest %s.x first (or set "
            "allow_unsupported_upgrade / gpu_operator_allow_unsupported_upgrade to force it)"
            % (installed, asked, "s" if len(skipped) > 1 else "", ", ".join(_show(s) for s in skipped),
               _show(skipped[0])))


def downgrade_problem(installed: str, asked: str) -> Optional[str]:
    """Why going from ``installed`` back to the older ``asked`` is refused (None when it is not older).

    NVIDIA documents upgrades only (specs §7.5: within a release line or to the next one); an older chart
    would apply its older CRDs and operand defaults over the objects the newer one left."""
    if parse_chart_version(asked) >= parse_chart_version(installed):
        return None
    return ("chart downgrade from %s (installed) to %s (asked) is refused: NVIDIA supports upgrades only (within a "
            "release line or to the next one), and the older chart would replace the newer CRDs and ClusterPolicy "
            "defaults the installed one left; keep %s or a newer version, or set allow_downgrade / "
            "gpu_operator_allow_downgrade to force it" % (installed, asked, installed))


def is_secret_key(key: Any, extra: Iterable[str] = ()) -> bool:
    return bool(SECRET_KEY.search(str(key))) or str(key).lower() in {k.lower() for k in extra}


def _walk(tree: Any, extra: Sequence[str], under_secret: bool) -> Iterable[Tuple[bool, Any]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _walk(value, extra, under_secret or is_secret_key(key, extra))
    elif isinstance(tree, list):
        for value in tree:
            yield from _walk(value, extra, under_secret)
    else:
        yield under_secret, tree


def secret_strings(values: Any, extra: Sequence[str] = ()) -> Set[str]:
    """The scalar values kept under a secret-looking key (to be masked in every output)."""
    return {str(value) for secret, value in _walk(values, extra, False)
            if secret and value not in (None, "", True, False) and len(str(value)) >= 3}


def redact(values: Any, extra: Sequence[str] = (), under_secret: bool = False) -> Any:
    """A copy of ``values`` with every value under a secret-looking key replaced by ``<redacted>``."""
    if isinstance(values, dict):
        return {key: redact(value, extra, under_secret or is_secret_key(key, extra)) for key, value in values.items()}
    if isinstance(values, list):
        return [redact(value, extra, under_secret) for value in values]
    return REDACTED if under_secret and values not in (None, "") else values


def carry_forward(values: Mapping[str, Any], policy: Optional[Mapping[str, Any]]) -> Tuple[Dict[str, Any], List[str]]:
    """``values`` plus the live ClusterPolicy's CARRIED_FIELDS the user did not set (non-empty
    ones only); returns the new values and the dotted paths carried."""
    result = copy.deepcopy(dict(values))
    spec = (policy or {}).get("spec") or {}
    carried = []
    for path in CARRIED_FIELDS:
        present, live = get_path(spec, path)
        if not present or live in (None, "") or get_path(result, path)[0]:
            continue
        set_path(result, path, live)
        carried.append(".".join(path))
    return result, carried


# A device-plugin config that shares nothing (specs §9.2): what a node loads until gpu_sharing
# writes the real configs into the ConfigMap.
PLACEHOLDER_CONFIG = "version: v1\n"


def placeholder_configmap(values: Mapping[str, Any], namespace: str) -> Optional[Dict[str, Any]]:
    """The device-plugin ConfigMap the values name, with a no-sharing config under the default
    key, so that the plugin does not fail on a missing ConfigMap at first install; None when the
    values name no ConfigMap."""
    name = get_path(values, ("devicePlugin", "config", "name"))[1]
    if not name:
        return None
    default = get_path(values, ("devicePlugin", "config", "default"))[1] or "default"
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "gpufleet.sharing"}},
            "data": {default: PLACEHOLDER_CONFIG}}


def pending_recovery(status: Optional[str]) -> Optional[str]:
    """The helm step that recovers a release left in ``status``: "rollback" for an interrupted
    upgrade or rollback, None when there is nothing to recover or no safe automatic step."""
    return "rollback" if status in ("pending-upgrade", "pending-rollback") else None
