# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way a gpufleet.sharing module is put together: argument spec, result, failure, diff.

Every module's ``main()`` is a few lines::

    def main() -> None:
        ClusterModule(ARGUMENT_SPEC).run(run)          # host modules: GpuFleetModule(ARGUMENT_SPEC)

    def run(mod: ClusterModule) -> None:          # read -> plan -> write
        node = mod.k8s.get("Node", mod.params["node"])
        ...
        mod.changes.record("node gpu-a labels", before, after, changed=True)
        mod.result["labels"] = after
        if problems:
            mod.fail("what is wrong, and where", problems=problems)

- ``fail()`` raises; ``run()`` turns it (and the errors a subclass expects, ``K8sError`` for
  ``_cluster_module.ClusterModule``) into ``fail_json`` carrying the result gathered so far, so no
  helper ever exits the process itself.
- Bad input is a ``_errors.ProblemsError`` (every domain's error subclasses it): ``run()`` fails
  with its message and ``problems``; ``with mod.failing_on("invalid sharing plan"):`` prefixes
  the message with what the block was doing.
- This file does not import the Kubernetes layer: host modules built on it ship to GPU hosts
  without ``_k8s`` (and never try to import the ``kubernetes`` package there).
- ``changes`` collects the changed flag and the diff entries; ``run()`` adds ``diff`` only under
  ``--diff``.
- Check mode, the one rule for cluster modules: the module plans and reads exactly as in a real run,
  and every write request goes to the API server as a server-side dry run (``dryRun=All``). That is
  set once, on the client (``ClusterModule.k8s`` is built with ``dry_run=mod.check_mode``); modules do not branch
  on check mode for writes. The API server validates and defaults each object but stores nothing, so
  no resourceVersion moves and the diff shows what would really be stored. What the API server
  cannot dry-run (helm) is not done but reported as planned, and nothing is waited for that a write
  would have caused (evicted pods going, MIG manager, readiness). Full rule: docs/design-rules.md,
  "Modules: the base and check mode".
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, Mapping, NoReturn, Optional, Tuple, Type

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._changes import Changes, for_callbacks
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._inputs import redact_url, redact_urls


class ModuleFailure(Exception):
    """A clear failure: ``msg`` names what is wrong and where; ``extra`` goes into the result."""

    def __init__(self, msg: str, **extra: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.extra = extra


class GpuFleetModule:
    """An AnsibleModule plus the result and the change tracker."""

    # Errors of a lower layer that become a clean failure (see ``failure_from``).
    expected_errors: Tuple[Type[Exception], ...] = ()

    def __init__(self, argument_spec: Mapping[str, Any], **module_options: Any) -> None:
        spec = dict(argument_spec)
        module_options.setdefault("supports_check_mode", True)
        self.ansible = AnsibleModule(argument_spec=spec, **module_options)
        self.params: Dict[str, Any] = self.ansible.params
        self.check_mode: bool = self.ansible.check_mode
        self.diff_mode: bool = bool(self.ansible._diff)
        self.result: Dict[str, Any] = {"changed": False}
        self.changes = Changes()

    def failure_from(self, exc: Exception) -> ModuleFailure:
        """The failure to report for one of ``expected_errors``."""
        return ModuleFailure(str(exc))

    def fail(self, msg: str, **extra: Any) -> NoReturn:
        raise ModuleFailure(msg, **extra)

    @contextlib.contextmanager
    def failing_on(self, what: str = "", **extra: Any) -> Iterator[None]:
        """A ``ProblemsError`` in the block fails the module: ``<what>: <problems>``, with ``problems`` and ``extra``."""
        try:
            yield
        except ProblemsError as exc:
            self.fail("%s: %s" % (what, exc) if what else str(exc), problems=exc.problems, **extra)

    def warn(self, msg: str) -> None:
        self.ansible.warn(redact_url(msg))

    def log(self, msg: str) -> None:
        """Progress for long waits (shown with -vvv and in the controller's log)."""
        self.ansible.log(msg)

    def _final_result(self, extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        result = dict(self.result)
        result.update(extra or {})
        result["changed"] = bool(result.get("changed")) or self.changes.changed
        if self.diff_mode and self.changes.entries and "diff" not in result:
            result["diff"] = self.changes.diff()
        if "diff" in result:
            result["diff"] = for_callbacks(result["diff"])  # each side text or a mapping (issue 43 #7)
        return redact_urls(result)  # no URL's user:password@ in a result, a diff or a message

    def run(self, body: Callable[["GpuFleetModule"], None]) -> NoReturn:
        """Run ``body(self)``; exit with the result, or fail with it and the reason."""
        try:
            body(self)
        except ModuleFailure as exc:
            self.ansible.fail_json(msg=redact_url(exc.msg), **self._final_result(exc.extra))
        except ProblemsError as exc:
            self.ansible.fail_json(msg=redact_url(str(exc)), **self._final_result({"problems": exc.problems}))
        except self.expected_errors as exc:  # pylint: disable=catching-non-exception
            failure = self.failure_from(exc)
            self.ansible.fail_json(msg=redact_url(failure.msg), **self._final_result(failure.extra))
        self.ansible.exit_json(**self._final_result())
