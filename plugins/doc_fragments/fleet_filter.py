# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The input of the filters that work on the whole fleet at once: hostvars and the hosts to take."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: The inventory hosts to take, for example C(ansible_play_hosts_all).
    type: list
    elements: str
    required: true
"""
