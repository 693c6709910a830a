import os
import sys
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared"
TINY_SHAKESPEARE = SHARED / "data" / "tinyshakespeare.txt"


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def app_url():
    """The real app on a free local port for the tests of one module; closed afterwards."""
    from playground.ui import build_demo, launch_kwargs

    demo = build_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs())
    try:
        yield url
    finally:
        demo.close()
