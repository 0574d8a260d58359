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
