"""What a page opening costs the server: ``python -m bench.page_loads [--pages 6]``.

The app as ``gpt-playground`` serves it and one Chromium on this machine. Each page opens in a fresh
browser context (nothing cached, as a class's laptops on their first visit) at 1600×1000 and is counted
until its tab bar shows and 3 s more (its load events and the language redraw answered). The server's
CPU over that window, less what the idle server uses over as long (measured before the pages, in the same
run), is the page's. Prints each page's figure and what it fetched (requests, bytes on the wire), and the
server's idle use; the first page pays the one-off costs (compressing the built files, drawing the
default model's views).
"""

from __future__ import annotations

import argparse
import time

import psutil

from bench.room_cpu import ServedApp, cpu_seconds, settle

SETTLE_S = 3.0


def measure(pages: int) -> dict:
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
        loads = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for _ in range(pages):
                context = browser.new_context(viewport={"width": 1600, "height": 1000})
                page = context.new_page()
                wire: list[int] = []
                page.on("requestfinished", lambda r, wire=wire: wire.append(_body_size(r)))
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
    finally:
        app.close()
    return {"idle_cores": round(idle_per_s, 4), "loads": loads, "cpus": psutil.cpu_count()}


def _body_size(request) -> int:
    try:
        return request.sizes()["responseBodySize"]
    except Exception:  # (a request that ends as its page closes)
        return 0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.page_loads", description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=6)
    args = parser.parse_args(argv)
    r = measure(max(1, args.pages))
    print(f"idle server: {r['idle_cores']:.3f} of a core (subtracted below), {r['cpus']} CPUs")
    for i, load in enumerate(r["loads"]):
        print(
            f"page {i + 1}: shown after {load['shown_s']:.2f} s, server CPU {load['server_cpu_s']:.3f} s, "
            f"{load['requests']} requests, {load['wire_kib']:,} KiB on the wire"
        )


if __name__ == "__main__":
    main()
