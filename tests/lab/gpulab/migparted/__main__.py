"""``python -m gpulab.migparted --state FILE -- <nvidia-mig-parted args>``."""

import sys

from gpulab.migparted.command import cli

sys.exit(cli())
