"""A module's ``diff`` as Ansible's callbacks print it (issue 43 #7).

``render`` gives the diff to ansible-core's own ``CallbackBase._get_diff`` (what the default
callback calls for ``--diff``). That code calls ``splitlines`` on each side that is not a mapping
or None (ansible-core 2.19, lib/ansible/plugins/callback/__init__.py), so a list, a number or a
bool there raises, and ansible-playbook prints ``[WARNING]: Callback dispatch 'v2_on_file_diff'
failed ...`` instead of the diff. ``render`` raises an AssertionError naming the entry instead.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from ansible.plugins.callback import CallbackBase


def render(diff):
    """The text the default callback prints for ``diff`` (one entry or a list of entries)."""
    entries = diff if isinstance(diff, list) else [diff]
    for index, entry in enumerate(entries):
        assert isinstance(entry, Mapping), "diff entry %d is a %s, not a mapping" % (index, type(entry).__name__)
        for side in ("before", "after"):
            value = entry.get(side)
            assert value is None or isinstance(value, (str, Mapping)), (
                "diff entry %d (%s) %s is a %s: Ansible's callbacks print only text or a mapping there"
                % (index, entry.get("before_header", ""), side, type(value).__name__))
    return CallbackBase()._get_diff(copy.deepcopy(diff))
