"""``python -m gpulab``: see gpulab.cli."""

import sys

from gpulab.cli import main

sys.exit(main())
