"""Whether a config fits the memory budget: the checks that read the process-wide budget.

Kept apart from ``config`` so the teaching model (which imports ``config``) loads nothing of
``playground.runtime``: whoever builds a model for a user calls these first.
"""

from __future__ import annotations

from playground.engine.config import ConfigError, GPTConfig
from playground.engine.sizes import count_parameters_analytic, estimate_memory_bytes
from playground.runtime.machine_memory import default_budget_bytes, format_bytes
from playground.runtime.memory import MemoryBudget


def default_memory_budget_bytes() -> int:
    """The process-wide budget's size (playground.runtime.memory states the rule)."""
    return default_budget_bytes()


def check_memory(cfg: GPTConfig, dtype: str = "float32", budget_bytes: int | None = None) -> int:
    """Raise ConfigError if the estimate exceeds ``budget_bytes``; return the estimate otherwise.

    ``budget_bytes`` None is the size of the process-wide budget (playground.runtime.memory). This
    checks the config against a size only; whether that much is free *now* is the question of
    whoever holds the budget (``check_fits``).
    """
    budget = default_budget_bytes() if budget_bytes is None else budget_bytes
    estimate = estimate_memory_bytes(cfg, dtype)
    if estimate > budget:
        raise ConfigError(
            "budget.model_over",
            "This model needs about {need} in {dtype} ({params:,} parameters), more than the memory budget of "
            "{budget}. Make it smaller (fewer layers, a smaller emb_dim or context) or raise "
            "PLAYGROUND_MEMORY_BUDGET_GB.",
            need=format_bytes(estimate),
            dtype=dtype,
            params=count_parameters_analytic(cfg),
            budget=format_bytes(budget),
        )
    return estimate


def check_fits(cfg: GPTConfig, dtype: str, budget: MemoryBudget | int) -> int:
    """``check_memory`` against a budget the caller holds: bytes (its whole size only), or a
    MemoryBudget, whose ``check`` then also raises MemoryBudgetError (a MemoryError) naming what holds
    the memory when the model fits the budget but not what is free now. Returns the estimate."""
    if not isinstance(budget, MemoryBudget):
        return check_memory(cfg, dtype, int(budget))
    estimate = check_memory(cfg, dtype, budget.total)
    budget.check(estimate, f"a model of {count_parameters_analytic(cfg):,} parameters in {dtype}")
    return estimate
