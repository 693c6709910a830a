"""A new session's copy of every component's config, made when something reads it instead of when it opens.

Gradio 6 gives each session a ``SessionState`` whose ``__init__`` builds the config of every block of the
app (``config_for_block``: props, API info, example inputs) and keeps it, so that a deep link can save the
session's page later. This app has nearly five hundred blocks: each new session (a page opening, an API
client's first call) spent about 60 ms of the event loop's time and kept about 0.7 MiB on that copy, and
thirty pages opening at once stalled every stream in the room for nearly two seconds (docs/benchmarks.md). The app
has no deep-link button, and Gradio reads the whole copy only there (``SessionState.components``).

``install(demo)`` makes the sessions of that one app (``demo``, no other Blocks) start with an empty copy;
a block's config is made the first time Gradio reads or updates it, and ``components`` fills in the rest,
in the blocks' order, before a deep link reads them. What any reader gets is what the eager copy holds.
"""

from __future__ import annotations

import os
from copy import copy

import gradio as gr
from gradio import blocks, route_utils, state_holder

_GRADIOS = state_holder.SessionState


class SessionState(_GRADIOS):
    """Gradio's ``SessionState``; for an app ``install`` marked, its per-block configs made on demand."""

    def __init__(self, blocks: gr.Blocks):
        if not getattr(blocks, "pg_lazy_session_configs", False):
            super().__init__(blocks)
            return
        # Gradio's __init__ less the loop over every block (tests/app/test_session_configs.py holds the two
        # to the same attributes, so a Gradio that adds one fails there rather than here)
        self.blocks_config = copy(blocks.default_config)
        self.pg_block_ids = [k for k in self.blocks_config.blocks if k in blocks.blocks]
        self.config_values = {}
        self.state_data = {}
        self._state_ttl = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST", None) else 3600

    @property
    def components(self):
        ids = getattr(self, "pg_block_ids", None)
        if ids is not None:
            made = self.config_values
            configs = {k: made[k] if k in made else self._config(k) for k in ids}
            configs.update((k, v) for k, v in made.items() if k not in configs)
            self.config_values = configs
        return super().components

    def _config(self, key: int) -> dict:
        return self.blocks_config.config_for_block(key, [], self.blocks_config.blocks[key])


def install(demo: gr.Blocks) -> None:
    """New sessions of ``demo`` make each block's config when it is first read, not all of them at once."""
    demo.pg_lazy_session_configs = True  # type: ignore[attr-defined]
    # where Gradio builds sessions: the state holder, a request without a session hash, a call without a state;
    # other apps' sessions stay Gradio's own
    for module in (state_holder, route_utils, blocks):
        module.SessionState = SessionState  # type: ignore[misc]
