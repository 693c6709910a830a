"""``python -m playground.training`` as one torchrun worker, recording what this rank wrote.

tests/integration/test_distributed.py launches it with
``torchrun --nproc_per_node=2 tests/integration/ddp_worker.py ...``;
each rank leaves ``rank<N>.json`` in ``$PG_DDP_RECORD``: its exit code, every file it opened for
writing (safetensors files included) and everything it printed.
"""

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import playground.engine.weights as weights_module
import playground.training.optimizer_state as optimizer_state_module
from playground.training.cli import main

writes: list[str] = []
_save_file = weights_module.save_file
_path_open = Path.open


def _spy_save_file(tensors, filename, metadata=None):
    writes.append(str(filename))
    return _save_file(tensors, filename, metadata=metadata)


def _spy_open(self, mode="r", *args, **kwargs):
    if any(c in mode for c in "wax+"):
        writes.append(str(self))
    return _path_open(self, mode, *args, **kwargs)


weights_module.save_file = optimizer_state_module.save_file = _spy_save_file
Path.open = _spy_open

printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    code = main(sys.argv[1:])
Path.open = _path_open
record = {"rc": code, "writes": writes, "stdout": printed.getvalue()}
(Path(os.environ["PG_DDP_RECORD"]) / f"rank{os.environ['RANK']}.json").write_text(json.dumps(record))
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)  # as python -m playground.training does under torchrun: no interpreter teardown
