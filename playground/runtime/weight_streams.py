"""How many weight rows a thread of the one-row products reads at once: measured once per machine.

The compiled one-row products (``one_row_gemv.cpp``, and the native step that includes it) read each weight
row once, front to back. Four rows side by side serve every load of x four times and give the prefetchers four
streams; one row after another gives them one long stream. Which streams faster is the machine's to say: on one
2-core EPYC four rows reached the memory's bandwidth, on another they left half of it unused
(docs/benchmarks.md). The two read the same rows with the same arithmetic, so the choice changes no number.
"""

from __future__ import annotations

import torch

from playground.runtime import decode_decisions, kernels, native_gemv
from playground.runtime.kernels import Candidates, Choice

# Rows of these lengths, as GPT-2's blocks have them (768 columns, and 3072 for the MLP's second product).
SHAPES = ((3072, 768), (768, 3072))
NAMES = {4: "four_rows", 1: "one_row"}
ROWS = {name: rows for rows, name in NAMES.items()}


def weight_streams() -> Choice | None:
    """Decide (or read the decision made on this machine) and set it in the compiled libraries. None where
    the compiled kernel is not built here or nothing is measured (PLAYGROUND_ACCEL=off): the build's
    default, four rows, stays."""
    if not kernels.measuring_enabled() or not native_gemv.available():
        return None

    def candidates() -> Candidates:
        gen, weights = torch.Generator().manual_seed(0), []
        for shape in SHAPES:
            x = torch.randn(1, shape[1], generator=gen)
            n = decode_decisions.copies(shape, torch.float32, 8)
            weights += [(x, w) for w in decode_decisions.matrices(shape, torch.float32, n, in_out=False)]

        def reading(rows: int):
            def one_pass():
                native_gemv.set_rows_at_once(rows)
                for inp, w in weights:
                    native_gemv.linear(inp, w, None, 0)

            return one_pass

        return {NAMES[rows]: reading(rows) for rows in native_gemv.ROWS_AT_ONCE}

    choice = kernels.choose(
        ("weight streams",),
        "weight rows a thread reads at once (one-row products)",
        candidates,
        label=("streams", {}),
    )
    native_gemv.set_rows_at_once(ROWS[choice.winner])
    return choice
