"""GPT Playground: `python app.py` serves the app (also the Hugging Face Space entry point)."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from playground.runtime.devices import DeviceError, default_device  # noqa: E402
from playground.runtime.memory import BUDGET, map_large_blocks  # noqa: E402
from playground.server.recipes import decide_kernels_at_start  # noqa: E402
from playground.ui.app import build_demo, launch_kwargs, warm_up  # noqa: E402

map_large_blocks()  # before any model is built: freed weights go straight back to the OS
BUDGET.count_whole_process()  # the budget bounds the server's resident size, not only what it names
try:
    default_device()  # PLAYGROUND_DEVICE=auto|cpu|cuda|mps: a device this machine lacks stops here, said plainly
except DeviceError as e:
    raise SystemExit(f"error: {e}") from None
# Kernel decisions: the default model's made now (once per machine: read from disk after), GPT-2 small's in
# the background; a learner's Build only reads them.
decide_kernels_at_start()
demo = build_demo()

if __name__ == "__main__":
    warm_up()  # the first run's one-off costs, paid before the first page opens
    demo.launch(**launch_kwargs())  # prints the address it serves
