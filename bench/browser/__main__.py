"""``python -m bench.browser --serve``: the app server the benchmark starts (``python -m bench --browser`` runs it)."""

import os
import sys

from .app_server import serve

if sys.argv[1:] == ["--serve"]:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    serve()
else:
    sys.exit("python -m bench --browser runs the benchmark; this module's own entry point is --serve")
