"""One decode step at a time across every stream this server runs (Generate and Score & compare).

Steps of different users interleave fairly, and the cores are not oversubscribed by several
forwards each asking for every core (bench/: with 4 users and no lock, the aggregate rate fell to
half of one user's).
"""

from __future__ import annotations

import threading

DECODE_LOCK = threading.Lock()
