"""Make `ansible_collections.gpufleet.sharing` importable from this checkout for unit tests."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, '.build')
LINK = os.path.join(BUILD, 'ansible_collections', 'gpufleet', 'sharing')

if not os.path.lexists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(os.path.join('..', '..', '..'), LINK)
if BUILD not in sys.path:
    sys.path.insert(0, BUILD)

# The version matrix (tests/tools/matrix_leg.sh) runs these tests with each ansible-core. Tests that
# drive a module through ansible-core 2.19's test helpers (ansible.module_utils.testing, the
# template trust API) cannot run on 2.16-2.18, which have none: they are left out there, named in
# the run's header, and run on the pinned 2.19 and on 2.20 and 2.21. Everything else runs everywhere.
import re  # noqa: E402

from ansible.release import __version__ as _CORE_VERSION  # noqa: E402

_NEEDS_219 = re.compile(r"ansible\.module_utils\.testing|trust_as_template|ansible\._internal|^import fake_k8s"
                        r"|^from (fake_k8s|test_gpu_operator|test_gpu_dra_driver|test_mig_config|test_node_maintenance) import",
                        re.MULTILINE)
_OLD_CORE = tuple(int(part) for part in _CORE_VERSION.split(".")[:2]) < (2, 19)
_LEFT_OUT = []


def pytest_ignore_collect(collection_path, config):  # pylint: disable=unused-argument
    if _OLD_CORE and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        if _NEEDS_219.search(collection_path.read_text(encoding="utf-8")):
            _LEFT_OUT.append(os.path.relpath(str(collection_path), REPO))
            return True
    return None


def pytest_report_header(config):  # pylint: disable=unused-argument
    if _OLD_CORE:
        return "ansible-core %s: test files that need 2.19's test helpers are left out (listed at the end)" % _CORE_VERSION
    return None


def pytest_terminal_summary(terminalreporter):
    if _LEFT_OUT:
        terminalreporter.write_line("left out on ansible-core %s (they need 2.19's test helpers): %s"
                                    % (_CORE_VERSION, ", ".join(sorted(_LEFT_OUT))))
