"""Where the native decode step's weights live: each matrix (out, in), all on 2 MB pages once the step is chosen.

``native_decode`` reads the modules' own tensors in place. A weight stored [in, out] (the layout a plain
one-row product may have chosen) is read from an (out, in) copy while the step is checked and timed, and
takes that copy as its data if the step wins. A chosen step's tensors then move, values unchanged, into
one mapping on 2 MB pages (``runtime.huge_pages``): the step streams all of them every token, and with
4 KB pages measured slower on this project's machines (docs/benchmarks.md, issue 26).
"""

from __future__ import annotations

import torch

from playground.runtime import huge_pages

MAX_COPY_BYTES = 1024 * 2**20  # weights stored [in, out] copied (out, in) to check and time the step; above: plain


def row_copies(tensors: list[torch.Tensor | None]) -> dict[int, torch.Tensor]:
    """id(weight) -> an (out, in) contiguous copy, for each of ``tensors`` stored [in, out]."""
    with torch.no_grad():
        return {id(t): t.detach().contiguous() for t in tensors if t is not None and not t.is_contiguous()}


def _owners(tensors: list[torch.Tensor | None]) -> list[torch.Tensor]:
    """Each tensor once (a tied weight is listed twice), and only those whose storage no other listed
    tensor shares and that are its whole content: moving one of two tensors sharing memory would part them."""
    seen: dict[int, torch.Tensor] = {t.untyped_storage().data_ptr(): t for t in tensors if t is not None}
    shared = {
        t.untyped_storage().data_ptr()
        for t in tensors
        if t is not None and seen[t.untyped_storage().data_ptr()] is not t
    }
    return [
        t
        for key, t in seen.items()
        if key not in shared and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.nbytes
    ]


def to_rows(tensors: list[torch.Tensor]) -> None:
    """Each of ``tensors`` (stored [in, out]) stored (out, in) in place, one at a time: the old storage of
    each goes before the next is copied, so the move costs one tensor more, never a second model."""
    with torch.no_grad():
        for t in tensors:
            t.data = t.data.contiguous()


def to_columns(tensors: list[torch.Tensor]) -> None:
    """``to_rows`` undone: each tensor stored [in, out] again, one at a time."""
    with torch.no_grad():
        for t in tensors:
            t.data = t.data.t().contiguous().t()


def store(tensors: list[torch.Tensor | None], copies: dict[int, torch.Tensor]) -> None:
    """Each of ``tensors`` stored [in, out] takes its (out, in) copy as its data, then all move onto
    2 MB pages: the values, shapes, names and state_dict keys stay; only where they are stored changes.
    ``copies`` is emptied as they are taken, so each copy's memory goes when its tensor moves."""
    with torch.no_grad():
        for t in tensors:
            if t is not None and id(t) in copies:
                t.data = copies.pop(id(t))
        owners = _owners(tensors)
        for t, moved in zip(owners, huge_pages.empty_like_all(owners) or []):
            moved.copy_(t)
            t.data = moved  # the old storage goes now, not after every copy: the move costs one tensor more
