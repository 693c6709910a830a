"""``python -m playground.training ...`` and ``torchrun ... -m playground.training ...``."""

import sys

from playground.training.cli import main

sys.exit(main())
