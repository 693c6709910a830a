"""Benchmarks that print ratios against peers: ``python -m bench`` (``--quick`` for a short run).

decode.py    tokens/s at batch 1 for GPT-2 small: this project, Hugging Face ``transformers``, the
             tutorial loop that re-runs the whole sequence, and the memory-bandwidth limit
ct2.py       CTranslate2 as a peer (float32, int8), converted by its own converter
llamacpp.py  llama.cpp as a peer (f32, f16, q8_0 GGUF), optional: a source build of llama-cpp-python
onnx_peer.py ONNX Runtime as a peer: a KV-cache step exported by torch.onnx, float32 and dynamic int8
memory.py    time to first token and peak memory for a 1024-token prompt (run in a subprocess)
serving.py   cold start of ``python app.py`` and concurrent users through the app's API
report.py    the table, the docs' blocks, and results/latest.json
checks.py    the targets a run is checked against, and the precision classes
inside.py    the Inside views' times, FLOPs (view_flops.py) and share of this machine's matmul rate
browser/     the app in headless Chromium: Generate runs, Stop, and the Inside views click to drawn
room.py      ``--room``: N learners at once (gradio_client sessions and a Chromium page) on one app
room_learners.py  one learner of the room: a gradio_client session, a bare HTTP stream, the Chromium page
room_figures.py   the room's figures from what its learners measured: percentiles, the table, the targets
room_llama.py  llama.cpp's llama-server with -np N as the room's peer: its build, GGUF files, clients
room_profile.py   where a room's server time goes: py-spy samples, the loop alone, its shared steps by phase
room_floor.py     the framework's own floor for a room (tokens at no cost), and beside the loop's process
room_spread.py    a room whose learners ask over a few seconds, as a class clicks
"""
