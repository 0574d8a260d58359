# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's Jinja filters, loaded once in the controller's main process.

Ansible templates a task in the worker process it forks for that task and host. To find a filter of a
collection, ansible-core's ``Jinja2Loader`` (``ansible/plugins/loader.py``, 2.19) imports *every*
file of the collection's ``plugins/filter`` (a file may define several filters, and a later one may
override an earlier one), and the collection loader compiles each from its source
(``_AnsibleCollectionPkgLoaderBase.get_code``: no bytecode cache). A worker is new for every task and
host, so every task that used one of our filters compiled all of them and the pure code they import
again: on the demo lab, 40% of the controller's work in a run that changes nothing (issue 26).

A module already in ``sys.modules`` is not loaded again (``PluginLoader._load_module_source``), and a
forked worker inherits the main process's modules. The strategy loads a task's action plugin in the
main process before it forks the task's workers (``action_loader.get(..., class_only=True)`` in
``ansible/plugins/strategy/linear.py`` and ``free.py``), so every action plugin of this collection calls
``load_filters()`` when it is imported: from the first task of a gpufleet module on, no worker loads
a filter of ours again. Before that task, or with a strategy that does not load action plugins in the
main process, the filters load in the workers, as without this module.

The same holds for ansible-core's own filters and tests: a worker's first lookup of any filter or test
loads every file of ``ansible.builtin``'s (``Jinja2Loader._ensure_non_collection_wrappers``, from
``JinjaPluginIntercept.__getitem__``), unless the main process has. ``load_filters()`` asks for one of
each, so that the main process has them all from the first gpufleet task on. It also compiles the
report page's Jinja template (60 ms), which the rollout's summary and verify's report each compiled in
their worker.

What is loaded this way stays for the whole run, and ``keep_loaded()`` (``gc.freeze``) leaves it out
of the garbage collector's passes: the main process no longer walks the imported code (ansible-core,
the ``kubernetes`` client, ours) in each of its full collections, and a forked worker's collections
do not touch those objects either (Python's documentation of ``gc.freeze`` recommends it before
``fork()`` for this). Measured (docs/benchmarks.md, "Sixth pass"): a skipped task 21 ms before,
15 ms after; the controller's CPU in a 50-host no-op 12.3 core-seconds before, 10.3 after. Frozen
objects are still freed by reference counting; only a cycle among them would wait for the process to
end, which for ``ansible-playbook`` is the run's end.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
from typing import List

from ansible.plugins.loader import filter_loader, test_loader

FILTERS = "ansible_collections.gpufleet.sharing.plugins.filter"
REPORT_PAGE = "ansible_collections.gpufleet.sharing.plugins.module_utils.report._report_html"


def load_filters() -> List[str]:
    """Import every filter file of the collection and ansible-core's filters and tests (once per process);
    the names of the collection's filter modules."""
    package = importlib.import_module(FILTERS)
    names = sorted(FILTERS + "." + name for _finder, name, is_package in pkgutil.iter_modules(package.__path__)
                   if not is_package)
    for name in names:
        importlib.import_module(name)
    # ansible.builtin's filters and tests: a lookup loads all of them (Jinja2Loader), once per process.
    filter_loader.get("ansible.builtin.bool")
    test_loader.get("ansible.builtin.match")
    # The report page (every report of a run renders it): compiled here once, not in each worker.
    report_page = importlib.import_module(REPORT_PAGE)
    if report_page.HAS_JINJA2:
        report_page.page_template()
    keep_loaded()
    return names


def keep_loaded() -> None:
    """Everything the process holds now is left out of the garbage collector's passes (``gc.freeze``)."""
    gc.freeze()
