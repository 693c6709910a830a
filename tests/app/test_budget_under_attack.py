"""The memory budget bounds the server's resident size: `python app.py` under a small budget, with
clients building, generating, exporting, replaying and training at once, and two sending .npz zip
bombs, never holds more than it."""

import io
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile

import numpy as np
import psutil
import pytest

from tests.helpers import ROOT, build_fields

pytestmark = pytest.mark.slow

BUDGET_GIB = 1.5
ROUNDS_SECONDS = 20
OVERTIME_SECONDS = 120  # a kind not yet through by then gets this long more (a slow machine), then fails
MID = dict(vocab_size=50257, context_length=256, emb_dim=384, n_heads=6, n_layers=4)  # 107 MB in float32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(env) -> subprocess.Popen | None:
    """`python app.py`, once it said it serves (after gradio's own check that it can reach itself,
    which a busy machine sometimes fails: None then)."""
    proc = subprocess.Popen(
        [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    for line in proc.stdout:
        if "public link" in line:  # printed after the check, when the server is up
            proc.log = []  # what the server prints from now on: a failure quotes its tracebacks
            threading.Thread(target=lambda: proc.log.extend(proc.stdout), daemon=True).start()  # keeps it drained
            return proc
    proc.wait()
    return None


@pytest.fixture(scope="module")
def server():
    """`python app.py` as a server runs it, under a small budget; its pid, address and printed lines."""
    port = free_port()
    env = {
        **os.environ,
        "PLAYGROUND_MEMORY_BUDGET_GB": str(BUDGET_GIB),
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "PLAYGROUND_TRAIN_MINUTES": "2",
    }
    proc = start_app(env) or start_app(env)
    assert proc is not None, "python app.py did not start"
    try:
        yield proc.pid, f"http://127.0.0.1:{port}/", proc.log
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_peak_resident_size_stays_within_the_budget_under_an_attack_mix(server, tmp_path):
    from gradio_client import Client, handle_file

    pid, url, server_log = server
    process = psutil.Process(pid)
    budget = BUDGET_GIB * 2**30
    start_rss = process.memory_info().rss
    peak, stop = [start_rss], threading.Event()

    def sample():
        while not stop.is_set():
            peak.append(process.memory_info().rss)
            time.sleep(0.01)

    deadline = time.monotonic() + ROUNDS_SECONDS
    done, failures, refusals = [], [], []

    refused_kinds: set[str] = set()

    def going(*kinds: str) -> bool:
        """Until the deadline; past it, while none of ``kinds`` got through or was refused yet (a
        slow machine), up to the overtime."""
        now = time.monotonic()
        if now < deadline:
            return True
        settled = any(k in done or k in refused_kinds for k in kinds)
        return not settled and now < deadline + OVERTIME_SECONDS

    def said(message: str, *kinds: str) -> str:  # a refusal names the budget; anything else must be a success
        if "memory budget" in message or "Not enough memory" in message:
            refusals.append(message)
            refused_kinds.update(kinds)
        return message

    def builder(i):
        c = Client(url, verbose=False)
        seed = 0
        while going("generate"):
            seed += 1
            msg = said(
                c.predict(
                    "random", 100 * i + seed, "gpt2", None, "float32", *build_fields(MID), api_name="/build_model"
                )[0]
            )
            if "Ready" not in msg:
                continue
            status = said(
                list(c.submit("Once upon a time", 0.9, 40, 1.0, 48, seed, False, api_name="/generate"))[-1][1]
            )
            assert "Done: 48 tokens" in status or "memory" in status, status
            done.append("generate")

    def exporter():
        c = Client(url, verbose=False)
        said(
            c.predict(
                "random",
                7,
                "gpt2",
                None,
                "float32",
                *build_fields(dict(n_layers=2, emb_dim=256, n_heads=4)),
                api_name="/build_model",
            )[0]
        )
        exports = ("/export_run_json", "/export_run_npz", "/export_model")
        while going(*exports):
            status = said(
                list(c.submit("To be, or not", 1.0, 0, 1.0, 96, 1, False, api_name="/generate"))[-1][1], *exports
            )
            if "Done" not in status:
                continue
            for api in exports:
                said(str(c.predict(api_name=api)[1]), api)
                done.append(api)

    def replayer():
        c = Client(url, verbose=False)
        while going("replay"):
            status = said(list(c.submit("ROMEO:\n", 0.8, 40, 1.0, 64, 3, False, api_name="/generate"))[-1][1], "replay")
            if "Done" not in status:
                continue
            path, message = c.predict(api_name="/export_replay")
            if not isinstance(path, str):  # no file this time (an update that skips the output): it says why
                said(str(message), "replay")
                continue
            if path:
                _, report = c.predict(handle_file(path), api_name="/replay")
                said(str(report.get("message", report)), "replay")
                done.append("replay")

    def bomber():
        # .npz replays whose metadata.npy declares 1 GiB and 3 GiB of float64 over deflated zeros
        bombs = []
        for gib in (1, 3):
            path = tmp_path / f"bomb{gib}.npz"
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                header, {"descr": "<f8", "fortran_order": False, "shape": (gib * 2**27,)}
            )
            with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                zf.writestr("metadata.npy", header.getvalue() + bytes(1 << 20))
            bombs.append(str(path))
        c = Client(url, verbose=False)
        while time.monotonic() < deadline:
            for path in bombs:
                message = str(c.predict(handle_file(path), api_name="/replay")[0])
                if "metadata.npy" not in message:
                    failures.append(f"bomb not refused by its declared size: {message[:200]}")
                done.append("bomb")

    def trainer():
        c = Client(url, verbose=False)
        while going("train"):
            out = c.predict("nano", "aesop", None, "", 20, 3e-3, 1, api_name="/train")
            message = said(" ".join(str(x) for x in out if isinstance(x, str)), "train")  # its message among them
            if "Finished after 20 steps" in message:
                done.append("train")

    def guarded(fn, *args):
        try:
            fn(*args)
        except Exception as e:  # collected, reported below
            failures.append(f"{fn.__name__}{args}: {type(e).__name__}: {e}")

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    users = [(builder, 0), (builder, 1), (builder, 2), (builder, 3), (exporter,), (replayer,), (trainer,), (trainer,)]
    users += [(bomber,), (bomber,)]
    threads = [threading.Thread(target=guarded, args=u) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    stop.set()
    sampler.join()
    kinds = ("generate", "/export_run_json", "/export_run_npz", "/export_model", "replay", "train", "bomb")
    print(
        f"\npeak RSS {max(peak) / 2**30:.3f} GiB of a {BUDGET_GIB} GiB budget (start {start_rss / 2**30:.3f} GiB); "
        f"done: { ({k: done.count(k) for k in kinds}) }; {len(refusals)} refused for memory"
    )
    assert not failures, (failures, "".join(server_log)[-4000:])
    # Every kind got through at least once, or was refused with the budget's own message (a saturated
    # budget is the point of the mix); generating and the bombs' refusals always get through.
    for kind in kinds:
        assert kind in done or kind in refused_kinds, (kind, refusals[:3])
    assert {"generate", "bomb"} <= set(done), (set(done), refusals[:3])
    assert max(peak) <= budget, f"peak RSS {max(peak) / 2**30:.3f} GiB over the {BUDGET_GIB} GiB budget"
