"""``python -m playground.training ...`` and ``torchrun ... -m playground.training ...``."""

import os
import sys

from playground.training.cli import main

code = main()
if "LOCAL_RANK" in os.environ:
    # A torchrun worker: everything is written and the process group destroyed. Leave without the
    # interpreter's teardown, where gloo's threads can abort a finished worker ("terminate called
    # without an active exception") and fail the whole run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
