"""What a page's first preferences cost the server: ``python -m bench.page_redraws [--pages 16]``.

A page opening sends its language and presenter mode once its session is made, and every tab's redraw
runs after them (``ui.prefs``). Here, in this process and without a browser or HTTP: the app is built, and
for each page a fresh Gradio session loads (``load_session``) and sends its preferences (English, as most
pages do), then the events chained after them run through Gradio's own ``process_api``, their inputs the
values the page would send. Prints how many server events that chain is and the process's CPU time for
them a page (the first page left out: it draws what later pages share). A browser's page also pays, for
each event, its queue request and the messages that answer it, which this leaves out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time


def _chain(demo, config) -> tuple[int, list[int]]:
    """(the preferences' event, the server events chained after it) of the built app."""
    named = {demo.fns[d["id"]].name: d["id"] for d in config["dependencies"]}
    chain = [named["apply_prefs"]]
    for d in config["dependencies"]:
        if d.get("trigger_after") in chain:
            chain.append(d["id"])
    return chain[0], [i for i in chain[1:] if demo.fns[i].fn is not None]


async def _pages(demo, n: int) -> list[float]:
    import gradio as gr
    from gradio.state_holder import SessionState
    from starlette.requests import Request

    config = demo.get_config_file()
    props = {c["id"]: c.get("props", {}) for c in config["components"]}
    load = next(d["id"] for d in config["dependencies"] if demo.fns[d["id"]].name == "load_session")
    prefs_event, redraws = _chain(demo, config)
    print(f"server events after the preferences: {len(redraws)}")
    scope = {
        "type": "http",
        "headers": [(b"accept-language", b"en")],
        "query_string": b"",
        "path": "/",
        "method": "GET",
    }
    times = []
    for page in range(n + 1):
        send = _session(demo, props, gr.Request(request=Request(scope), session_hash=f"page-{page}"), SessionState)
        await send(load)
        await send(prefs_event, first='{"lang": "en", "present": false}')
        start = time.process_time()
        for fn_id in redraws:
            await send(fn_id)
        times.append(time.process_time() - start)
    return times[1:]


def _session(demo, props, request, session_state):
    """``send(fn_id, first=None)``: one event of a new session, its inputs what the page shows (``first``
    in place of the first), its answer then shown and returned (each output's, by its ``elem_id``)."""
    state, shown = session_state(demo), {}

    async def send(fn_id, first=None):
        block_fn = demo.fns[fn_id]
        payload = [shown.get(b._id, props[b._id].get("value")) for b in block_fn.inputs]
        if first is not None:
            payload[0] = first
        answer = await demo.process_api(
            block_fn, payload, state=state, request=request, session_hash=request.session_hash
        )
        for block, value in zip(block_fn.outputs, answer["data"]):
            if not (isinstance(value, dict) and value.get("__type__") == "update"):
                shown[block._id] = value
            elif "value" in value:
                shown[block._id] = value["value"]
        return {b.elem_id: v for b, v in zip(block_fn.outputs, answer["data"]) if b.elem_id}

    return send


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=16)
    args = parser.parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from playground.ui.app import build_demo

    times = asyncio.run(_pages(build_demo(), args.pages))
    ms = sorted(t * 1000 for t in times)
    print(
        f"the redraws of a page's first preferences: median {statistics.median(ms):.1f} ms of CPU, "
        f"{ms[0]:.1f}-{ms[-1]:.1f} ms over {len(ms)} pages"
    )


if __name__ == "__main__":
    main()
