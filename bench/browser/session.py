"""One app server and one Chromium: the API client, opening a page, filling the inputs, waiting on the page."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from bench import serving
from tools.chromium_args import ARGS

from .app_server import AppServer
from .cases import CHROMIUM, MODELS, VIEWPORT
from .page_script import INIT_SCRIPT


class Session:
    """One app server (``python app.py`` on a free port) and one Chromium for the whole benchmark."""

    def __init__(self, run_timeout: float = 300.0, log=print):
        from playwright.sync_api import sync_playwright

        self.run_timeout = run_timeout
        self.log = log
        self.app = AppServer(timeout=120.0, log_path=Path(os.environ.get("BENCH_APP_LOG", os.devnull)))
        self.url = self.app.url
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        self.chromium_version = self.browser.version
        self._clients: dict = {}

    def ensure_app(self) -> str | None:
        """Restart ``app.py`` if it has exited (on a shared machine something may end it); returns
        a note saying so, or None."""
        code = self.app.proc.poll()
        if code is None:
            return None
        self.app.close()
        self.app = AppServer(timeout=120.0, log_path=Path(os.environ.get("BENCH_APP_LOG", os.devnull)))
        self.url = self.app.url
        self._clients.clear()
        return f"the app server had exited (code {code}); restarted it"

    def close(self):
        for closer in (lambda: self.browser.close(), lambda: self._pw.stop(), lambda: self.app.close()):
            try:
                closer()
            except Exception:
                pass

    # ---- the server side ------------------------------------------------------------------

    def wait_server_idle(self, limit_s: float = 60.0, busy_pct: float = 25.0) -> float:
        """Wait until the app process uses less than ``busy_pct`` of a core (a run abandoned by a
        closed page may still be decoding); returns the seconds waited."""
        import psutil

        t0 = time.perf_counter()
        try:
            proc = psutil.Process(self.app.proc.pid)
            while time.perf_counter() - t0 < limit_s:
                if proc.cpu_percent(interval=0.5) < busy_pct:
                    break
        except psutil.Error:
            pass
        return time.perf_counter() - t0

    def api_client(self, model: str):
        """A gradio_client session on ``model`` (its own session: built through /build_model)."""
        if model not in self._clients:
            self._clients[model] = session_client(self.url, model)
        return self._clients[model]

    def api_run(self, model: str, prompt: str, max_new: int) -> dict:
        client = self.api_client(model)
        params = serving._endpoint_parameters(client, "/generate")
        kwargs = serving._call_kwargs(
            params,
            {
                "prompt": prompt,
                "max_new_tokens": max_new,
                "greedy": True,
                "seed": 42,
                "temperature": 0.8,
                "top_k": 40,
                "top_p": 1.0,
            },
        )
        t0 = time.perf_counter()
        first = None
        n = 0
        job = client.submit(**kwargs, api_name="/generate")
        deadline = t0 + self.run_timeout
        while not job.done():  # polled, so that a server that died cannot hang the benchmark
            if first is None and job.outputs():
                first = time.perf_counter() - t0
            if time.perf_counter() > deadline or self.app.proc.poll() is not None:
                job.cancel()
                raise TimeoutError(f"/generate did not finish within {self.run_timeout:.0f} s")
            time.sleep(0.01)
        out = job.result(timeout=10)
        n = len(job.outputs())
        total = time.perf_counter() - t0
        status = (
            next((o for o in out if isinstance(o, str) and ("Done" in o or "⚠" in o)), "")
            if isinstance(out, (list, tuple))
            else ""
        )
        if "Done" not in status:
            raise RuntimeError(f"/generate did not finish: {status[:200] or str(out)[:200]}")
        return {"s": total, "first_s": first, "updates": n, "status": status[:200]}

    # ---- the page -------------------------------------------------------------------------

    def open_page(self, model: str):
        context = self.browser.new_context(viewport=VIEWPORT, locale="en-US")
        context.add_init_script(INIT_SCRIPT)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(self.url)
        page.get_by_text("parameters", exact=False).first.wait_for(timeout=60_000)
        if "preset" in MODELS[model]:
            self._build_in_page(page, MODELS[model])
        page.get_by_role("tab", name="Generate").click()
        page.locator("#pg-generate").wait_for(state="visible", timeout=30_000)
        page.wait_for_function("() => window.__pg.watch()", timeout=30_000)
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        net = {"ids": set(), "bytes": 0, "chunks": 0}

        def on_request(ev):
            if "/queue/data" in ev.get("request", {}).get("url", ""):
                net["ids"].add(ev["requestId"])

        def on_data(ev):
            if ev["requestId"] in net["ids"]:
                net["bytes"] += ev.get("dataLength", 0)
                net["chunks"] += 1

        cdp.on("Network.requestWillBeSent", on_request)
        cdp.on("Network.dataReceived", on_data)
        return context, page, cdp, net, errors

    def _build_in_page(self, page, spec: dict):
        """Model tab: Weights "random init", the preset, Build model, wait for Ready."""
        page.get_by_role("tab", name="Model", exact=False).first.click()  # the page opens on the Lessons tab
        page.get_by_label("random init", exact=True).check()
        preset = page.get_by_label("Preset", exact=True)
        preset.click()
        t_pick = self.now_ms()
        from playground.i18n import EN

        page.get_by_role("option", name=EN.get(f"preset_{spec['preset']}", spec["preset"]), exact=True).click()
        # preset.change fills the config form: let that event complete before building.
        page.wait_for_function(
            "([t]) => window.__pg.msgs.some(m => m.t >= t && m.msg === 'process_completed')",
            arg=[t_pick],
            timeout=60_000,
            polling=100,
        )
        page.wait_for_timeout(300)
        page.locator("#pg-build").click()
        try:
            page.wait_for_function(
                "([want]) => (document.querySelector('#pg-summary')?.innerText || '').includes(want)",
                arg=[spec["summary"]],
                timeout=180_000,
                polling=250,
            )
        except Exception:
            raise RuntimeError(
                f"the page did not build {spec['preset']}: {page.locator('#pg-summary').inner_text()[:300]}"
            ) from None

    def set_inputs(self, page, prompt: str, max_new: int):
        page.fill("#pg-prompt textarea", prompt)
        box = page.locator("#pg-max-new input[type=number]")
        box.fill(str(max_new))
        box.press("Enter")
        box.press("Tab")
        page.get_by_label("Greedy", exact=False).first.check()
        got = page.evaluate(
            "() => [document.querySelector('#pg-max-new input[type=range]')?.value,"
            " document.querySelector('#pg-prompt textarea').value.length]"
        )
        if str(got[0]) != str(max_new):
            raise RuntimeError(f"max new tokens shows {got[0]}, wanted {max_new}")
        page.wait_for_timeout(200)  # let the inputs' change events settle before the click

    @staticmethod
    def now_ms() -> float:
        return time.time() * 1000.0

    def wait_state(self, page, states: tuple, t_click: float, deadline: float) -> bool:
        """Wait (in the page) until the status is in ``states`` after ``t_click``."""
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return False
        js = (
            "([states, t0]) => { window.__pg.record(); const tl = window.__pg.timeline;"
            " for (let i = tl.length - 1; i >= 0 && tl[i].t >= t0; i--) if (states.includes(tl[i].state)) return true;"
            " return false; }"
        )
        try:
            page.wait_for_function(js, arg=[list(states), t_click], timeout=remaining * 1000, polling=100)
            return True
        except Exception as e:
            if "Timeout" in type(e).__name__ or "Timeout" in str(e):
                return False
            raise

    def wait_heat(self, page, heat0, deadline: float) -> bool:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return False
        try:
            page.wait_for_function(
                "([h0]) => { const h = window.__pg.snapshot().heat; return h && h !== h0 && !h.startsWith('Generate'); }",
                arg=[heat0],
                timeout=min(remaining, 120) * 1000,
                polling=100,
            )
            return True
        except Exception as e:
            if "Timeout" in type(e).__name__ or "Timeout" in str(e):
                return False
            raise

    def wait_quiet(self, page, quiet_s: float, deadline: float):
        """Until the timeline has not changed for ``quiet_s`` (or the deadline)."""
        while time.perf_counter() < deadline:
            last = page.evaluate(
                "() => { window.__pg.record(); const tl = window.__pg.timeline;"
                " return tl.length ? tl[tl.length - 1].t : 0; }"
            )
            if self.now_ms() - last >= quiet_s * 1000:
                return
            time.sleep(0.2)

    def collect(self, page) -> dict:
        return page.evaluate(
            "() => { const p = window.__pg; p.record();"
            " return {timeline: p.timeline, longtasks: p.longtasks, msgs: p.msgs, clicks: p.clicks,"
            " errors: [p.longtask_error, p.stream_error, p.fetch_error].filter(Boolean),"
            " toasts: [...document.querySelectorAll('.toast-body')].map(t => t.textContent.trim().slice(0, 200))}; }"
        )

    def collect_or_none(self, page):
        try:
            page.set_default_timeout(30_000)
            return self.collect(page)
        except Exception:
            return None


def session_client(url: str, model: str):
    """A new gradio_client session on the app at ``url`` with ``model`` built in it (/load_session,
    then for a preset /preset_config and /build_model: random weights, seed 0, float32)."""
    client = serving._client(url)
    ready = serving._endpoint_parameters(client, "/load_session")
    if ready is not None:
        client.predict(**serving._call_kwargs(ready, {}), api_name="/load_session")
    spec = MODELS[model]
    if "preset" in spec:
        fields = client.predict(spec["preset"], api_name="/preset_config")
        params = serving._endpoint_parameters(client, "/build_model")
        names = [p["parameter_name"] for p in params]
        overrides = {"weights": "random", "seed": 0, "dtype": "float32", "upload": None}
        # the config fields follow (state), weights, seed, hub_name, upload, dtype in the signature
        field_names = names[-len(fields) + 1 :] if len(names) >= len(fields) - 1 else []
        overrides.update(dict(zip(field_names, fields[:-1])))
        out = client.predict(**serving._call_kwargs(params, overrides), api_name="/build_model")
        summary = str(out[1] if isinstance(out, (list, tuple)) and len(out) > 1 else out)
        summary = re.sub(r"<[^>]+>", "", summary)  # the header wraps n and d in spans a lesson can mask
        if spec["summary"] not in summary:
            raise RuntimeError(f"/build_model did not build {spec['preset']}: {summary[:300]}")
    return client
