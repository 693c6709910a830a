"""GPT Playground: `python app.py` serves the app; a Hugging Face Space reads its ``demo``.

An installed package serves the same app with the `gpt-playground` command (playground/ui/serve.py)."""

from playground.ui.serve import prepare, serve

demo = prepare()

if __name__ == "__main__":
    serve(demo)
