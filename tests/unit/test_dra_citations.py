"""One cited upstream version of NVIDIA's DRA driver in the code's comments and docstrings (issue 42): the
project's current name (kubernetes-sigs/dra-driver-nvidia-gpu, not the old NVIDIA/k8s-dra-driver-gpu or a bare
commit) at v0.5.0, the release the collection pins; v0.4.1 and v25.12.0 are named only where they differ, never as
the source of a citation."""

from __future__ import annotations

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CITATION = re.compile(r"kubernetes-sigs/dra-driver-nvidia-gpu(?:\s+(v[0-9][^\s,;:)`]*))?")


def _files():
    for top in ("plugins", "roles", "playbooks"):
        for root, _dirs, names in os.walk(os.path.join(REPO, top)):
            for name in names:
                if name.endswith((".py", ".yml", ".yaml")):
                    yield os.path.join(root, name)


def test_the_driver_is_cited_under_its_current_name_at_one_version():
    wrong = []
    for path in _files():
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                where = "%s:%d" % (os.path.relpath(path, REPO), number)
                if "NVIDIA/k8s-dra-driver-gpu" in line:
                    wrong.append(where + " names the old repository")
                for found in CITATION.finditer(line):
                    if found.group(1) and found.group(1) != "v0.5.0":
                        wrong.append("%s cites %s" % (where, found.group(1)))
    assert wrong == []
