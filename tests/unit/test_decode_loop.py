"""The server's decode loop (playground.server.decode_loop): every run of a model advances by one token
per shared forward, and a run's results never depend on who decodes beside it."""

import itertools
import os
import threading
import time

import pytest
import torch

from playground.engine import decoding
from playground.engine.sampling import Generation, NonFiniteError, generate
from playground.server.decode_loop import MAX_CONCURRENT_RUNS, MIN_CONCURRENT_RUNS, DecodeLoop, concurrent_runs
from tests.helpers import os_threads_named
from tests.tiny_models import random_model

FIELDS = (
    "index",
    "position",
    "token_id",
    "prob",
    "raw_prob",
    "rank",
    "entropy",
    "raw_entropy",
    "top",
    "candidates",
    "stages",
    "context_start",
    "kept_tokens",
    "u",
    "intervals",
)


class CountingDecoder(decoding.Decoder):
    """The plain decoder, logging each shared forward: (model's name, how many rows)."""

    def __init__(self, name, log, fail_on=None):
        self.model_name, self.log, self.fail_on = name, log, fail_on

    def rows(self, model, rows):
        self.log.append((self.model_name, len(rows)))
        if self.fail_on is not None and any(row.cache is self.fail_on() for row in rows):
            raise RuntimeError("this row's forward failed")
        return super().rows(model, rows)


def counted(model, name, log, **kw):
    decoding.attach(model, CountingDecoder(name, log, **kw))
    return model


def run(loop, gens, timeout=60.0):
    """Submit every generation together; each one's (steps, error) once all have ended."""
    streams = [loop.submit(g) for g in gens]
    return [collect(s, timeout) for s in streams]


def collect(stream, timeout=60.0):
    steps, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        stream.wait(0.5)
        new, ended = stream.take()
        steps += new
        if ended:
            return steps, stream.error
    raise AssertionError("the run did not end")


def same_steps(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert {f: getattr(x, f) for f in FIELDS} == {f: getattr(y, f) for f in FIELDS}
        assert (x.attention is None) == (y.attention is None)
        if x.attention is not None:
            assert len(x.attention) == len(y.attention)
            assert all(torch.equal(p, q) for p, q in zip(x.attention, y.attention))


def gen(model, prompt, n, **kw):
    return generate(model, prompt, max_new_tokens=n, **kw)


# (prompt, new tokens, settings) of the runs decoding beside the one under test
OTHERS = [
    ([5, 6, 7], 9, dict(temperature=0.7, top_k=20, seed=1)),
    ([100, 200, 300, 400, 500, 600, 700], 14, dict(temperature=0.0)),
    (list(range(40, 66)), 12, dict(temperature=1.3, top_p=0.8, seed=3)),  # its window slides
    ([9], 20, dict(temperature=1.0, seed=4, capture_attention=True)),
    ([11, 12], 5, dict(temperature=0.5, top_k=3, top_p=0.5, seed=5)),
    ([1000, 2000, 3000], 16, dict(temperature=2.0, seed=6, capture_attention=True)),
]


def test_a_run_alongside_others_is_bit_identical_to_it_alone():
    log = []
    model = counted(random_model(0), "a", log)
    target = dict(temperature=0.9, top_k=50, top_p=0.9, seed=7, capture_attention=True)
    prompt = list(range(1, 21))  # 20 + 16 > the context of 32: the window slides at the end
    loop = DecodeLoop()
    ((alone, error),) = run(loop, [gen(model, prompt, 16, **target)])
    assert error is None and len(alone) == 16 and alone[0].u is not None and alone[-1].context_start > 0
    assert all(n == 1 for _, n in log)
    log.clear()
    results = run(loop, [gen(model, prompt, 16, **target)] + [gen(model, p, n, **kw) for p, n, kw in OTHERS])
    assert max(n for _, n in log) >= 6  # the runs really shared forwards
    (together, error), *others = results
    assert error is None
    same_steps(alone, together)
    for (steps, error), (_, n, _) in zip(others, OTHERS):
        assert error is None and len(steps) == n


class PromptRowsDecoder(CountingDecoder):
    """The counting decoder that also takes prompts of up to 8 tokens as rows; logs (name, rows, tokens)."""

    def prompt_rows(self, model):
        return 8

    def rows(self, model, rows):
        self.log.append((self.model_name, len(rows), sum(r.n_tokens for r in rows)))
        return decoding.Decoder.rows(self, model, rows)


def test_prompts_join_the_shared_forward_a_few_tokens_a_round_and_change_nothing():
    log = []
    model = random_model(0)
    decoding.attach(model, PromptRowsDecoder("a", log))
    runs = [([3 + i, 9, 4 + i, 1, 5], 6, dict(temperature=0.8, seed=i, capture_attention=True)) for i in range(6)]
    runs.append((list(range(1, 13)), 6, dict(temperature=0.0)))  # 12 tokens: its prompt runs alone
    alone = [run(DecodeLoop(), [gen(model, p, n, **kw)])[0] for p, n, kw in runs]
    log.clear()
    loop = DecodeLoop(prompt_tokens_per_round=12)
    together = run(loop, [gen(model, p, n, **kw) for p, n, kw in runs])
    for (a, error_a), (b, error_b) in zip(alone, together):
        assert error_a is None and error_b is None
        same_steps(a, b)
    # a round feeds at most 12 prompt tokens as rows: two prompts of 5 (a third would pass 12), beside the
    # runs already going; the 12-token prompt never came as a row (steps alone are not logged here)
    fed = [tokens - rows for _, rows, tokens in log]  # the prompts' earlier tokens in each shared forward
    assert max(fed) == 8 and all(tokens - rows <= 8 for _, rows, tokens in log)
    assert max(rows for _, rows, _ in log) == 7


def test_stop_ends_a_run_at_once_and_the_others_do_not_change():
    model = random_model(1, context_length=256)
    others = [([i + 1, i + 2], 40, dict(temperature=0.8, seed=i)) for i in range(10)]
    reference = run(DecodeLoop(), [gen(model, p, n, **kw) for p, n, kw in others])
    loop = DecodeLoop()
    stopped = gen(model, [3, 1, 4, 1, 5], 200, temperature=1.0, seed=9)
    streams = []
    real_advance = stopped.advance

    def advance(result, *made):  # Stop pressed while the run's fifth step is being made
        if len(stopped.steps) == 4:
            streams[0].stop()
        return real_advance(result, *made)

    stopped.advance = advance
    with loop._cond:  # all join before the loop's first round
        streams += [loop.submit(stopped)] + [loop.submit(gen(model, p, n, **kw)) for p, n, kw in others]
    steps, error = collect(streams[0])
    assert error is None and streams[0].stop_asked
    # answered at once: the four steps delivered before the stop; the step in flight is made, and dropped
    assert len(steps) == 4 and [s.token_id for s in steps] == stopped.token_ids[:4]
    deadline = time.monotonic() + 10
    while loop.active() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(stopped.steps) == 5 and streams[0].take() == ([], True)
    for stream, (want, _) in zip(streams[1:], reference):
        got, error = collect(stream)
        assert error is None
        same_steps(got, want)
    assert loop.active() == 0 and not loop.running(None)


def test_stop_answers_the_consumer_without_waiting_for_the_step_in_flight():
    """A shared step that takes long (a room of a big model on a slow machine): Stop still answers at once."""

    class Slow(decoding.Decoder):
        def rows(self, model, rows):
            time.sleep(0.5)
            return super().rows(model, rows)

    model = random_model(15, context_length=256)
    decoding.attach(model, Slow())
    loop = DecodeLoop()
    stream = loop.submit(gen(model, [1, 2], 100, temperature=0.8, seed=1))
    while not stream.take()[0]:  # its first step
        stream.wait(5)
    time.sleep(0.1)  # a shared step in flight
    t0 = time.perf_counter()
    stream.stop()
    assert stream.wait_end(5) and stream.wait(5)
    new, ended = stream.take()
    assert ended and time.perf_counter() - t0 < 0.2
    time.sleep(0.8)  # the step in flight comes back: dropped
    assert stream.take() == ([], True) and not loop.running(None)


def test_stop_by_key_and_a_key_submitted_again_replaces_the_run():
    model = random_model(2, context_length=256)
    loop = DecodeLoop()
    first = loop.submit(gen(model, [1, 2], 200, seed=1), key="run-1")
    assert loop.running("run-1") and not loop.stop("run-2")
    second = loop.submit(gen(model, [1, 2], 3, seed=1), key="run-1")  # the same session generates again
    assert first.stop_asked
    assert len(collect(second)[0]) == 3 and len(collect(first)[0]) < 200
    third = loop.submit(gen(model, [1, 2], 200, seed=1), key="run-3")
    assert loop.stop("run-3") and len(collect(third)[0]) < 200 and not loop.running("run-3")


def test_a_run_submitted_stopped_ends_before_its_first_step_and_the_loop_goes_on():
    """A Stop that came before its run started (the page named the press): no step is made for it."""
    model = random_model(2, context_length=256)
    loop = DecodeLoop()
    stopped = gen(model, [1, 2], 50, seed=1)
    stream = loop.submit(stopped, key="run-s", stopped=True)
    assert collect(stream) == ([], None) and stream.stop_asked and not stopped.steps
    deadline = time.monotonic() + 10
    while loop.active() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not stopped.steps and not loop.running("run-s")
    assert len(collect(loop.submit(gen(model, [1, 2], 5, seed=1)))[0]) == 5


def test_runs_on_two_models_take_turns():
    log = []
    a = counted(random_model(3), "a", log)
    b = counted(random_model(4, n_layers=1), "b", log)
    gens = [gen(m, [i + 1, i + 7], 20, temperature=0.8, seed=i) for i in range(3) for m in (a, b)]
    results = run(DecodeLoop(), gens)
    assert all(error is None and len(steps) == 20 for steps, error in results)
    models = [name for name, _ in log]
    for name in "ab":  # every step after the prompt's was a row of a shared forward
        assert sum(n for m, n in log if m == name) == 3 * 19 and models.count(name) < 3 * 19
    longest = max(len(list(g)) for _, g in itertools.groupby(models))
    assert longest <= 2  # round-robin: neither model waits for the other's run to end


def test_a_run_on_a_model_with_nan_logits_ends_alone_with_its_error():
    healthy, broken = random_model(5), random_model(6)
    with torch.no_grad():
        broken.out_head.weight[7].fill_(float("nan"))
    settings = [([1, 2, 3], 12, dict(temperature=0.9, seed=s)) for s in range(4)]
    reference = run(DecodeLoop(), [gen(healthy, p, n, **kw) for p, n, kw in settings])
    loop = DecodeLoop()
    results = run(loop, [gen(broken, [1, 2], 10, seed=1)] + [gen(healthy, p, n, **kw) for p, n, kw in settings])
    (steps, error), *others = results
    assert steps == [] and isinstance(error, NonFiniteError)
    for (got, error), (want, _) in zip(others, reference):
        assert error is None
        same_steps(got, want)
    assert run(loop, [gen(healthy, [4, 5], 3, seed=0)])[0][1] is None  # the loop goes on


def test_a_failing_shared_forward_ends_only_the_run_whose_row_failed():
    log, doomed = [], []
    model = counted(random_model(7), "a", log, fail_on=lambda: doomed[0]._cache if doomed else None)
    settings = [([1, 2, 3], 8, dict(temperature=0.9, seed=s)) for s in range(4)]
    decoding.detach(model)
    reference = run(DecodeLoop(), [gen(model, p, n, **kw) for p, n, kw in settings])
    counted(model, "a", log, fail_on=lambda: doomed[0]._cache if doomed else None)
    doomed.append(gen(model, [8, 9], 8, seed=2))
    results = run(DecodeLoop(), [doomed[0]] + [gen(model, p, n, **kw) for p, n, kw in settings])
    (steps, error), *others = results
    assert len(steps) == 1 and "this row's forward failed" in str(error)  # its prompt step ran alone
    for (got, error), (want, _) in zip(others, reference):
        assert error is None
        same_steps(got, want)


def test_a_newcomers_first_token_comes_while_long_runs_go_on():
    model = random_model(8, context_length=256)
    loop = DecodeLoop()
    long_runs = [gen(model, [i + 1], 200, seed=i) for i in range(4)]
    streams = [loop.submit(g) for g in long_runs]
    while min(len(g.steps) for g in long_runs) < 10:
        time.sleep(0.001)
    first_round = []
    newcomer = gen(model, list(range(30, 90)), 3, seed=5)
    real = newcomer.step_alone
    newcomer.step_alone = lambda: first_round.append(loop.rounds) or real()
    joined = loop.rounds
    steps, error = collect(loop.submit(newcomer))
    assert error is None and len(steps) == 3
    assert first_round[0] - joined <= 2  # within a round or two of joining
    assert max(len(g.steps) for g in long_runs) < 200  # and the long runs were still going
    for s in streams:
        s.stop()
        collect(s)


def test_a_burst_of_newcomers_does_not_stall_the_runs_already_going():
    """Prompt steps are rationed per round: ten newcomers at once cost a running run a few rounds'
    worth of prompt steps, never a round with all ten."""
    log = []
    model = counted(random_model(9, context_length=256), "a", log)
    loop = DecodeLoop()
    going = gen(model, [1, 2], 200, seed=1)
    stream = loop.submit(going)
    while len(going.steps) < 3:
        time.sleep(0.001)
    calls = []
    real = Generation.step_alone

    def counting(self):
        calls.append(loop.rounds)
        return real(self)

    Generation.step_alone = counting
    try:
        run(loop, [gen(model, [5 + i] * 20, 2, seed=i) for i in range(10)])
    finally:
        Generation.step_alone = real
    per_round = [calls.count(r) for r in set(calls)]
    assert max(per_round) <= loop.prompt_steps_per_round
    stream.stop()
    collect(stream)


def test_the_streams_others_count_the_runs_sharing_its_step():
    model = random_model(10)
    loop = DecodeLoop(prompt_steps_per_round=4)  # all four prompt steps in the first round
    with loop._cond:  # the four join before the loop's first round
        streams = [loop.submit(gen(model, [i + 1], 6, seed=i)) for i in range(4)]
    seen = set()
    for s in streams:
        collect(s)
        seen.add(s.others)
    assert seen == {3}


def test_the_loop_keeps_the_times_of_its_shared_steps_for_tools():
    """``DecodeLoop.timeline``: one entry a shared forward, its rows as the counting decoder saw them, its
    parts within its whole, in the order they ran."""
    log: list = []
    model = counted(random_model(11), "a", log)
    loop = DecodeLoop(prompt_steps_per_round=4)
    with loop._cond:  # the three join before the loop's first round
        streams = [loop.submit(gen(model, [i + 1], 5, seed=i)) for i in range(3)]
    for s in streams:
        collect(s)
    steps = list(loop.timeline)
    assert [s.rows for s in steps] == [n for _, n in log] and steps
    for a, b in zip(steps, steps[1:]):
        assert a.start + a.total_s <= b.start
    for s in steps:
        assert 0 <= s.forward_s <= s.total_s and 0 <= s.sampling_s <= s.total_s - s.forward_s


def test_a_consumer_waiting_never_holds_the_loop():
    """Nobody takes this run's steps: the loop makes all of them (and another run's) anyway."""
    model = random_model(11)
    loop = DecodeLoop()
    ignored = loop.submit(gen(model, [1], 12, seed=1))
    steps, error = collect(loop.submit(gen(model, [2], 12, seed=2)))
    assert error is None and len(steps) == 12
    deadline = time.monotonic() + 10
    while not ignored.ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ignored.ended and len(ignored.take()[0]) == 12


def test_steps_iterates_a_run_made_by_the_loop_and_closing_it_stops_the_run():
    model = random_model(12, context_length=256)
    loop = DecodeLoop()
    assert [s.token_id for s in loop.steps(gen(model, [1, 2], 5, seed=3))] == [
        s.token_id for s in gen(model, [1, 2], 5, seed=3)
    ]
    it = loop.steps(gen(model, [1, 2], 200, seed=3))
    next(it)
    it.close()
    deadline = time.monotonic() + 10
    while loop.active() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loop.active() == 0


@pytest.mark.parametrize("runs_in_budget, want", [(10, MIN_CONCURRENT_RUNS), (40, 40), (10_000, MAX_CONCURRENT_RUNS)])
def test_the_generate_concurrency_follows_the_budget_within_its_bounds(runs_in_budget, want):
    cfg = random_model(0).cfg
    per_run = 2 * cfg.n_layers * cfg.context_length * cfg.emb_dim * 4 * 2  # KV cache and attention, float32
    assert concurrent_runs(cfg, runs_in_budget * per_run) == want


def test_the_loop_thread_survives_a_bug_in_a_round(monkeypatch):
    model = random_model(13)
    loop = DecodeLoop()
    real, broken = loop._round, threading.Event()

    def once_broken():
        if not broken.is_set():
            broken.set()
            raise RuntimeError("a bug")
        real()

    monkeypatch.setattr(loop, "_round", once_broken)
    steps, error = collect(loop.submit(gen(model, [1], 4, seed=0)))
    assert broken.is_set() and error is None and len(steps) == 4


def test_the_shared_forward_runs_on_the_loops_thread_count_while_the_samplers_run_on_one():
    # The samplers' pool gives each of its threads one torch thread; the loop's own thread, started before or
    # after it, keeps the count it was made with (the kernels' decisions are measured on it). With
    # torch.set_num_threads in the pool's initializer the loop's forwards ran on one core.
    seen = []

    class Watching(decoding.Decoder):
        def rows(self, model, rows):
            seen.append((threading.current_thread().name, torch.get_num_threads()))
            return super().rows(model, rows)

        def sampling(self, model):  # around a sampled row's sampling (a prompt's on the loop's thread)
            seen.append((threading.current_thread().name, torch.get_num_threads()))
            return super().sampling(model)

    model = random_model(14)
    decoding.attach(model, Watching())
    for _ in range(2):  # a second loop's thread starts after the first one's samplers
        loop = DecodeLoop(threads=2)
        run(loop, [gen(model, [1, 2], 3, temperature=0.8, seed=i) for i in range(3)])
    assert {n for name, n in seen if name == "decode-loop"} == {2}
    assert {n for name, n in seen if name.startswith("sampler")} == {1}
    assert len({name for name, _ in seen}) >= 2


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2, reason="needs Linux, 2 cores")
def test_the_loop_gives_back_its_openmp_workers_once_no_run_is_left():
    # Workers kept by an idle thread make every other thread's OpenMP teams sleep at their waits.
    name, during = "pg-loop-omp", []

    class Parallel(decoding.Decoder):
        def rows(self, model, rows):
            float(torch.ones(4_000_000).mul_(2).sum())  # a parallel region on the loop's thread
            during.append(os_threads_named(name))  # the loop's thread and the workers it started
            return super().rows(model, rows)

    model = random_model(15)
    decoding.attach(model, Parallel())
    loop = DecodeLoop(threads=2, name=name)
    ((steps, error),) = run(loop, [gen(model, [1, 2], 3, seed=0)])
    assert error is None and len(steps) == 3
    deadline = time.monotonic() + 10
    while os_threads_named(name) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert min(during) > 1 and os_threads_named(name) == 1
    # the next run starts them again
    ((steps, error),) = run(loop, [gen(model, [3], 2, seed=1)])
    assert error is None and during[-1] > 1
