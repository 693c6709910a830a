"""``python -m bench --browser``: the core loop as a learner meets it, in headless Chromium (issue 9).

The app is started as ``python -m bench.browser --serve`` (what app.py does, under another name).

For each model (the bundled one the page loads with, and GPT-2-small-shaped random weights built
through the page's Model tab) × max new tokens × prompt (short, and a 300-word English paragraph),
one greedy run is timed twice, back to back on the same server: in the browser (click Generate →
first chip visible → run finished) and through ``gradio_client`` (``/generate``, no browser). Also
measured in the page: the main thread's long tasks (PerformanceObserver ``longtask``), the bytes of
every streamed update on the SSE stream ``/gradio_api/queue/data``, how long Stop takes to take
effect, and how long a change of attention view takes to redraw the heatmap.

Timestamps are taken inside the page (a MutationObserver on the chips, the status and the heatmap
records ``performance.timeOrigin + performance.now()`` of every change), so a busy main thread
delays what is recorded exactly as it delays what the learner sees. Each run gets a fresh page
(a fresh Gradio session), so a run that timed out cannot slow the next one down.

Selectors follow the new chips/status contract (``#pg-chips .pg-chip[data-step]``,
``#pg-status [data-state][data-tokens]``) and fall back to the old UI (a HighlightedText whose
generated labels contain "%", a status text "Done: N tokens" / "... stopped by you").
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import serving

CHROMIUM = os.environ.get("PLAYGROUND_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
VIEWPORT = {"width": 1600, "height": 1000}

MODELS = {
    "bundled": {"label": "bundled (Tiny Shakespeare, 3.5M)"},
    "gpt2-small": {
        "label": "GPT-2 small shape, random init (124M)",
        "preset": "gpt2-small",
        "summary": "12 layers × 12 heads, d=768",
    },
}
SHORT_PROMPT = "ROMEO:\n"

# Targets of issue 9.
RATIO_TARGET = 1.3  # browser time / API time for the same run
LONGTASK_TARGET_S = 0.2  # the page's main thread is never busy longer than this at a time
STOP_TARGET_S = 0.5  # click Stop -> no new chips and the status says stopped
UPDATE_GROWTH_TARGET = 1.5  # largest streamed update of the longest run / of the shortest run


def long_prompt(n_words: int = 300, seed: int = 9) -> str:
    """A fixed, procedurally generated English paragraph of ``n_words`` words (not Shakespeare)."""
    rng = random.Random(seed)
    subjects = [
        "the engineer",
        "a small team",
        "the new library",
        "our visitor",
        "the old bridge",
        "every student",
        "the committee",
        "a quiet neighbour",
        "the morning train",
        "the city council",
        "my sister",
        "the research group",
    ]
    verbs = [
        "reviewed",
        "described",
        "repaired",
        "questioned",
        "measured",
        "painted",
        "explained",
        "opened",
        "carried",
        "followed",
        "planned",
        "improved",
    ]
    objects = [
        "the long report",
        "a careful plan",
        "the broken window",
        "several maps",
        "the spring garden",
        "a box of letters",
        "the weekly budget",
        "the village road",
        "an unusual idea",
        "the museum hall",
        "the harbour lights",
        "a simple question",
    ]
    tails = [
        "before the rain began",
        "after a long discussion",
        "with great patience",
        "without any help",
        "during the summer holidays",
        "because nobody else would",
        "in the early evening",
        "while the others waited outside",
        "for the first time in years",
        "as the clock struck nine",
    ]
    words: list[str] = []
    while len(words) < n_words:
        sentence = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} {rng.choice(tails)}"
        if rng.random() < 0.4:
            sentence += f", and {rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
        words.extend((sentence[0].upper() + sentence[1:] + ".").split())
    text = " ".join(words[:n_words])
    return text if text.endswith(".") else text.rstrip(",") + "."


# Installed before any page script runs: long tasks, the SSE messages, clicks, and (once the app
# has rendered) a MutationObserver timeline of chip count, run state and heatmap title.
INIT_SCRIPT = r"""
(() => {
  const now = () => performance.timeOrigin + performance.now();
  const pg = window.__pg = {longtasks: [], msgs: [], clicks: [], timeline: [], chunks: 0};
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) pg.longtasks.push({start: performance.timeOrigin + e.startTime, dur: e.duration});
    }).observe({type: 'longtask', buffered: true});
  } catch (e) { pg.longtask_error = String(e); }
  // The SSE stream: Gradio's client reads /queue/data with fetch(); tee the body and size each message.
  const origFetch = window.fetch;
  window.fetch = async function(input, init) {
    const resp = await origFetch.apply(this, arguments);
    try {
      const url = typeof input === 'string' ? input : (input && input.url) || String(input);
      const type = resp.headers.get('content-type') || '';
      if (url.includes('/queue/data') && type.includes('event-stream') && resp.body) {
        const [mine, theirs] = resp.body.tee();
        (async () => {
          const reader = theirs.getReader();
          const dec = new TextDecoder();
          let buf = '';
          for (;;) {
            const {value, done} = await reader.read();
            if (done) break;
            pg.chunks++;
            buf += dec.decode(value, {stream: true});
            let i;
            while ((i = buf.indexOf('\n\n')) >= 0) {
              const text = buf.slice(0, i + 2);
              buf = buf.slice(i + 2);
              const m = /"msg"\s*:\s*"([a-z_]+)"/.exec(text.slice(0, 200));
              pg.msgs.push({t: now(), bytes: new TextEncoder().encode(text).length, msg: m ? m[1] : null});
            }
          }
        })().catch(e => { pg.stream_error = String(e); });
        return new Response(mine, {status: resp.status, statusText: resp.statusText, headers: resp.headers});
      }
    } catch (e) { pg.fetch_error = String(e); }
    return resp;
  };
  document.addEventListener('click', ev => {
    const el = ev.target && ev.target.closest && ev.target.closest('#pg-generate, #pg-stop');
    if (el) pg.clicks.push({id: el.id, t: now()});
  }, true);

  function chipCount() {
    const root = document.querySelector('#pg-chips');
    if (!root) return 0;
    if (root.querySelector('.pg-chip')) return root.querySelectorAll('.pg-chip[data-step]').length;
    let n = 0;
    for (const el of root.querySelectorAll('.category-label, .label')) if (el.textContent.includes('%')) n++;
    return n;
  }
  function statusInfo() {
    const root = document.querySelector('#pg-status');
    if (!root) return {state: null, tokens: null};
    const el = root.matches('[data-state]') ? root : root.querySelector('[data-state]');
    if (el) {
      const t = el.getAttribute('data-tokens');
      return {state: el.getAttribute('data-state'), tokens: t == null ? null : Number(t)};
    }
    const text = root.textContent || '';
    const m = /(\d[\d,]*) tokens?/.exec(text);
    const tokens = m ? Number(m[1].replace(/,/g, '')) : null;
    let state = null;
    if (/stopped by you/.test(text)) state = 'stopped';
    else if (/Done:/.test(text)) state = 'done';
    else if (/Generating:/.test(text)) state = 'running';
    else if (/⚠|Something went wrong/.test(text)) state = 'error';
    return {state, tokens};
  }
  function heatTitle() {
    const gd = document.querySelector('#pg-heatmap .js-plotly-plot');
    if (!gd || !gd.layout) return null;
    const t = gd.layout.title;
    const title = t == null ? '' : (typeof t === 'string' ? t : (t.text || ''));
    return title + ' |' + ((gd.data && gd.data.length) || 0);
  }
  pg.snapshot = () => Object.assign({chips: chipCount(), heat: heatTitle()}, statusInfo());
  let last = '';
  function record() {
    const s = pg.snapshot();
    const key = JSON.stringify(s);
    if (key !== last) { last = key; s.t = now(); pg.timeline.push(s); }
  }
  pg.record = record;
  const find = () => ['#pg-chips', '#pg-status', '#pg-heatmap'].map(s => document.querySelector(s));
  function observe(targets) {
    if (pg.observer) pg.observer.disconnect();
    pg.observer = new MutationObserver(record);
    for (const t of targets) pg.observer.observe(t, {childList: true, subtree: true, characterData: true, attributes: true});
    pg.targets = targets;
  }
  pg.watch = () => {
    if (pg.observer) return true;
    const targets = find();
    if (targets.some(t => !t)) return false;
    observe(targets);
    record();
    // A UI that replaces the observed elements themselves would leave the observer on detached
    // nodes: re-attach, and record a change the observer missed (at most 250 ms late).
    setInterval(() => {
      if (pg.targets.some(t => !t.isConnected)) {
        const fresh = find();
        if (!fresh.some(t => !t)) { observe(fresh); pg.reattached = (pg.reattached || 0) + 1; }
      }
      record();
    }, 250);
    return true;
  };
})();
"""


class AppServer(serving.App):
    """The app as ``python app.py`` builds and launches it, but started as ``python -m bench.browser
    --serve``: on a shared machine, other people's clean-ups that end processes named ``app.py``
    then leave the benchmark's server alone."""

    def __init__(self, timeout: float = 120.0, log_path: Path | None = None):
        import subprocess
        import sys

        self.port = serving.free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = {
            **os.environ,
            "GRADIO_SERVER_PORT": str(self.port),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
        }
        self.log_path = log_path or Path(os.devnull)
        self._log = open(self.log_path, "a")
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.browser", "--serve"],
            cwd=serving.ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.page_s = None
        deadline = self.t_spawn + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited with code {self.proc.returncode} before serving the page")
            if serving._http_ok(self.url):
                self.page_s = time.perf_counter() - self.t_spawn
                return
            time.sleep(0.05)
        self.close()
        raise TimeoutError(f"the app did not serve {self.url} within {timeout:.0f} s")


def serve() -> None:
    """What ``app.py`` does: build the demo and launch it (port from GRADIO_SERVER_PORT)."""
    from playground.ui.app import build_demo, launch_kwargs, warm_up

    demo = build_demo()
    warm_up()
    demo.launch(**launch_kwargs())


@dataclass
class RunResult:
    model: str
    prompt: str  # "short" | "300 words"
    max_new: int
    api_s: float | None = None
    api_first_s: float | None = None
    api_updates: int | None = None
    api_error: str | None = None
    browser_s: float | None = None
    first_chip_s: float | None = None
    heatmap_s: float | None = None
    timed_out_s: float | None = None
    chips_at_end: int | None = None
    status_tokens: int | None = None
    longest_task_s: float | None = None
    long_task_total_s: float | None = None
    long_tasks: int | None = None
    updates: int | None = None
    update_bytes_median: float | None = None
    update_bytes_max: int | None = None
    update_bytes_last: int | None = None
    final_bytes: int | None = None
    first_update_bytes: int | None = None
    done_s: float | None = None  # status done with every chip (browser_s also waits for the heatmap)
    total_bytes: int | None = None
    cdp_bytes: int | None = None
    view_switch_s: float | None = None
    view_switch_longest_task_s: float | None = None
    error: str | None = None
    notes: list = field(default_factory=list)

    @property
    def ratio(self):
        if self.browser_s is None or not self.api_s:
            return None
        return self.browser_s / self.api_s


class Bench:
    """One app server (``python app.py`` on a free port) and one Chromium for the whole benchmark."""

    def __init__(self, run_timeout: float = 300.0, log=print):
        from playwright.sync_api import sync_playwright

        self.run_timeout = run_timeout
        self.log = log
        self.app = AppServer(timeout=120.0, log_path=Path(os.environ.get("BENCH_APP_LOG", os.devnull)))
        self.url = self.app.url
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
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
        if model in self._clients:
            return self._clients[model]
        client = serving._client(self.url)
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
            if spec["summary"] not in summary:
                raise RuntimeError(f"/build_model did not build {spec['preset']}: {summary[:300]}")
        self._clients[model] = client
        return client

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
        page.get_by_label("random init", exact=True).check()
        preset = page.get_by_label("Preset", exact=True)
        preset.click()
        t_pick = self._now_ms()
        page.get_by_role("option", name=spec["preset"], exact=True).click()
        # preset.change fills the config form: let that event complete before building.
        page.wait_for_function(
            "([t]) => window.__pg.msgs.some(m => m.t >= t && m.msg === 'process_completed')",
            arg=[t_pick],
            timeout=60_000,
            polling=100,
        )
        page.wait_for_timeout(300)
        for _ in range(3):
            page.get_by_role("button", name="Build model", exact=True).click()
            page.get_by_text("Ready:", exact=False).first.wait_for(timeout=180_000)
            if spec["summary"] in page.locator("#pg-summary").inner_text():
                return
            page.wait_for_timeout(1000)
        raise RuntimeError(f"the page did not build {spec['preset']}: {page.locator('#pg-summary').inner_text()[:300]}")

    def _set_inputs(self, page, prompt: str, max_new: int):
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
    def _now_ms() -> float:
        return time.time() * 1000.0

    def _wait_state(self, page, states: tuple, t_click: float, deadline: float) -> bool:
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

    def _wait_heat(self, page, heat0, deadline: float) -> bool:
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

    def _wait_quiet(self, page, quiet_s: float, deadline: float):
        """Until the timeline has not changed for ``quiet_s`` (or the deadline)."""
        while time.perf_counter() < deadline:
            last = page.evaluate(
                "() => { window.__pg.record(); const tl = window.__pg.timeline;"
                " return tl.length ? tl[tl.length - 1].t : 0; }"
            )
            if self._now_ms() - last >= quiet_s * 1000:
                return
            time.sleep(0.2)

    def _collect(self, page) -> dict:
        return page.evaluate(
            "() => { const p = window.__pg; p.record();"
            " return {timeline: p.timeline, longtasks: p.longtasks, msgs: p.msgs, clicks: p.clicks,"
            " errors: [p.longtask_error, p.stream_error, p.fetch_error].filter(Boolean),"
            " toasts: [...document.querySelectorAll('.toast-body')].map(t => t.textContent.trim().slice(0, 200))}; }"
        )

    def browser_run(self, model: str, prompt: str, max_new: int, r: RunResult, view_switch: bool = True):
        context, page, cdp, net, errors = self.open_page(model)
        try:
            self._generate_in(page, net, errors, prompt, max_new, r, view_switch)
        finally:
            context.close()

    def first_runs(self, model: str, prompt: str, max_new: int) -> dict:
        """A page's first run against its later ones: a fresh page's first Generate, a second in the
        same page, and the first in another fresh page, each click -> run drawn (heatmap included)."""
        runs = {}
        context, page, cdp, net, errors = self.open_page(model)
        try:
            # The second run has another prompt, so that its heatmap is a new one to wait for.
            for name, text in (("fresh page, first run", prompt), ("same page, second run", "JULIET:\n")):
                r = RunResult(model=model, prompt="short", max_new=max_new)
                self._generate_in(page, net, errors, text, max_new, r, view_switch=False)
                runs[name] = self._first_run_figures(r)
                self.wait_server_idle()
        finally:
            context.close()
        r = RunResult(model=model, prompt="short", max_new=max_new)
        self.browser_run(model, prompt, max_new, r, view_switch=False)
        runs["another fresh page, first run"] = self._first_run_figures(r)
        return runs

    @staticmethod
    def _first_run_figures(r: RunResult) -> dict:
        """Where a run's time went: its first chip, the status saying done, the heatmap drawn."""
        return {
            "drawn_s": r.browser_s,
            "first_chip_s": r.first_chip_s,
            "done_s": r.done_s,
            "heatmap_s": r.heatmap_s,
            "longest_task_s": r.longest_task_s,
            "long_task_total_s": r.long_task_total_s,
        }

    def _generate_in(self, page, net, errors, prompt: str, max_new: int, r: RunResult, view_switch: bool):
        """One timed Generate in an open page (``r`` receives the figures)."""
        self._set_inputs(page, prompt, max_new)
        t_issue = self._now_ms()
        page.click("#pg-generate")
        deadline = time.perf_counter() + self.run_timeout
        heat0 = page.evaluate("() => window.__pg.snapshot().heat")
        finished = self._wait_state(page, ("done", "stopped", "error"), t_issue, deadline)
        if finished:  # the final update also carries the attention heatmap: wait for it to be drawn
            finished = self._wait_heat(page, heat0, deadline)
        if not finished:
            r.timed_out_s = self.run_timeout
        data = self._collect(page) if finished else self._collect_or_none(page)
        t_end_ms = self._now_ms()
        if data is None:
            r.notes.append("the page did not answer after the timeout")
            return
        clicks = [c["t"] for c in data["clicks"] if c["id"] == "pg-generate" and c["t"] >= t_issue - 5]
        t0 = clicks[0] if clicks else t_issue
        tl = [e for e in data["timeline"] if e["t"] >= t0]
        first = next((e for e in tl if e["chips"] > 0), None)
        ended = [e for e in tl if e["state"] in ("done", "stopped", "error")]
        # The status can be drawn a frame before the last chips: the run is over in the page
        # when the status says so and every token it counts has its chip.
        end = next((e for e in ended if e["tokens"] is None or e["chips"] >= e["tokens"]), ended[0] if ended else None)
        r.first_chip_s = (first["t"] - t0) / 1000 if first else None
        if end is not None:
            r.browser_s = (end["t"] - t0) / 1000
            r.chips_at_end = end["chips"]
            r.status_tokens = end["tokens"]
            if end["state"] == "error":
                r.error = "the status shows an error"
        heat = next((e for e in tl if e["heat"] and e["heat"] != heat0 and not e["heat"].startswith("Generate")), None)
        r.heatmap_s = (heat["t"] - t0) / 1000 if heat else None
        if r.browser_s is not None and r.heatmap_s is not None:
            r.done_s = r.browser_s
            r.browser_s = max(r.browser_s, r.heatmap_s)
        t_stop = end["t"] if end else t_end_ms
        self._fill_page_figures(r, data, t0, t_stop, net)
        if errors:
            r.notes.append(f"page errors: {errors[:3]}")
        if data.get("toasts"):
            r.notes.append(f"toasts: {data['toasts'][:3]}")
        if finished and view_switch and r.error is None:
            self._view_switch(page, r)

    def _collect_or_none(self, page):
        try:
            page.set_default_timeout(30_000)
            return self._collect(page)
        except Exception:
            return None

    @staticmethod
    def _fill_page_figures(r: RunResult, data: dict, t0: float, t1: float, net: dict):
        tasks = [lt for lt in data["longtasks"] if lt["start"] + lt["dur"] >= t0 and lt["start"] <= t1 + 1]
        r.long_tasks = len(tasks)
        r.longest_task_s = max((lt["dur"] for lt in tasks), default=0.0) / 1000
        r.long_task_total_s = sum(lt["dur"] for lt in tasks) / 1000
        msgs = [m for m in data["msgs"] if t0 <= m["t"]]
        generating = [m["bytes"] for m in msgs if m["msg"] == "process_generating"]
        completed = [m["bytes"] for m in msgs if m["msg"] == "process_completed"]
        # Gradio sends a generator's last yield twice (process_generating, then process_completed
        # with the full output): the streamed updates are the ones before that final pair.
        updates = generating[:-1] if completed else generating
        r.final_bytes = completed[-1] if completed else None
        # The first update carries the prompt's chips (it grows with the prompt, once); the bound
        # that matters is on the updates after it.
        r.first_update_bytes = updates[0] if updates else None
        updates = updates[1:]
        r.updates = len(updates)
        if updates:
            r.update_bytes_median = statistics.median(updates)
            r.update_bytes_max = max(updates)
            r.update_bytes_last = updates[-1]
        r.total_bytes = sum(m["bytes"] for m in msgs)
        r.cdp_bytes = net["bytes"]
        for e in data.get("errors", []):
            if "AbortError" not in e:  # Gradio aborts the stream when it closes it
                r.notes.append(f"instrumentation: {e}")

    def _view_switch(self, page, r: RunResult, view: str = "head average"):
        """Attention view → "head average": seconds until the heatmap's title changes."""
        before = page.evaluate("() => window.__pg.snapshot().heat") or ""
        page.locator("#pg-view input").click()
        option = page.get_by_role("option", name=view, exact=True)
        option.wait_for(timeout=10_000)
        t_issue = self._now_ms()
        option.click()
        try:
            page.wait_for_function(
                "([before]) => { const h = window.__pg.snapshot().heat; return h && h !== before && /average/.test(h); }",
                arg=[before],
                timeout=120_000,
                polling=100,
            )
        except Exception:
            r.notes.append("view switch: the heatmap did not change within 120 s")
            return
        data = self._collect(page)
        changed = next(
            (e for e in data["timeline"] if e["t"] >= t_issue and e["heat"] and "average" in e["heat"]), None
        )
        if changed:
            r.view_switch_s = (changed["t"] - t_issue) / 1000
            tasks = [
                lt["dur"]
                for lt in data["longtasks"]
                if lt["start"] + lt["dur"] >= t_issue and lt["start"] <= changed["t"]
            ]
            r.view_switch_longest_task_s = max(tasks, default=0.0) / 1000

    def stop_run(self, model: str, max_new: int = 512, after_s: float = 3.0) -> dict:
        """Start a long run, click Stop ``after_s`` after Generate, time until it takes effect."""
        context, page, cdp, net, errors = self.open_page(model)
        out = {"model": model, "max_new": max_new, "click_after_s": after_s}
        try:
            self._set_inputs(page, SHORT_PROMPT, max_new)
            box = page.locator("#pg-stop").bounding_box()
            t_gen = self._now_ms()
            page.click("#pg-generate")
            time.sleep(max(0.0, after_s - (self._now_ms() - t_gen) / 1000))
            t_issue = self._now_ms()
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            out["click_dispatch_s"] = (self._now_ms() - t_issue) / 1000  # the page acknowledged the click
            deadline = time.perf_counter() + self.run_timeout
            ended = self._wait_state(page, ("stopped", "done", "error"), t_issue, deadline)
            if not ended:
                out["timed_out_s"] = self.run_timeout
            else:
                self._wait_quiet(page, 2.0, time.perf_counter() + 30)
            data = self._collect_or_none(page)
            if data is None:
                out["note"] = "the page did not answer"
                return out
            tl = data["timeline"]
            before = [e for e in tl if e["t"] <= t_issue]
            after = [e for e in tl if e["t"] > t_issue]
            out["chips_at_click"] = before[-1]["chips"] if before else 0
            out["chips_at_end"] = tl[-1]["chips"] if tl else None
            out["status_tokens"] = tl[-1]["tokens"] if tl else None
            out["final_state"] = tl[-1]["state"] if tl else None
            chip_changes = [e["t"] for e, prev in zip(tl[1:], tl) if e["chips"] != prev["chips"] and e["t"] > t_issue]
            stopped = [e["t"] for e in after if e["state"] == "stopped"]
            clicks = [c["t"] for c in data["clicks"] if c["id"] == "pg-stop"]
            if clicks:
                out["click_handled_s"] = (clicks[0] - t_issue) / 1000
            if stopped and out["final_state"] == "stopped":
                effect = max([stopped[0]] + chip_changes)
                out["stop_s"] = (effect - t_issue) / 1000
                out["status_stopped_s"] = (stopped[0] - t_issue) / 1000
                out["last_chip_s"] = (max(chip_changes) - t_issue) / 1000 if chip_changes else 0.0
            elif not ended:
                out["stop_s"] = None
                out["note"] = f"neither stopped nor done within {self.run_timeout:.0f} s of the click"
            else:
                out["stop_s"] = None
                out["note"] = f"the run ended as {out['final_state']!r}: Stop did not take effect"
            tasks = [lt for lt in data["longtasks"] if lt["start"] + lt["dur"] >= t_gen]
            out["longest_task_s"] = max((lt["dur"] for lt in tasks), default=0.0) / 1000
            if errors:
                out["page_errors"] = errors[:3]
            if data.get("toasts"):
                out["toasts"] = data["toasts"][:3]
            return out
        finally:
            context.close()

    def profile_run(self, model: str, prompt: str, max_new: int, trace_path: Path | None) -> dict:
        """One run under a Chrome trace (devtools.timeline) and a V8 CPU profile: where the main
        thread's time goes, by trace event and by JavaScript function (self time)."""
        trace_path = Path(trace_path) if trace_path else None
        context, page, cdp, net, errors = self.open_page(model)
        try:
            self._set_inputs(page, prompt, max_new)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
            self.browser.start_tracing(
                page=page,
                categories=[
                    "devtools.timeline",
                    "disabled-by-default-devtools.timeline",
                    "v8.execute",
                    "blink.user_timing",
                ],
            )
            cdp.send("Profiler.start")
            t_issue = self._now_ms()
            page.click("#pg-generate")
            finished = self._wait_state(
                page, ("done", "stopped", "error"), t_issue, time.perf_counter() + self.run_timeout
            )
            profile = cdp.send("Profiler.stop")["profile"]
            trace = self.browser.stop_tracing()
            wall = (self._now_ms() - t_issue) / 1000
            if trace_path:
                trace_path.write_bytes(trace)
            return {
                "model": model,
                "prompt": "short" if prompt == SHORT_PROMPT else "300 words",
                "max_new": max_new,
                "finished": finished,
                "wall_s": wall,
                "trace_events": summarize_trace(trace),
                "js_self_time": summarize_profile(profile),
                "trace_file": str(trace_path) if trace_path else None,
            }
        finally:
            context.close()


def summarize_profile(profile: dict, top: int = 15) -> list[dict]:
    """Self time per JavaScript function (name, file, line) from a V8 CPU profile."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    self_us: dict[int, float] = {}
    for node_id, dt in zip(profile.get("samples", []), profile.get("timeDeltas", [])):
        self_us[node_id] = self_us.get(node_id, 0.0) + dt
    by_fn: dict[tuple, float] = {}
    for node_id, us in self_us.items():
        cf = nodes[node_id]["callFrame"]
        key = (
            cf.get("functionName") or "(anonymous)",
            os.path.basename(cf.get("url", "")),
            cf.get("lineNumber", -1) + 1,
            cf.get("columnNumber", -1) + 1,
        )
        by_fn[key] = by_fn.get(key, 0.0) + us
    total = sum(by_fn.values()) or 1.0
    rows = sorted(by_fn.items(), key=lambda kv: -kv[1])[:top]
    return [
        {"function": k[0], "file": k[1], "line": k[2], "column": k[3], "self_s": v / 1e6, "share": v / total}
        for k, v in rows
    ]


def summarize_trace(trace: bytes, top: int = 15) -> list[dict]:
    """Total duration per trace event name on the renderer's main thread (complete events)."""
    data = json.loads(trace)
    events = data["traceEvents"] if isinstance(data, dict) else data
    main = set()
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain":
            main.add((e["pid"], e["tid"]))
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    wrappers = {
        "RunTask",
        "ThreadControllerImpl::RunTask",
        "RunMicrotasks",
        "FunctionCall",
        "TimerFire",
        "v8.callFunction",
        "EventDispatch",
        "FireAnimationFrame",
        "ProfileCall",
    }
    for e in events:
        if (
            (e.get("pid"), e.get("tid")) in main
            and e.get("ph") == "X"
            and "dur" in e
            and e["name"] not in wrappers
            and not e["name"].startswith("V8.")
        ):
            totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"]
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    rows = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return [{"event": k, "total_s": v / 1e6, "count": counts[k]} for k, v in rows]


# ---- the benchmark ------------------------------------------------------------------------


def run(
    quick: bool = False,
    run_timeout: float = 300.0,
    models=None,
    tokens=None,
    prompts=None,
    stop: bool = True,
    profile: bool = False,
    trace_path: Path | None = None,
    log=print,
    checkpoint=None,
) -> dict:
    """Every run; ``checkpoint(result)`` is called after each one (partial results survive a crash)."""
    from . import report

    models = models or list(MODELS)
    tokens = tokens or ([40, 200] if quick else [40, 200, 512])
    prompt_texts = {"short": SHORT_PROMPT, "300 words": long_prompt()}
    prompts = prompts or list(prompt_texts)
    result = {
        "date": report.now(),
        "machine": report.machine(),
        "quick": quick,
        "run_timeout_s": run_timeout,
        "config": {
            "models": {m: MODELS[m]["label"] for m in models},
            "max_new_tokens": tokens,
            "prompts": {p: prompt_texts[p] for p in prompts},
            "greedy": True,
            "seed": 42,
            "viewport": VIEWPORT,
        },
        "loadavg_start": os.getloadavg(),
        "runs": [],
        "stop": [],
    }
    bench = Bench(run_timeout=run_timeout, log=log)
    result["chromium"] = bench.chromium_version
    result["app_page_s"] = bench.app.page_s
    try:
        if "bundled" in models:  # before any other run: the server has served no run to a page yet
            log("  bundled, short prompt, 200 tokens: a fresh page's first run, its second, another page's first ...")
            try:
                result["first_runs"] = bench.first_runs("bundled", SHORT_PROMPT, 200)
            except Exception as e:
                result["first_runs"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            log(
                "   "
                + ", ".join(
                    f"{k} {_s(v.get('drawn_s')) if isinstance(v, dict) else v}" for k, v in result["first_runs"].items()
                )
            )
            if checkpoint:
                checkpoint(result)
        for model in models:
            for max_new in tokens:
                for pname in prompts:
                    r = RunResult(model=model, prompt=pname, max_new=max_new)
                    restarted = bench.ensure_app()
                    if restarted:
                        r.notes.append(restarted)
                        log(f"  note: {restarted}")
                    text = prompt_texts[pname]
                    log(f"  {model}, {pname} prompt, {max_new} tokens: API ...", end="", flush=True)
                    try:
                        api = bench.api_run(model, text, max_new)
                        r.api_s, r.api_first_s, r.api_updates = api["s"], api["first_s"], api["updates"]
                    except Exception as e:
                        r.api_error = f"{type(e).__name__}: {e}"[:300]
                    log(f" {_s(r.api_s)}; browser ...", end="", flush=True)
                    try:
                        bench.browser_run(model, text, max_new, r)
                    except Exception as e:
                        r.error = f"{type(e).__name__}: {e}"[:300]
                    waited = bench.wait_server_idle()
                    if waited > 1.5:
                        r.notes.append(f"the server stayed busy for {waited:.1f} s after the page closed")
                    log(
                        " " + ("timed out" if r.timed_out_s else _s(r.browser_s)) + (f" ({r.error})" if r.error else "")
                    )
                    result["runs"].append({**r.__dict__, "ratio": r.ratio})
                    if checkpoint:
                        checkpoint(result)
            if stop:
                log(f"  {model}: Stop after 3 s of a 512-token run ...", end="", flush=True)
                restarted = bench.ensure_app()
                try:
                    s = bench.stop_run(model, 512, 3.0)
                except Exception as e:
                    s = {"model": model, "error": f"{type(e).__name__}: {e}"[:300]}
                bench.wait_server_idle()
                if restarted:
                    s["note_app"] = restarted
                log(f" {_s(s.get('stop_s'))}" + (f" ({s['note']})" if s.get("note") else ""))
                result["stop"].append(s)
                if checkpoint:
                    checkpoint(result)
        if profile:
            log(f"  profile: {models[0]}, 300-word prompt, 200 tokens (Chrome trace + V8 CPU profile) ...")
            bench.ensure_app()
            try:
                result["profile"] = bench.profile_run(models[0], prompt_texts["300 words"], 200, trace_path)
            except Exception as e:
                result["profile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    finally:
        bench.close()
    result["loadavg_end"] = os.getloadavg()
    result["targets"] = [t.__dict__ for t in targets(result)]
    return result


def _s(x):
    return "—" if x is None else f"{x:.2f} s"


def targets(result: dict) -> list:
    from .report import Target

    out = []
    runs = result["runs"]
    for r in runs:
        if r["max_new"] != 512 and not (result["quick"] and r["max_new"] == max(x["max_new"] for x in runs)):
            continue
        name = f"browser / API, {r['model']}, {r['prompt']} prompt, {r['max_new']} tokens"
        if r["timed_out_s"]:
            seen = r["browser_s"] if r["browser_s"] else r["timed_out_s"]
            how = f"done at {seen:.0f} s" if r["browser_s"] else "at least"
            out.append(
                Target(
                    name + f" (browser timed out after {r['timed_out_s']:.0f} s; {how})",
                    None if not r["api_s"] else seen / r["api_s"],
                    f"<= {RATIO_TARGET}",
                    False,
                )
            )
        else:
            ratio = r.get("ratio")
            out.append(Target(name, ratio, f"<= {RATIO_TARGET}", None if ratio is None else ratio <= RATIO_TARGET))
    measured = [r["longest_task_s"] for r in runs if r["longest_task_s"] is not None]
    longest = max(measured, default=None)
    out.append(
        Target(
            "longest main-thread task over all runs (s)",
            longest,
            f"<= {LONGTASK_TARGET_S}",
            None if longest is None else longest <= LONGTASK_TARGET_S,
        )
    )
    for s in result["stop"]:
        v = s.get("stop_s")
        ok = None if "error" in s else (v is not None and v <= STOP_TARGET_S)
        out.append(Target(f"Stop takes effect, {s['model']} (s)", v, f"<= {STOP_TARGET_S}", ok))
    for model in sorted({r["model"] for r in runs}):
        for prompt in sorted({r["prompt"] for r in runs}):
            mine = [r for r in runs if r["model"] == model and r["prompt"] == prompt and r["update_bytes_max"]]
            if len(mine) < 2:
                continue
            lo = min(mine, key=lambda r: r["max_new"])
            hi = max(mine, key=lambda r: r["max_new"])
            growth = hi["update_bytes_max"] / lo["update_bytes_max"]
            out.append(
                Target(
                    f"largest streamed update after the first, {model}, {prompt} prompt: {hi['max_new']} / "
                    f"{lo['max_new']} tokens ({hi['update_bytes_max']:,} / {lo['update_bytes_max']:,} B)",
                    growth,
                    f"<= {UPDATE_GROWTH_TARGET}",
                    growth <= UPDATE_GROWTH_TARGET,
                )
            )
    return out


def table(result: dict) -> str:
    lines = [
        f"Headless Chromium {result.get('chromium', '?')} at {VIEWPORT['width']}×{VIEWPORT['height']}, greedy, "
        f"per-run timeout {result['run_timeout_s']:.0f} s; API = gradio_client /generate on the same server",
        "",
        "| model | prompt | new tokens | API s | browser s | browser / API | first chip s | heatmap s | "
        "longest task s | long tasks total s | updates | bytes/update median | max | view switch s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["runs"]:
        if r["timed_out_s"] and r["browser_s"] and r["api_s"]:
            # the page could only be read once its main thread was free: that is when it finished
            browser = f"timed out after {r['timed_out_s']:.0f}; done at {r['browser_s']:.1f}"
            ratio = f"{r['browser_s'] / r['api_s']:.2f}×"
        elif r["timed_out_s"]:
            browser = f"timed out after {r['timed_out_s']:.0f}"
            ratio = f"> {r['timed_out_s'] / r['api_s']:.1f}×" if r["api_s"] else "—"
        else:
            browser = _n(r["browser_s"], 1)
            ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        if r["error"]:
            browser += f" ({r['error'][:60]})"
        cells = [
            r["model"],
            r["prompt"],
            str(r["max_new"]),
            _n(r["api_s"], 1),
            browser,
            ratio,
            _n(r["first_chip_s"], 2),
            _n(r["heatmap_s"], 1),
            _n(r["longest_task_s"], 2),
            _n(r["long_task_total_s"], 1),
            "—" if r["updates"] is None else str(r["updates"]),
            _b(r["update_bytes_median"]),
            _b(r["update_bytes_max"]),
            _n(r["view_switch_s"], 2),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    first = result.get("first_runs")
    if first:
        lines += [
            "",
            "| bundled model, short prompt, 200 new tokens | click → drawn s | first chip s | done s | heatmap s | "
            "longest task s | long tasks total s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for k, v in first.items():
            if not isinstance(v, dict):
                lines.append(f"| {k} | {v} |")
                continue
            keys = ("drawn_s", "first_chip_s", "done_s", "heatmap_s", "longest_task_s", "long_task_total_s")
            lines.append(f"| {k} | " + " | ".join(_n(v.get(key), 2) for key in keys) + " |")
    if result["stop"]:
        lines += [
            "",
            "| Stop (512-token run, short prompt) | click after s | chips at click | chips at end | "
            "stop took effect s | status said stopped s | last chip s | longest task s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in result["stop"]:
            if "error" in s:
                lines.append(f"| {s['model']} | error: {s['error'][:100]} |")
                continue
            took = _n(s.get("stop_s"), 2) if s.get("stop_s") is not None else s.get("note", "—")
            lines.append(
                "| "
                + " | ".join(
                    [
                        s["model"],
                        _n(s.get("click_after_s"), 1),
                        str(s.get("chips_at_click", "—")),
                        str(s.get("chips_at_end", "—")),
                        took,
                        _n(s.get("status_stopped_s"), 2),
                        _n(s.get("last_chip_s"), 2),
                        _n(s.get("longest_task_s"), 2),
                    ]
                )
                + " |"
            )
    prof = result.get("profile")
    if prof and "error" not in prof:
        lines += [
            "",
            f"Where the page's main thread spent a {prof['max_new']}-token run, {prof['prompt']} prompt "
            f"({prof['wall_s']:.1f} s wall), by trace event (task/call wrappers left out; nested events overlap):",
        ]
        lines += [f"  {e['event']}: {e['total_s']:.2f} s ({e['count']}×)" for e in prof["trace_events"][:10]]
        lines += ["JavaScript self time by function:"]
        lines += [
            f"  {f['function']} ({f['file']}:{f['line']}:{f['column']}): {f['self_s']:.2f} s, {f['share']:.0%}"
            for f in prof["js_self_time"][:10]
        ]
    elif prof:
        lines.append(f"profile: {prof['error']}")
    return "\n".join(lines)


def _n(x, digits):
    return "—" if x is None else f"{x:.{digits}f}"


def _b(x):
    return "—" if x is None else f"{x:,.0f}"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--serve"]:
        os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
        serve()
    else:
        sys.exit("python -m bench --browser runs the benchmark; this module's own entry point is --serve")
