"""A budget refusal names what its reader holds and says everyone else's only as counts and sizes
(playground.runtime.holdings, the model cache's leases): two sessions share a small budget."""

import math
import threading

import pytest

from playground import PRESETS
from playground.engine.config import GPTConfig
from playground.i18n import tr_error
from playground.runtime.holdings import MemoryBudgetError, acting_for, current_owner
from playground.runtime.machine_memory import GiB
from playground.runtime.memory import MemoryBudget
from playground.server.model_cache import ModelCache, model_bytes
from playground.server.recipes import random_recipe

NANO = PRESETS["nano"]
BIG = GPTConfig.from_dict({**NANO.to_dict(), "n_layers": 3, "emb_dim": 192, "n_heads": 4})


@pytest.fixture
def full(monkeypatch):
    """Session "a" leases a 3-layer d192 model (seed 31337), session "b" a nano (seed 4242), and the
    budget (read from the environment at every check) is then what they hold plus a few bytes."""
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", "8")
    budget = MemoryBudget()
    cache = ModelCache(budget=budget)
    a = cache.get(random_recipe(BIG, seed=31337), session="a")
    b = cache.get(random_recipe(NANO, seed=4242), session="b")
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET_GB", repr((budget.used() + 4096) / GiB))
    assert 0 <= budget.available() < model_bytes(b)
    return budget, cache, a, b


def refusal(call) -> MemoryBudgetError:
    with pytest.raises(MemoryBudgetError) as caught:
        call()
    return caught.value


def test_the_refused_session_sees_its_own_model_by_name_and_the_others_as_counts(full):
    budget, cache, a, b = full
    e = refusal(lambda: cache.get(random_recipe(NANO, seed=7), session="b"))
    message = str(e)
    assert e.key == "budget.in_use_yours"
    own, others = message.split("Yours: ", 1)[1].split(" Besides: ", 1)
    assert "random init (seed 4242)" in own and "a generation with" not in own  # its model; a lease keeps no room
    assert "31337" not in message and "3-layer d192" not in message  # the other session's model and seed
    assert others.startswith("1 model (") and "kept ready" not in others
    assert "Try again in about " in message
    assert f"({model_bytes(a) / 1e6:.2f} MB)" in others  # ... counted and sized


def test_the_filler_when_refused_sees_its_own_names(full):
    budget, cache, a, b = full
    message = str(refusal(lambda: cache.get(random_recipe(NANO, seed=8), session="a")))
    own = message.split("Yours: ", 1)[1].split(" Besides: ", 1)[0]
    assert "3-layer d192 random init (seed 31337)" in own
    assert "4242" not in message


def test_a_request_for_no_session_names_nothing(full):
    budget, cache, a, b = full
    e = refusal(lambda: cache.get(random_recipe(NANO, seed=9)))
    assert e.key == "budget.in_use" and "in use by 2 models (" in str(e)
    assert "31337" not in str(e) and "4242" not in str(e)
    with acting_for("nobody-here"):  # a session that holds nothing is told counts alone too
        e = refusal(lambda: budget.check(10**6, "an export"))
    assert e.key == "budget.in_use" and "seed" not in str(e)


def test_the_refusal_in_chinese_keeps_the_names_and_the_counts(full):
    budget, cache, a, b = full
    zh = tr_error("zh-CN", refusal(lambda: cache.get(random_recipe(NANO, seed=7), session="b")))
    assert zh.startswith("内存不足，无法用于 building ")
    assert "你的：" in zh and "random init (seed 4242)" in zh and "其他：1 个模型（" in zh
    assert "31337" not in zh


def test_a_model_is_a_sessions_only_while_it_leases_it(full):
    budget, cache, a, b = full

    def owners(model):
        return next(h.owners for h in budget.usage() if h.what.endswith("(seed 31337)") and h.kind == "model")

    assert owners(a) == {"a"}
    assert cache.end_expired_leases(math.inf) == 2
    assert owners(a) == frozenset()  # still counted (in use here), no longer anyone's to see by name
    assert not [h for h in budget.usage() if h.kind == "reserved"]


def test_what_a_request_holds_is_its_sessions_and_no_other_threads():
    budget = MemoryBudget(10**9)
    seen = []
    with acting_for("a"):
        with budget.reserve(1000, "an export", "export"):
            thread = threading.Thread(target=lambda: seen.append(current_owner()))
            thread.start()
            thread.join()
            assert [h.owners for h in budget.usage()] == [frozenset({"a"})]
        assert current_owner() == "a"
    assert seen == [None] and current_owner() is None


def test_counts_by_kind_are_said_in_chinese_and_survive_a_copy(full):
    import copy
    import pickle

    budget, cache, a, b = full
    e = refusal(lambda: cache.get(random_recipe(NANO, seed=9)))
    zh = tr_error("zh-CN", e)
    assert "2 个模型（" in zh and "model" not in zh, zh
    counted = e.fields["holdings"]
    assert copy.deepcopy(counted) == counted and pickle.loads(pickle.dumps(counted)).parts == counted.parts
