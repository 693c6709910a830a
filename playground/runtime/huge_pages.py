"""One anonymous mapping on 2 MB pages for tensors a decode step streams every token (the weights).

A one-row decode step reads every weight once per token, front to back. On 4 KB pages that is a TLB
miss every 4 KB (GPT-2 small float32: about 120,000 a token) and the hardware prefetchers stop at
every page boundary; on 2 MB pages both happen 512 times less often. torch's allocator gives large
tensors 4 KB pages (transparent huge pages are opt-in per mapping on most distributions), so
``empty_like_all`` makes one mapping advised MADV_HUGEPAGE before its first touch and returns
empty views of it that share its lifetime (the mapping is freed with the last view), for the caller to
copy into one at a time (so that the old storage of each can go before the next is copied).

Where the OS has no such advice (not Linux, THP off) the mapping has ordinary pages: the values are
the same and only the speed differs; ``empty_like_all`` returns None only where Python cannot map
memory this way, and callers keep their tensors.
"""

from __future__ import annotations

import mmap

import torch

PAGE = 2 * 2**20
ALIGN = 64  # each tensor on a cache line, as torch's own allocator places them


def huge_pages_advisable() -> bool:
    """Whether this Python can ask the OS for 2 MB pages on a mapping (Linux with madvise)."""
    return hasattr(mmap.mmap, "madvise") and hasattr(mmap, "MADV_HUGEPAGE")


def empty_like_all(tensors: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """Uninitialised contiguous tensors of ``tensors``' dtypes and shapes, all in one mapping on 2 MB
    pages where the OS gives them; None where no anonymous mapping can be made (the caller keeps its own)."""
    if not hasattr(mmap, "MAP_ANONYMOUS") or not tensors:
        return None
    offsets, end = [], 0
    for t in tensors:
        offsets.append(end)
        end += -(-t.nbytes // ALIGN) * ALIGN
    size = end + PAGE  # room to start the first tensor on a 2 MB boundary
    try:
        area = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):
        return None
    whole = torch.frombuffer(area, dtype=torch.uint8)  # holds the mapping while any view of it lives
    start = -whole.data_ptr() % PAGE
    if huge_pages_advisable():
        try:  # before the first touch: the faults that follow are then served with 2 MB pages
            area.madvise(mmap.MADV_HUGEPAGE, start, size - start - (size - start) % PAGE)
        except OSError:
            pass  # THP switched off: ordinary pages
    return [whole[start + o : start + o + t.nbytes].view(t.dtype).view(t.shape) for t, o in zip(tensors, offsets)]
