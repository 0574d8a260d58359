# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The errors of Kubernetes access: ``K8sError`` (a refused or failed request, with its HTTP status and
reason) and ``K8sTimeout`` (a wait that ran out, with what it last saw).

Pure."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional


class K8sError(Exception):
    """An API call failed. ``status`` is the HTTP status (None for transport errors)."""

    def __init__(self, message: str, status: Optional[int] = None, reason: Optional[str] = None,
                 body: Optional[Dict[str, Any]] = None, method: Optional[str] = None, path: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.body = body
        self.method = method
        self.path = path

    def __str__(self):
        return self.message


class K8sTimeout(K8sError):
    """wait_for ran out of time; ``detail`` is the last thing the probe reported."""

    def __init__(self, what: str, elapsed: float, detail: Any) -> None:
        super().__init__(
            "timed out after %.0fs waiting for %s; last state: %s" % (elapsed, what, _short(detail)))
        self.what = what
        self.elapsed = elapsed
        self.detail = detail


def _short(detail: Any) -> str:
    text = detail if isinstance(detail, str) else json.dumps(detail, sort_keys=True, default=str)
    return text if len(text) <= 600 else text[:600] + "..."
