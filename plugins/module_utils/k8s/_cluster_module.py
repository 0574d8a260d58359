# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base of every cluster module: ``GpuFleetModule`` plus cluster access and its one check-mode rule.

``ClusterModule(ARGUMENT_SPEC)`` adds the connection options (``K8S_AUTH_ARGSPEC``, documented by the
``gpufleet.sharing.k8s_auth`` fragment; set once per play with ``module_defaults`` for
``group/gpufleet.sharing.k8s``), the client ``mod.k8s`` and the translation of ``K8sError`` into a
clean failure that carries the HTTP status. In check mode the client sends every write as a
server-side dry run (see ``_module``).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import K8S_AUTH_ARGSPEC
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient, client_from_module
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule, ModuleFailure


class ClusterModule(GpuFleetModule):
    """A module that talks to the Kubernetes API server."""

    expected_errors = (K8sError,)

    def __init__(self, argument_spec: Mapping[str, Any], **module_options: Any) -> None:
        spec = dict(argument_spec)
        spec.update(K8S_AUTH_ARGSPEC)
        super().__init__(spec, **module_options)
        self._k8s: Optional[K8sClient] = None

    @property
    def k8s(self) -> K8sClient:
        """The cluster client, connected on first use; writes are server-side dry runs in check mode."""
        if self._k8s is None:
            self._k8s = client_from_module(self.ansible, dry_run=self.check_mode)
        return self._k8s

    def failure_from(self, exc: Exception) -> ModuleFailure:
        extra: Dict[str, Any] = {}
        if getattr(exc, "status", None) is not None:
            extra["status"] = getattr(exc, "status")
        return ModuleFailure(str(exc), **extra)
