"""The README's promises: two set-up commands, CI runs exactly the test one, and the gradio_client
example works against the real app."""

import re

import pytest

from tests.helpers import README as README_PATH
from tests.helpers import ROOT

README = README_PATH.read_text()


def _bash_blocks():
    return re.findall(r"```bash\n(.*?)```", README, re.S)


def test_two_setup_commands_and_ci_runs_the_test_one():
    blocks = [b.strip() for b in _bash_blocks()]
    assert blocks[:2] == [
        "pip install -r requirements.txt && python app.py",
        "pip install -r requirements-dev.txt && python -m pytest",
    ]
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == blocks[1]


def test_requirements_are_pinned():
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / name).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "-r")):
                assert "==" in line, f"{name}: {line} is not pinned"


def test_space_front_matter():
    front = README.split("---")[1]
    assert "sdk: gradio" in front and "app_file: app.py" in front
    import gradio

    assert f"sdk_version: {gradio.__version__}" in front
    short = re.search(r"short_description: (.*)", front).group(1)
    assert len(short) <= 60
    # A free account's only Gradio hardware (docs/operations.md): ZeroGPU, by huggingface_hub's id for it
    from huggingface_hub import SpaceHardware

    hardware = re.search(r"suggested_hardware: (.*)", front).group(1).strip()
    assert hardware == SpaceHardware.ZERO_A10G.value
    assert "spaces==" in (ROOT / "requirements.txt").read_text()


@pytest.mark.slow
def test_gradio_client_example_runs(app_url):
    docs = (ROOT / "docs" / "python.md").read_text()
    code = re.search(r"```python\n(from gradio_client import Client.*?)```", docs, re.S).group(1)
    scope = {}
    exec(code.replace('"http://127.0.0.1:7860/"', repr(app_url)), scope)
    assert len(scope["run"]["steps"]) == 20
    assert len(scope["att"]["attention"]) == len(scope["run"]["token_ids"])


def test_every_environment_variable_the_app_reads_is_documented():
    """docs/operations.md's table names every ``os.environ.get("...")`` of the app (torchrun's own variables aside)."""
    names = set()
    for path in [ROOT / "app.py", *(ROOT / "playground").rglob("*.py")]:
        names |= set(re.findall(r"os\.environ\.get\(\s*\"([A-Z_]+)\"", path.read_text()))
    names -= {"WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}  # set by torchrun for its workers
    assert {"PLAYGROUND_WORK_DIR", "PLAYGROUND_ACCEL", "GRADIO_TEMP_DIR"} <= names
    operations = (ROOT / "docs" / "operations.md").read_text()
    table = operations.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    assert not [n for n in sorted(names) if f"`{n}`" not in table]


def test_set_up_says_the_app_serves_and_gives_the_cpu_only_install_as_a_note():
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert "opens the app" not in setup and "serves the app" in setup and "prints the address" in setup
    cpu = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert f"`{cpu}`" in setup  # inline, beside the default line: the two set-up commands stay two
    assert cpu not in "".join(_bash_blocks())
