"""``python -m gpulab.smi --state FILE -- <nvidia-smi args>``."""

import sys

from gpulab.smi.command import cli

sys.exit(cli())
