"""The server's process puts torch's big tensors on transparent huge pages (``THP_MEM_ALLOC_ENABLE``, set by
playground/ui/serve.py before torch is imported), unless the environment says otherwise."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

# A fresh interpreter imports the server's entry module, makes a 16 MB tensor and reports the huge pages of
# the mapping that holds it (/proc/self/smaps).
PROBE = r"""
import os, re
import playground.ui.serve
import torch
t = torch.ones(16 << 20, dtype=torch.uint8)
at = t.data_ptr()
huge, inside = 0, False
for line in open("/proc/self/smaps"):
    m = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
    if m:
        inside = int(m.group(1), 16) <= at < int(m.group(2), 16)
    elif inside and line.startswith("AnonHugePages:"):
        huge = int(line.split()[1])
print(os.environ.get("THP_MEM_ALLOC_ENABLE"), huge)
"""


def _probe(**env) -> tuple[str, int]:
    run_env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"} | env
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=300, check=True
    ).stdout.split()
    return out[-2], int(out[-1])


def _mode() -> str | None:
    try:
        return re.search(r"\[(\w+)\]", THP.read_text()).group(1)
    except (OSError, AttributeError):
        return None


def test_the_server_puts_big_tensors_on_huge_pages():
    flag, huge_kb = _probe()
    assert flag == "1"
    if _mode() not in ("madvise", "always"):
        pytest.skip(f"no transparent huge pages on this machine ({THP}: {_mode()})")
    assert huge_kb >= 2048, huge_kb  # at least one 2 MB page of the 16 MB tensor


def test_the_environment_can_keep_them_off():
    flag, huge_kb = _probe(THP_MEM_ALLOC_ENABLE="0")
    assert flag == "0"
    if _mode() == "madvise":  # (with "always" the kernel gives huge pages to every mapping anyway)
        assert huge_kb == 0, huge_kb
