"""The collection's filters, loaded in the main process by every action plugin (plugins/plugin_utils/_preload.py)."""

from __future__ import annotations

import gc
import importlib
import os
import subprocess
import sys

from ansible_collections.gpufleet.sharing.plugins.plugin_utils import _preload
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._preload import FILTERS, load_filters

FILTER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter")


def test_every_filter_file_is_loaded():
    files = sorted(name[:-3] for name in os.listdir(FILTER_DIR) if name.endswith(".py") and name != "__init__.py")
    loaded = load_filters()
    assert loaded == [FILTERS + "." + name for name in files]
    assert all(name in sys.modules for name in loaded)


def test_loading_twice_imports_nothing_again():
    first = {name: sys.modules[name] for name in load_filters()}
    assert load_filters() == sorted(first)
    assert all(sys.modules[name] is module for name, module in first.items())


def test_what_is_loaded_is_left_out_of_the_collectors_passes():
    """gc.freeze after loading: the main process's full collections and its forked workers'
    collections no longer walk the loaded code (docs/benchmarks.md, "Sixth pass")."""
    gc.unfreeze()
    try:
        load_filters()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_loading_a_cluster_modules_action_plugin_leaves_its_code_out_of_the_collectors_passes():
    gc.unfreeze()
    try:
        action = importlib.import_module("ansible_collections.gpufleet.sharing.plugins.action.rollout_lock")
        importlib.reload(action)  # the plugin's class is made again, as when the strategy loads it
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


_BUILTIN_PROBE = """
import sys
from ansible.plugins.loader import filter_loader, init_plugin_loader, test_loader
init_plugin_loader([sys.argv[1]])
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._preload import load_filters
load_filters()
loaded = set(sys.modules)
filter_loader.get("ansible.builtin.to_yaml")
test_loader.get("ansible.builtin.version")
print(sorted(set(sys.modules) - loaded))
"""


def test_ansible_cores_own_filters_and_tests_are_loaded_with_ours():
    """A worker's first filter or test lookup loads every ansible.builtin filter (test) file unless the
    main process has: after load_filters() a lookup of each kind loads nothing (a new interpreter)."""
    # The directory that holds ansible_collections/, as this process found the collection.
    collections = _preload.__file__.split(os.sep + "ansible_collections" + os.sep, maxsplit=1)[0]
    out = subprocess.run([sys.executable, "-c", _BUILTIN_PROBE, collections], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out


_REPORT_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._preload import load_filters
load_filters()
from ansible_collections.gpufleet.sharing.plugins.module_utils.report import _report_html
print(_report_html._TEMPLATE is not None)
"""


def test_the_report_page_is_compiled_once_in_the_main_process():
    """Every report (the rollout's summary, verify's report, drift's) renders the same page, and its
    Jinja template took 60 ms to compile in each worker that rendered one: two per run. After
    load_filters() it is compiled, and the workers inherit it (a new interpreter)."""
    collections = _preload.__file__.split(os.sep + "ansible_collections" + os.sep, maxsplit=1)[0]
    out = subprocess.run([sys.executable, "-c", _REPORT_PROBE, collections], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "True", out
