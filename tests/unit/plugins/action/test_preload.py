"""The collection's filters, loaded in the main process by every action plugin (plugins/plugin_utils/_preload.py)."""

from __future__ import annotations

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
