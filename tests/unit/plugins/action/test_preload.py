"""The collection's filters, loaded in the main process by every action plugin (plugins/plugin_utils/_preload.py)."""

from __future__ import annotations

import gc
import importlib
import os
import sys

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
    collections no longer walk the loaded code (a run 0.3-0.4 s shorter on the demo lab)."""
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
