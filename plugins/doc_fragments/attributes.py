# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``attributes`` every module of the collection shares (see docs/design-rules.md, check mode)."""

from __future__ import annotations


class ModuleDocFragment:

    # Cluster modules: run where the Python kubernetes client is, talk to the API server.
    CLUSTER = r"""
attributes:
  check_mode:
    support: full
    description:
      - Reads and plans as a real run; every write is sent as a server-side dry run
        (C(dryRun=All)), so nothing is stored and no resourceVersion moves.
  diff_mode:
    support: full
    description:
      - Shows each object the module would change, before and after.
  platform:
    platforms: posix
    support: full
    description:
      - Runs on the controller (or any host with the Python C(kubernetes) client) and talks to the API server.
  action_group:
    description: Use C(group/gpufleet.sharing.k8s) in C(module_defaults) to set the connection options once.
    support: full
    membership:
      - gpufleet.sharing.k8s
"""

    # Host modules: run on the GPU host itself.
    HOST = r"""
attributes:
  check_mode:
    support: full
    description:
      - Reads the GPUs and plans as a real run; runs no command that changes a GPU and writes no file.
  diff_mode:
    support: full
    description:
      - Shows what would change on the host, before and after.
  platform:
    platforms: posix
    support: full
    description:
      - Runs on the GPU host (Linux, NVIDIA driver).
"""
