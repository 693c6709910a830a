"""What a page opening costs the server: ``python -m bench.page_loads [--pages 6] [--burst 30]``.

The app as ``gpt-playground`` serves it and one Chromium on this machine. Each page opens in a fresh
browser context (nothing cached, as a class's laptops on their first visit) at 1600×1000 and is counted
until its tab bar shows and 3 s more (its load events and the language redraw answered). The server's
CPU over that window, less what the idle server uses over as long (measured before the pages, in the same
run), is the page's. Prints each page's figure and what it fetched (requests, bytes on the wire), and the
server's idle use; the first page pays the one-off costs (compressing the built files, drawing the
default model's views).

``--burst N``: then a learner's 256-token run of the bundled model (gradio_client, streaming) alone, and
again while N clients fetch what the first page fetched (the page and its files, over HTTP, six connections
each, as a browser does; its events are left out) all at once, twice each, alternated: how long the run
takes, its longest wait between two updates, when the last page is done and the server's CPU. The clients
share this machine's cores with the server, as a classroom's laptops do not.
"""

from __future__ import annotations

import argparse
import threading
import time

import psutil

from bench.room_cpu import ServedApp, cpu_seconds, settle

SETTLE_S = 3.0


def measure(pages: int, burst_n: int = 0) -> dict:
    from playwright.sync_api import sync_playwright

    from bench.browser.cases import CHROMIUM
    from tools.chromium_args import ARGS

    app = ServedApp(timeout=240.0)
    try:
        proc = psutil.Process(app.proc.pid)
        settle(proc)
        c0, t0 = cpu_seconds(proc), time.perf_counter()
        time.sleep(10.0)
        idle_per_s = (cpu_seconds(proc) - c0) / (time.perf_counter() - t0)
        loads: list[dict] = []
        fetched: list[str] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for _ in range(pages):
                context = browser.new_context(viewport={"width": 1600, "height": 1000})
                page = context.new_page()
                wire: list[int] = []
                page.on("requestfinished", lambda r, wire=wire: wire.append(_body_size(r)))
                if not loads:
                    page.on("request", lambda r: fetched.append(r.url) if r.resource_type in FILES else None)
                c0, t0 = cpu_seconds(proc), time.perf_counter()
                page.goto(app.url)
                page.locator("button[role=tab][data-tab-id=generate]").wait_for(timeout=120_000)
                shown = time.perf_counter() - t0
                time.sleep(SETTLE_S)
                wall = time.perf_counter() - t0
                used = cpu_seconds(proc) - c0
                loads.append(
                    {
                        "shown_s": round(shown, 2),
                        "server_cpu_s": round(used - idle_per_s * wall, 3),
                        "requests": len(wire),
                        "wire_kib": round(sum(wire) / 1024),
                    }
                )
                context.close()
            browser.close()
        paths = [url.removeprefix(app.url.rstrip("/")) for url in fetched]
        bursts = []
        if burst_n:
            burst(app.url, proc, [], 0)  # (the learner's first run, not counted)
            bursts = [burst(app.url, proc, paths if k % 2 else [], burst_n) for k in range(4)]
    finally:
        app.close()
    return {"idle_cores": round(idle_per_s, 4), "loads": loads, "bursts": bursts, "cpus": psutil.cpu_count()}


FILES = ("document", "script", "stylesheet", "font")
HEADERS = {"accept-encoding": "gzip, deflate, br, zstd", "user-agent": "Mozilla/5.0 Chrome/140"}


def burst(url: str, proc, paths: list[str], n: int) -> dict:
    """A learner's run, with ``n`` clients fetching ``paths`` meanwhile (none when ``paths`` is empty)."""
    import httpx
    from gradio_client import Client

    from bench.room_learners import StampedList
    from bench.serving import _call_kwargs

    client = Client(url, verbose=False)
    params = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/generate"]["parameters"]
    kwargs = _call_kwargs(params, {"max_new_tokens": 256, "seed": 1})

    def fetch_all():
        with httpx.Client(timeout=120, headers=HEADERS, limits=httpx.Limits(max_connections=6)) as c:
            for path in paths:
                c.get(url.rstrip("/") + path).read()

    clients = [threading.Thread(target=fetch_all, daemon=True) for _ in range(n if paths else 0)]
    c0, t0 = cpu_seconds(proc), time.time()
    for t in clients:
        t.start()
    job = client.submit(**kwargs, api_name="/generate")
    with job.communicator.lock:
        stamped = StampedList(job.communicator.job.outputs)
        job.communicator.job.outputs = stamped
    job.result(timeout=300)
    ran = time.time() - t0
    times = [t for t in stamped.times if t >= t0]
    for t in clients:
        t.join(timeout=300)
    return {
        "pages": len(clients),
        "run_s": round(ran, 2),
        "longest_wait_s": round(max(b - a for a, b in zip([t0, *times], times)), 2),
        "pages_done_s": round(time.time() - t0, 2),
        "server_cpu_s": round(cpu_seconds(proc) - c0, 2),
    }


def _body_size(request) -> int:
    try:
        return request.sizes()["responseBodySize"]
    except Exception:  # (a request that ends as its page closes)
        return 0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.page_loads", description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--burst", type=int, default=0, help="clients fetching the page at once beside a run")
    args = parser.parse_args(argv)
    r = measure(max(1, args.pages), max(0, args.burst))
    print(f"idle server: {r['idle_cores']:.3f} of a core (subtracted below), {r['cpus']} CPUs")
    for i, load in enumerate(r["loads"]):
        print(
            f"page {i + 1}: shown after {load['shown_s']:.2f} s, server CPU {load['server_cpu_s']:.3f} s, "
            f"{load['requests']} requests, {load['wire_kib']:,} KiB on the wire"
        )
    for b in r["bursts"]:
        print(
            f"a 256-token run {'with ' + str(b['pages']) + ' pages fetched' if b['pages'] else 'alone'}: "
            f"{b['run_s']:.2f} s, its longest wait {b['longest_wait_s']:.2f} s; all done after "
            f"{b['pages_done_s']:.2f} s, server CPU {b['server_cpu_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
