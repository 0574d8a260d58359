# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one "bad input" error of the collection: every problem found at once, one sentence each.

Pure. Each domain names its own subclass (``SharingError``, ``MigPartedError`` ...) so callers can
catch just theirs; ``_module.GpuFleetModule`` turns any of them into a failure whose ``problems``
lists the sentences (``run()`` for one that escapes, ``failing_on(what)`` to prefix the message).
"""

from __future__ import annotations

from typing import List, Sequence


class ProblemsError(ValueError):
    """Invalid input; ``problems`` lists every problem found, the message joins them with "; "."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: List[str] = list(problems)
        super().__init__("; ".join(self.problems))
