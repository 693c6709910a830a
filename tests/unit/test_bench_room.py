"""The room benchmark's pure parts (bench/room_figures.py, bench/room_learners.py, bench/room_llama.py):
percentiles, reading a /generate update's status, a learner's timings, a row's summary and ratios, the table,
and llama-server's command line, request and sdist fetch -- no app, no network (an index on loopback)."""

from __future__ import annotations

import math

import pytest

from bench import room_figures, room_floor, room_learners, room_llama


def test_percentile_interpolates_like_numpy():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert room_figures.percentile(xs, 0) == 1.0
    assert room_figures.percentile(xs, 100) == 4.0
    assert room_figures.percentile(xs, 50) == 2.5
    assert math.isclose(room_figures.percentile(xs, 95), 3.85)
    assert room_figures.percentile([7.0], 95) == 7.0
    assert room_figures.percentile([None, 2.0, None], 50) == 2.0
    assert room_figures.percentile([], 50) is None
    with pytest.raises(ValueError):
        room_figures.percentile(xs, 101)


def test_percentile_matches_numpy_on_a_room():
    np = pytest.importorskip("numpy")
    xs = [0.1 * i * i for i in range(30)]
    for q in (50, 95):
        assert math.isclose(room_figures.percentile(xs, q), float(np.percentile(xs, q)))


def status(state, n):
    return f"<div class='pg-status' data-state='{state}' data-tokens='{n}'>…</div>"


def test_parse_status_reads_the_status_element():
    assert room_figures.parse_status((None, "<span class='pg-chip'>x</span>", status("running", 3))) == ("running", 3)
    assert room_figures.parse_status(status("done", 64)) == ("done", 64)
    assert room_figures.parse_status(("no status here", 1)) == (None, None)


def test_first_token_is_the_first_update_with_a_generated_token():
    """The prompt-only update (0 tokens) does not count; completion is the update saying done."""
    t0 = 100.0
    stamped = [
        (100.2, ("chips of the prompt", status("running", 0))),
        (100.9, ("chips", status("running", 5))),
        (101.5, ("chips", status("running", 40))),
        (102.0, ("chips", status("done", 64))),
        (102.1, ("chips", status("done", 64))),  # Gradio's final pair
    ]
    t = room_figures.timings(stamped, t0)
    assert math.isclose(t["first_s"], 0.9) and math.isclose(t["completion_s"], 2.0)
    assert t["tokens"] == 64 and t["state"] == "done"
    unfinished = room_figures.timings(stamped[:3], t0)
    assert unfinished["completion_s"] is None and unfinished["tokens"] == 40


def learner(start, first, completion, tokens=64):
    return {"start": start, "first_s": first, "completion_s": completion, "end": start + completion, "tokens": tokens}


def test_summary_percentiles_aggregate_and_ratios():
    one = room_figures.one_learner([learner(0, 0.3, 2.0), learner(10, 0.3, 1.0), learner(20, 0.4, 1.0)])
    assert one["completion_s"] == 1.0 and one["tok_s"] == 64.0
    many = [learner(0.0, 0.1 * (i + 1), 2.0 + i) for i in range(4)]
    page = {"start": 0.0, "end": 8.0, "tokens": 64, "first_chip_s": 1.0, "done_s": 8.0}  # no first_s: not in p50/p95
    row = room_figures.summarize(many + [page], one)
    assert row["learners"] == 5 and row["finished"] == 4 and row["errors"] == []
    assert math.isclose(row["first_p50_s"], 0.25)
    assert math.isclose(row["completion_p95_s"], room_figures.percentile([2.0, 3.0, 4.0, 5.0], 95))
    assert row["tokens"] == 5 * 64 and row["wall_s"] == 8.0
    assert math.isclose(row["aggregate_tok_s"], 40.0)
    assert math.isclose(row["x_one_learner"], 40.0 / 64.0)
    assert math.isclose(row["completion_x_alone"], row["completion_p95_s"] / 1.0)


def test_summary_counts_errors_and_survives_an_empty_room():
    row = room_figures.summarize([{"error": "TimeoutError: late"}, learner(0, 0.5, 1.0)], None)
    assert row["errors"] == ["TimeoutError: late"] and row["finished"] == 1
    assert "x_one_learner" not in row
    empty = room_figures.summarize([{"error": "x"}], {})
    assert empty["first_p95_s"] is None and "aggregate_tok_s" not in empty


def test_table_has_a_row_per_measurement_and_notes_errors():
    result = {
        "rows": [
            {
                "model": "bundled",
                "server": "app",
                "n": 8,
                "first_p50_s": 0.5,
                "first_p95_s": 1.25,
                "completion_p50_s": 2.0,
                "completion_p95_s": 3.0,
                "completion_x_alone": 4.0,
                "aggregate_tok_s": 123.45,
                "x_one_learner": 1.5,
                "page": {"first_chip_s": 0.75, "done_s": 3.5},
                "server_cores": 1.9,
                "client_cores": 0.05,
                "machine_cores": 1.98,
                "loadavg": [2.0, 3.5],
                "errors": ["TimeoutError: late"],
            },
            {"model": "gpt2-small", "server": "llama-server", "n": 1, "loadavg": [1.0, 1.0]},
        ],
        "skipped": {"llama-server": "cmake is not installed"},
    }
    text = room_figures.table(result)
    lines = text.splitlines()
    assert lines[0] == room_figures.HEADER
    assert lines[1].count("|") == lines[0].count("|")
    assert (
        lines[2]
        == "| bundled | app | 8 | 0.50 / 1.25 | 2.00 / 3.00 | 4.0× | 123.5 | 1.5× | 0.75 / 3.50 | 1.90 / 0.05 / 1.98 | 2.00→3.50 |"
    )
    assert lines[3].startswith("| gpt2-small | llama-server | 1 | – / – |")
    assert "bundled app N=8: 1 errors, first: TimeoutError: late" in text
    assert "llama-server: cmake is not installed" in text


def test_targets_read_the_largest_room():
    rows = [
        {
            "model": "bundled",
            "server": "app",
            "n": 30,
            "x_one_learner": 12.0,
            "first_p95_s": 2.0,
            "stop": {"pressed": 6, "p95_s": 0.12},
        },
        {"model": "gpt2-small", "server": "app", "n": 30, "x_one_learner": 1.0, "aggregate_tok_s": 30.0},
        {"model": "gpt2-small", "server": "llama-server", "n": 30, "aggregate_tok_s": 60.0},
    ]
    lines = room_figures.targets({"rows": rows})
    assert "bundled N=30 aggregate × one learner ≥ 10: 12.00 (met)" in lines[0]
    assert "(not met)" in lines[1] and "(–)" in lines[2]
    assert "0.50 (not met)" in lines[4]
    assert "bundled N=30 Stop p95 ≤ 0.3 s: 0.12 (met)" in lines[5] and "(–)" in lines[6]


def test_llama_server_command_line():
    cmd = room_llama.server_command("/opt/llama-server", "/m/gpt2-small-f32.gguf", n=30, ctx=1024, port=8123)
    assert cmd[0] == "/opt/llama-server"
    pairs = dict(zip(cmd[1::2], cmd[2::2]))
    assert pairs["-m"] == "/m/gpt2-small-f32.gguf"
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123"
    assert pairs["-np"] == "30" and pairs["-c"] == str(30 * 1024)
    assert "-cb" in cmd
    assert cmd[cmd.index("-t") + 1] == "2" and cmd[cmd.index("-tb") + 1] == "2"
    more = room_llama.server_command("s", "m", n=1, ctx=256, port=1, extra_args=["-lm", "none"])
    assert more[-2:] == ["-lm", "none"] and more[more.index("-c") + 1] == "256"


def test_llama_request_streams_the_apps_sampling():
    body = room_llama.completion_body([1, 2, 3], 64, seed=43)
    assert body["prompt"] == [1, 2, 3] and body["n_predict"] == 64 and body["stream"] is True
    assert body["ignore_eos"] is True and body["cache_prompt"] is False
    assert (body["temperature"], body["top_k"], body["top_p"], body["seed"]) == (0.8, 40, 1.0, 43)
    assert body["repeat_penalty"] == 1.0 and body["min_p"] == 0.0


def test_llama_build_commands_build_only_the_server(tmp_path, monkeypatch):
    monkeypatch.setattr(room_llama.shutil, "which", lambda name: None)
    configure, build = room_llama.build_commands(tmp_path / "src", tmp_path / "build", jobs=2)
    assert configure[:5] == ["cmake", "-S", str(tmp_path / "src"), "-B", str(tmp_path / "build")]
    assert "-DLLAMA_BUILD_SERVER=ON" in configure and "-DGGML_NATIVE=ON" in configure and "-G" not in configure
    assert build == ["cmake", "--build", str(tmp_path / "build"), "--target", "llama-server", "-j2"]


@pytest.fixture
def index_server(tmp_path):
    """A package index on this machine's loopback (PEP 691 JSON and the file it lists), as PyPI serves one."""
    import hashlib
    import http.server
    import json
    import threading

    payload = b"an sdist's bytes" * 1000
    listed = {"sha256": hashlib.sha256(payload).hexdigest()}

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/simple/"):
                body = json.dumps(
                    {"files": [{"filename": "pkg-1.0.tar.gz", "url": f"{base}/files/pkg-1.0.tar.gz", "hashes": listed}]}
                ).encode()
            else:
                body = payload
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"{base}/simple/pkg/", payload, listed
    server.shutdown()


def test_the_sdist_is_fetched_from_the_index_and_its_hash_checked(tmp_path, index_server):
    url, payload, listed = index_server
    archive = tmp_path / "pkg-1.0.tar.gz"
    room_llama.fetch_sdist(archive, url)
    assert archive.read_bytes() == payload
    archive.unlink()
    listed["sha256"] = "0" * 64  # the index says other bytes: nothing is kept
    with pytest.raises(ValueError, match="sha256"):
        room_llama.fetch_sdist(archive, url)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(LookupError, match="not on the index"):
        room_llama.fetch_sdist(tmp_path / "other-2.0.tar.gz", url)


def test_llama_binary_from_the_environment_or_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(room_llama.BINARY_ENV, raising=False)
    assert room_llama.find_binary(tmp_path) is None
    built = tmp_path / "build" / "bin" / "llama-server"
    built.parent.mkdir(parents=True)
    built.write_text("")
    assert room_llama.find_binary(tmp_path) == built
    monkeypatch.setenv(room_llama.BINARY_ENV, str(tmp_path / "missing"))
    assert room_llama.find_binary(tmp_path) is None


def test_room_profile_sorts_py_spy_samples_by_what_they_were_doing():
    from bench import room_profile

    raw = [
        "thread (1): decode-loop;_round (playground/server/decode_loop.py:259);"
        "run_rows (playground/runtime/native_step.py:114) 7\n",
        "thread (2): sampler_0;_worker (thread.py:81);advance (playground/engine/sampling.py:329);"
        "prepare (playground/runtime/native_sampler.py:98) 5\n",
        "thread (2): sampler_0;_worker (thread.py:81) 2\n",
        "thread (3): Thread-1 (run);process_events (gradio/queueing.py:973);send (h11/_h11_impl.py:503) 3\n",
        "thread (3): Thread-1 (run);process_events (gradio/queueing.py:915) 1\n",
        "thread (4): MainThread;block_thread (gradio/blocks.py:3957) 2\n",
        "\n",
        "not a sample line\n",
    ]
    counts = room_profile.categorize(raw)
    assert counts == {
        "shared forward (native rows, calling thread)": 7,
        "row samplers (Generation.advance)": 5,
        "sampler pool hand-over": 2,
        "uvicorn: sending": 3,
        "Gradio: queue": 1,
        "other": 2,
    }
    ranked = room_profile.shares(counts)
    assert ranked[0] == ("shared forward (native rows, calling thread)", 7, 0.35)
    assert abs(sum(share for _, _, share in ranked) - 1.0) < 1e-12
    assert room_profile.shares(type(counts)()) == []


def test_learner_result_counts_the_updates_it_received():
    stamped = [(10.1, status("running", 0)), (10.3, status("running", 5)), (10.9, status("done", 64))]
    out = room_learners.learner_result(stamped, 10.0)
    assert out["updates"] == 3 and out["tokens"] == 64 and math.isclose(out["completion_s"], 0.9)
    row = room_figures.summarize([out, {**out, "updates": 5}, {**out, "updates": 9}])
    assert row["updates_p50"] == 5


def test_the_floor_apps_updates_read_as_a_whole_run():
    """bench/room_floor.py's bare /generate: the prompt's update, the first token, the final one, read by the
    room's own learners' timings as one run of 64 tokens."""
    updates = list(room_floor.generate({}, "Once upon a time", room_floor.TOKENS))
    assert [room_figures.parse_status(u) for u in updates] == [("running", 0), ("running", 1), ("done", 64)]
    stamped = [(10.0 + 0.25 * i, list(u)) for i, u in enumerate(updates)]
    got = room_learners.learner_result(stamped, 10.0)
    assert (got["first_s"], got["completion_s"], got["tokens"], got["updates"]) == (0.25, 0.5, 64, 3)
    assert "error" not in got and got["end"] == 10.5


@pytest.mark.parametrize("with_page", [False, True])
def test_a_room_of_n_has_n_learners_with_or_without_the_page(with_page):
    """``measure_app``'s room of N is N learners: N HTTP ones without the Chromium page, N - 1 and the page with
    it; each room is run once unmeasured first, as llama-server's rooms are warmed up."""
    from bench import room as R

    class FakeRoom:
        client, pid = "http", 0

        def __init__(self):
            self.with_page, self.rounds = with_page, []

        def clients(self, model, n):
            self.made = n

        def round(self, model, n_clients, with_page, stop_every=0):
            self.rounds.append((n_clients, with_page, stop_every))
            learner = {"start": 0.0, "first_s": 0.01, "end": 0.1, "completion_s": 0.1, "tokens": R.MAX_NEW}
            page = dict(learner) if with_page else None
            return [dict(learner) for _ in range(n_clients)], page, {"loadavg": [0.0, 0.0], "server_cores": 1.0}

    fake = FakeRoom()
    rows = R.measure_app(fake, "bundled", (1, 30), log=lambda *a, **k: None)
    seat = 1 if with_page else 0
    assert fake.made == 30 - seat
    room_of_30 = [r[:2] for r in fake.rounds if r[0] == 30 - seat and not r[2]]
    assert room_of_30 == [(30 - seat, False), (30 - seat, with_page)]  # the warm-up, then the measured room
    assert rows[-1]["n"] == 30 and rows[-1]["learners"] == 30


def test_a_rooms_shared_steps_are_the_last_ones_after_a_pause_in_three_phases():
    from bench import room_profile

    def step(start, rows, total=0.01):
        return {"start": start, "rows": rows, "forward_s": total / 2, "sampling_s": total / 4, "total_s": total}

    earlier = [step(0.0, 30), step(0.01, 30)]
    room = [step(1.0, 4), step(1.02, 12), step(1.04, 30), step(1.05, 30), step(1.06, 30), step(1.07, 8)]
    assert room_profile.last_room(earlier + room) == room
    intake, full, drain = room_profile.phases(room)
    assert (intake["phase"], intake["steps"], intake["tokens"]) == ("intake", 2, 16)
    assert intake["seconds"] == pytest.approx(0.04) and intake["tok_s"] == pytest.approx(400)
    assert (full["steps"], full["tokens"], full["ms_a_step"], full["forward_ms"]) == (3, 90, 10.0, 5.0)
    assert full["seconds"] == pytest.approx(0.03) and full["tok_s"] == pytest.approx(3000)
    assert (drain["steps"], drain["tokens"]) == (1, 8) and drain["seconds"] == pytest.approx(0.01)
    assert room_profile.phases([]) == []
    only_full = room_profile.phases([step(0.0, 5), step(0.01, 5)])
    assert [p["steps"] for p in only_full] == [0, 2, 0] and only_full[0]["tok_s"] is None
    lines = room_profile.phase_lines(room, 300.0)
    assert [line.split(":")[0].strip() for line in lines] == ["intake", "full", "drain"]
    assert "90 tokens" in lines[1] and "forward 5.0" in lines[1] and "10.0× one learner" in lines[1]
    assert room_profile.phase_lines(room, None)[1].endswith("(– one learner)")  # no learner alone: no ratio


def test_the_benchmarks_server_writes_its_loops_shared_steps_for_room_profile(monkeypatch, tmp_path):
    import json
    import os

    from bench.browser import app_server
    from playground.server import decode_loop

    loop = decode_loop.DecodeLoop()
    loop.timeline.extend([decode_loop.SharedStep(1.0, 3, 0.002, 0.001, 0.004)])
    monkeypatch.setattr(decode_loop, "LOOP", loop)
    monkeypatch.setattr(app_server.tempfile, "gettempdir", lambda: str(tmp_path))
    app_server._write_shared_steps()
    got = json.loads(app_server.shared_steps_path(os.getpid()).read_text())
    assert got == [{"start": 1.0, "rows": 3, "forward_s": 0.002, "sampling_s": 0.001, "total_s": 0.004}]


def test_the_floors_table_gives_the_servers_cpu_and_its_share_a_learner():
    assert room_floor._cpu_cell({"server_cpu_s": 0.16}, 30) == "0.160 (5.3)"
    assert room_floor._cpu_cell({"server_cpu_s": None}, 30) == "–"


def test_a_staggered_learner_goes_its_seconds_after_the_rooms_barrier():
    import threading
    import time

    from bench.room import Staggered

    barrier = threading.Barrier(2)
    went = []

    def learner(after):
        Staggered(barrier, after).wait(5) if after else barrier.wait(5)
        went.append((after, time.perf_counter()))

    threads = [threading.Thread(target=learner, args=(a,)) for a in (0.0, 0.3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (_, first), (_, second) = sorted(went)
    assert 0.25 <= second - first < 1.0


def test_a_spread_rooms_row_and_table():
    from bench import room_spread

    one = {"completion_s": 0.1, "tok_s": 640.0}
    learners = [
        {"start": float(i), "first_s": 0.02, "end": i + 0.2, "completion_s": 0.2, "tokens": 64} for i in range(4)
    ] + [{"error": "never finished"}]
    row = room_spread.spread_row(3.0, learners, one, {"server_cores": 1.2})
    assert row["completion_p95_s"] == pytest.approx(0.2) and row["completion_x_alone"] == pytest.approx(2.0)
    assert row["learner_tok_s"] == pytest.approx(320.0) and row["errors"] == 1 and row["spread_s"] == 3.0
    lines = room_spread.table([row]).splitlines()
    assert lines[2].startswith("| 3 | 0.02 / 0.02 | 0.20 / 0.20 | 2.0× | 320.00 | 1.20 |")
