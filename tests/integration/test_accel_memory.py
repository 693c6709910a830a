"""A build's reservation against the memory ``accelerate`` really uses (issue 33): with this machine's kernel
decisions for the shape made -- written into a kernel cache of the test's own by the measurement a server runs
in the background -- a build copies weights (a layout, the native step's (out, in) rows and 2 MB pages, a
stacked Q/K/V copy), and without them it copies none. Either way the build's reservation covers its peak RSS
growth, and the budget's count of the model its resident growth, each by a small margin, not a second model.

The builds are measured in a process of their own, as a server's builds are: a peak resident size is the whole
process's, and a test process that ran other tests first carries their threads and heap into it."""

import gc
import multiprocessing
import shutil
from pathlib import Path

import psutil
import pytest
import torch

from playground.accel import background, copy_plan, enabled, undecided
from playground.engine.config import GPTConfig
from playground.engine.sizes import count_parameters_analytic
from playground.runtime import kernels, library_cache
from playground.runtime.machine_memory import map_large_blocks, trim
from playground.runtime.memory import MemoryBudget
from playground.server.model_cache import ModelCache, model_bytes, weight_bytes
from playground.server.recipes import build_from_recipe, build_peak_bytes, random_recipe, timing_recipe

SMALL = GPTConfig(context_length=256, emb_dim=256, n_heads=4, n_layers=8)  # ~77 MB in float32
CLEAR_REFS = Path("/proc/self/clear_refs")
SLACK = 8 * 2**20  # what else the process allocates meanwhile (Python objects, torch's first use of a kernel)

pytestmark = [
    pytest.mark.skipif(not CLEAR_REFS.exists(), reason="needs Linux's peak resident size (VmHWM)"),
    pytest.mark.skipif(not enabled(), reason="PLAYGROUND_ACCEL=off: nothing is decided or copied"),
]


def rss() -> int:
    return psutil.Process().memory_info().rss


def reset_peak() -> None:
    CLEAR_REFS.write_text("5")  # VmHWM starts again from the resident size now


def peak() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def kernel_cache(tmp_path, monkeypatch):
    """A server's kernel decisions kept in a folder of this test's own, none made yet; the compiled
    libraries copied in from the session's cache (else built here)."""
    assert background.wait_idle(600)  # no measurement of an earlier test's model beside these builds
    for lib in library_cache.cache_dir().glob("*.so*"):
        shutil.copy2(lib, tmp_path / lib.name)
    monkeypatch.setenv("PLAYGROUND_KERNEL_CACHE", str(tmp_path))
    map_large_blocks()  # as the server's entry point does: a freed matrix goes back to the OS at once
    kernels.forget()
    store = kernels.keep_decisions(tmp_path)
    try:
        yield store
    finally:
        kernels.stop_keeping_decisions()
        kernels.forget()


def measured_build(recipe: dict) -> dict:
    """The build's reservation, its peak RSS growth and its resident growth, with what the model and the
    budget say of it."""
    budget = MemoryBudget(8 * 2**30)
    cache = ModelCache(budget=budget)
    reserved = build_peak_bytes(recipe)
    gc.collect()
    trim()
    before = rss()
    reset_peak()
    model = cache.get(recipe)
    grown_peak = peak() - before
    gc.collect()
    trim()
    return {
        "reserved": reserved,
        "grown_peak": grown_peak,
        "resident": rss() - before,
        "weights": weight_bytes(model),
        "model_bytes": model_bytes(model),
        "budget_used": budget.used(),
        "undecided": bool(undecided(model)),
    }


def _build_in_a_fresh_server(folder: str, seed: int, results) -> None:
    """A restarted server's build: its entry point's malloc setting, every kernel decision read from the
    file in ``folder`` (none made in this process); a decision left open is measured later (not here). The
    build measured is the process's second: its first loads the compiled libraries and starts torch's
    threads, once a process, not once a model."""
    later: list[int] = []
    background.measure_later = lambda key, build, nbytes: later.append(nbytes)
    map_large_blocks()
    kernels.keep_decisions(folder)
    plan = copy_plan(SMALL, torch.float32, measure=False)
    measured_build(random_recipe(SMALL, seed=seed + 1000))
    measured = measured_build(random_recipe(SMALL, seed=seed))
    results.put({**measured, "plan_peak": plan.peak, "plan_resident": plan.resident, "later": later})


def build_in_a_fresh_server(folder: Path, seed: int) -> dict:
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    child = spawn.Process(target=_build_in_a_fresh_server, args=(str(folder), seed, results))
    child.start()
    try:
        measured = results.get(timeout=300)
    finally:
        child.join(60)
    assert child.exitcode == 0, child.exitcode
    return measured


def test_with_decisions_the_reservation_covers_what_accelerate_copies(kernel_cache, tmp_path):
    # The decisions as a server makes them: its background measurement of the shape, into its file.
    build_from_recipe(timing_recipe(SMALL, "float32"), measure=True)
    assert len(kernel_cache) > 0
    m = build_in_a_fresh_server(tmp_path, seed=3)
    weights, reserved, grown_peak, resident = m["weights"], m["reserved"], m["grown_peak"], m["resident"]
    assert weights == 4 * count_parameters_analytic(SMALL)
    assert not m["undecided"] and not m["later"]  # every decision was read: none left for the background
    assert reserved == weights + m["plan_peak"]
    assert m["model_bytes"] == weights + m["plan_resident"] and m["budget_used"] == m["model_bytes"]
    assert grown_peak <= reserved + SLACK, (grown_peak, reserved)
    assert resident <= m["model_bytes"] + SLACK, (resident, m["model_bytes"])
    # the reservation follows the copies, not a second model: at most one matrix and the stacked copy more
    assert reserved - grown_peak < 0.25 * weights + SLACK, (grown_peak, reserved)
    assert m["model_bytes"] - resident < SLACK, (resident, m["model_bytes"])


def test_without_decisions_nothing_is_copied_and_nothing_more_is_reserved(kernel_cache, tmp_path):
    m = build_in_a_fresh_server(tmp_path, seed=4)
    weights, reserved, grown_peak, resident = m["weights"], m["reserved"], m["grown_peak"], m["resident"]
    assert m["undecided"] and m["later"]  # the plain path now; measured later, in the background
    assert reserved == weights == m["model_bytes"] == m["budget_used"]
    assert m["later"][0] > weights  # the background measurement's build reserves its own copies
    assert grown_peak <= reserved + SLACK, (grown_peak, reserved)
    assert abs(resident - weights) < SLACK, (resident, weights)


def test_a_dropped_accelerated_model_gives_its_memory_back_without_the_cycle_collector(kernel_cache):
    """The budget stops counting a model when its last reference goes; its weights must go then too, not at
    the collector's next full pass (an accelerated module bound to itself was such a cycle)."""
    build_from_recipe(timing_recipe(SMALL, "float32"), measure=True)
    kernels.forget()
    model = build_from_recipe(random_recipe(SMALL, seed=5))
    assert any("forward" in m.__dict__ or "project_qkv" in m.__dict__ for m in model.modules())  # accelerated
    weights = weight_bytes(model)
    gc.collect()
    trim()
    before = rss()
    gc.disable()
    try:
        del model
        trim()
        freed = before - rss()
    finally:
        gc.enable()
    assert freed > 0.9 * weights, (freed, weights)
