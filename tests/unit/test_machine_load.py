"""Other work's share of the machine while a kernel decision is measured, and what a loaded decision gets.

``machine_load.others`` reads ``/proc/stat`` (the machine's busy time) less this process's own CPU time:
another process's work is load, this process's own threads are not. A kept decision measured under load
(``kernels.LOADED`` of the machine or more) is measured again by the next measuring call, at most
``kernels.RETRIES`` times, and the quietest measurement stands; a user's request (``decided_only``) reads
it as kept and measures nothing."""

import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from playground.runtime import kernels, machine_load

STAT = "cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n"


def test_the_stat_line_gives_busy_and_total_jiffies():
    assert machine_load.parse_stat(STAT.format(user=100, system=50, idle=800, steal=10)) == (160, 960)
    assert machine_load.parse_stat("intr 5\n") is None


def test_the_share_is_other_works_busy_time_over_the_machines(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    own = iter([1.0, 1.5])  # this process: 0.5 s of CPU in the block, 50 jiffies at 100 a second
    monkeypatch.setattr(machine_load, "own_seconds", lambda: next(own))
    monkeypatch.setattr(machine_load.os, "sysconf", lambda name: 100)
    stat.write_text(STAT.format(user=1000, system=0, idle=1000, steal=0))
    with machine_load.others(stat) as load:
        assert load.share is None  # (known once the block ends)
        # 200 jiffies passed on the machine: 130 busy, 50 of them this process's, 10 stolen by the host
        stat.write_text(STAT.format(user=1120, system=0, idle=1070, steal=10))
    assert load.share == pytest.approx((130 - 50) / 200)
    assert machine_load.share(None, None) is None
    with machine_load.others(tmp_path / "absent") as unknown:
        pass
    assert unknown.share is None


def test_another_process_spinning_is_load_and_this_ones_own_work_is_not():
    spin = "import time\nt = time.time()\nwhile time.time() - t < 0.8: pass\n"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.1)  # (it has started)
        with machine_load.others() as other:
            time.sleep(0.5)
    finally:
        child.wait()
    t0 = time.time()
    with machine_load.others() as own:
        while time.time() - t0 < 0.5:  # this process's own work, one core of the machine
            pass
    # the spinning child took one core for the whole block: at least a fifth of any machine up to 4 cores,
    # wherever else the machine is busy; this process's core is not counted, whatever the rest does
    assert other.share is not None and other.share >= 0.2
    assert own.share is not None and own.share <= other.share + 0.1


@contextmanager
def shares(values):
    """``machine_load.others`` reporting ``values`` in turn (the load while each decision is measured)."""
    it = iter(values)

    @contextmanager
    def others():
        measured = machine_load.Measured()
        yield measured
        measured.share = next(it)

    yield others


def test_a_decision_measured_under_load_is_measured_again_and_the_quietest_stands(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_ACCEL", "on")
    calls = []
    candidates = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}

    def decide():
        kernels.forget()  # (a new process: the file is what it reads)
        kernels.keep_decisions(tmp_path)
        calls.clear()
        return kernels.choose(("test decision", 1), "a test decision", candidates)

    try:
        with shares([0.6, 0.4, 0.7, 0.1]) as others:
            monkeypatch.setattr(kernels.machine_load, "others", others)
            first = decide()
            assert calls and first.others == 0.6 and first.loaded() and "60% of the machine" in first.summary()
            # a user's request reads it as kept: nothing measured
            with kernels.decided_only():
                assert decide().others == 0.6 and calls == []
            # the next measuring call, in the same process (the background timing of a shape whose build in a
            # request read it): measured again, less loaded: it stands
            second = kernels.choose(("test decision", 1), "a test decision", candidates)
            assert calls and second.others == 0.4
            third = decide()  # measured again, more loaded: the kept one stands; its third try, the last
            assert calls and third.others == 0.4
            last = decide()
            assert calls == [] and last.others == 0.4  # RETRIES: measured no more
        # a decision measured on a quiet machine is never measured again
        with shares([0.05]) as others:
            monkeypatch.setattr(kernels.machine_load, "others", others)
            candidates = {"c": lambda: calls.append("c"), "d": lambda: calls.append("d")}
            kernels.forget()
            calls.clear()
            quiet = kernels.choose(("test decision", 2), "another", candidates)
            assert calls and quiet.others == 0.05 and not quiet.loaded() and "machine" not in quiet.summary()
            kernels.forget()
            calls.clear()
            assert kernels.choose(("test decision", 2), "another", candidates).others == 0.05 and calls == []
    finally:
        kernels.stop_keeping_decisions()
        kernels.forget()
