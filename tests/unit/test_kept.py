"""The UI's small per-page and per-session values (ui.kept): bounded, the oldest out first, nothing kept without
an owner; what ``redraw.note`` and the Inside tab's finished long views keep."""

import threading

from playground.ui.kept import Kept


def test_the_oldest_put_goes_first_and_a_put_again_counts_as_new():
    kept = Kept(limit=3)
    for owner in "abc":
        kept.put(owner, "k", owner.upper())
    kept.put("a", "k", "A2")  # a again: now the newest
    kept.put("d", "k", "D")  # one over the limit: b, the oldest, goes
    assert len(kept) == 3
    assert [kept.get(o, "k") for o in "abcd"] == ["A2", None, "C", "D"]


def test_owners_and_keys_are_apart_and_no_owner_keeps_nothing():
    kept = Kept(limit=10)
    kept.put("page 1", "step", 4)
    kept.put("page 2", "step", 7)
    kept.put("page 1", "view", "lens")
    kept.put(None, "step", 9)  # a direct Python call: no page
    assert (kept.get("page 1", "step"), kept.get("page 2", "step"), kept.get("page 1", "view")) == (4, 7, "lens")
    assert kept.get(None, "step", "none") == "none" and len(kept) == 3
    kept.forget("page 1")  # its page closed
    assert (kept.get("page 1", "step"), kept.get("page 1", "view"), kept.get("page 2", "step")) == (None, None, 7)


def test_threads_putting_at_once_keep_it_within_its_limit():
    kept = Kept(limit=50)

    def put_many(t):
        for i in range(500):
            kept.put(f"{t}-{i}", "k", i)

    threads = [threading.Thread(target=put_many, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) == 50
