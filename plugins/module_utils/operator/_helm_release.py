# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Helm release's state read from its release records (Secrets), without running helm.

Helm 3 and 4 store each revision of a release as a Secret ``sh.helm.release.v1.<name>.v<N>`` of
type ``helm.sh/release.v1`` in the release's namespace, labelled ``owner=helm``, ``name=<name>``,
``status``, ``version``; its ``release`` key holds the release as base64 of gzip of JSON (helm
v3.16.0 pkg/storage/driver/secrets.go newSecretsObject, util.go encodeRelease; the API adds its own
base64 of the Secret's data). This module decodes those records into what the module used to get
from two helm runs, each one process and several API requests:

* ``helm list -n NS --deployed --failed --pending --filter ^NAME$ -o json``: the latest revision
  of the release, listed only when its status is one of those (helm v3.16.0 pkg/action/list.go:
  filterLatestReleases, then filterStateMask; cmd/helm/list.go releaseElement for the fields);
* ``helm get values NAME -o json``: the user-supplied values (``config``) of the latest revision
  (pkg/action/get_values.go, which reads Releases.Last).

Pure: Secrets in, dicts out (the caller lists them with one API request).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

RELEASE_SECRET_TYPE = "helm.sh/release.v1"
# the states `helm list --deployed --failed --pending` shows (pkg/action/list.go ListStates)
LISTED_STATES = ("deployed", "failed", "pending-install", "pending-upgrade", "pending-rollback")
_GZIP_MAGIC = b"\x1f\x8b\x08"


class ReleaseRecordError(ValueError):
    """A release record that cannot be decoded (the caller falls back to helm)."""


def release_selector(release: str) -> str:
    """The label selector of a release's records (helm's own, storage/driver/secrets.go Query)."""
    return "owner=helm,name=%s" % release


def decode_release(data: str) -> Dict[str, Any]:
    """A Secret's ``data.release`` (as the API returns it) -> helm's release object."""
    try:
        inner = base64.b64decode(data or "", validate=False)  # the API's base64 of the Secret data
        raw = base64.b64decode(inner, validate=False)  # helm's own base64 (util.go encodeRelease)
        if raw[:3] == _GZIP_MAGIC:
            raw = gzip.decompress(raw)
        release = json.loads(raw.decode("utf-8"))
    except (binascii.Error, OSError, EOFError, ValueError, UnicodeDecodeError) as exc:
        raise ReleaseRecordError("cannot decode the Helm release record: %s" % exc) from exc
    if not isinstance(release, dict):
        raise ReleaseRecordError("the Helm release record is not an object")
    return release


def _revision(release: Mapping[str, Any]) -> int:
    try:
        return int(release.get("version") or 0)
    except (TypeError, ValueError):
        return 0


def list_entry(release: Mapping[str, Any]) -> Dict[str, Any]:
    """What `helm list -o json` prints for a release (cmd/helm/list.go newReleaseListWriter)."""
    chart = release.get("chart") or {}
    meta = chart.get("metadata") or {}
    info = release.get("info") or {}
    return {"name": release.get("name"), "namespace": release.get("namespace"),
            "revision": str(_revision(release)), "updated": info.get("last_deployed") or "-",
            "status": info.get("status"),
            "chart": "%s-%s" % (meta.get("name"), meta.get("version")) if meta else "MISSING",
            "app_version": meta.get("appVersion") or ""}


def release_from_records(secrets: List[Mapping[str, Any]], release: str, namespace: str
                         ) -> Tuple[Optional[Dict[str, Any]], Dict[str, Any]]:
    """(the `helm list` entry or None, the `helm get values` dict) of ``release`` from its Secrets.

    ReleaseRecordError when a record of the release cannot be decoded."""
    latest: Optional[Dict[str, Any]] = None
    for secret in secrets:
        meta = secret.get("metadata") or {}
        labels = meta.get("labels") or {}
        if secret.get("type") != RELEASE_SECRET_TYPE or labels.get("owner") != "helm" or labels.get("name") != release:
            continue
        if (meta.get("namespace") or namespace) != namespace:
            continue
        decoded = decode_release((secret.get("data") or {}).get("release", ""))
        if decoded.get("name") != release:
            continue
        if latest is None or _revision(decoded) >= _revision(latest):
            latest = decoded
    if latest is None:
        return None, {}
    config = latest.get("config")
    values = config if isinstance(config, dict) else {}
    entry = list_entry(latest)
    return (entry if entry["status"] in LISTED_STATES else None), values


__all__ = ["LISTED_STATES", "RELEASE_SECRET_TYPE", "ReleaseRecordError", "decode_release", "list_entry",
           "release_from_records", "release_selector"]
