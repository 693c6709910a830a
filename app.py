"""GPT Playground: `python app.py` serves the app (also the Hugging Face Space entry point)."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from playground.ui import build_demo, launch_kwargs  # noqa: E402

demo = build_demo()

if __name__ == "__main__":
    demo.launch(**launch_kwargs())
