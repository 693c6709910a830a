"""The Inside tab's views timed in the page, click to drawn, beside the library doing the same work.

One page builds GPT-2-small-shaped random weights through the Model tab and generates a run of
about 256 tokens (a 300-word prompt cut to its first tokens, then greedy tokens); then each view is
drawn by its own control: opening the Inside tab (the logit lens and its cell), Attribute, Step
through (the attention maths), Run intervention, Dose-response and Head sweep (which the tab
refuses for this model and run: its estimate is the work). For each:

- **drawn**: from the click to the last change of the view's figures and message (a
  MutationObserver on them, read once nothing has changed for QUIET_S after the event's
  ``process_completed`` message), in the page's clock;
- **server**: from the click to that ``process_completed`` message (the handler, Gradio's
  serialisation, the transfer); **page**: from that message to drawn (parsing, Svelte, plotly);
- **bytes**: the event's SSE messages; **longest task**: the longest main-thread task in between;
- **main-thread CPU**: the CPU time the renderers' main threads used from the click until the view
  settled (their ``/proc`` counters): long tasks that add up to much more than it were the thread
  waiting for a core (descheduled on a busy machine), not the page working;
- **CPU server / Chromium**: the CPU seconds the app server and every Chromium process used in that
  time: on 2 cores, the page's share is taken from the server's two-thread forwards;
- **library**: the same call on the same token ids in this process, with the same shapes
  (GPT-2 small, random weights), timed right after the page's view while the server is idle.

Target (issue 23): drawn <= 1.3 × library + 0.3 s, no main-thread task over 0.2 s.
"""

from __future__ import annotations

import re
import time

from .cases import MODELS, long_prompt

RATIO_TARGET = 1.3
SLACK_S = 0.3
LONGTASK_TARGET_S = 0.2
QUIET_S = 0.6  # no change in the view's elements for this long after its event completed: drawn
PROMPT_TOKENS, NEW_TOKENS = 240, 16

WATCH_JS = r"""
(ids) => {
  const pg = window.__pg;
  const now = () => performance.timeOrigin + performance.now();
  pg.mut = pg.mut || {};
  pg.observed = pg.observed || {};
  for (const id of ids) {
    const el = document.getElementById(id);
    if (!el || pg.observed[id] === el) continue;
    new MutationObserver(() => { pg.mut[id] = now(); })
      .observe(el, {childList: true, subtree: true, characterData: true, attributes: true});
    pg.observed[id] = el;
  }
  return ids.every(id => pg.observed[id]);
}
"""

STATE_JS = r"""
([ids, t0, events]) => {
  const pg = window.__pg;
  const mine = m => m.t >= t0 && (events === null || events.includes(m.event));
  const msgs = pg.msgs.filter(mine);
  return {
    now: performance.timeOrigin + performance.now(),
    completed: msgs.filter(m => m.msg === 'process_completed').map(m => m.t),
    last: Math.max(0, ...ids.map(id => (pg.mut && pg.mut[id]) || 0)),
    bytes: msgs.reduce((s, m) => s + m.bytes, 0),
    msgs: msgs.length,
    longtasks: pg.longtasks.filter(lt => lt.start + lt.dur >= t0),
  };
}
"""

EVENTS_JS = "([t0, trigger]) => window.__pg.joins.filter(j => j.t >= t0 && j.trigger === trigger).map(j => j.event)"
CHIP_TITLES_JS = "() => [...document.querySelectorAll('#pg-chips .pg-chip[data-pos]')].map(c => c.title)"
KERNEL_ROWS_JS = (
    "() => [...document.querySelectorAll('#pg-kernels tr')].map(r => (r.innerText || r.textContent).trim())"
)
COMPONENT_JS = "(elem) => (window.gradio_config.components.find(c => c.props && c.props.elem_id === elem) || {}).id"


def views(T: int, L: int, H: int) -> list[dict]:
    """Each view: its sub-tab, the fields to fill, the button, the elements it draws, and the library
    call (a function of the model, the run's ids and the shown lens columns) doing the same work."""
    from playground.inside import attention_maths, attribution, effects, lenses
    from playground.inside.interventions import Intervention

    mid, p = L // 2, T - 2
    window = (max(0, T - 32), T)  # the intervention's lens after (inside_data.LENS_WINDOW)

    def sweep(model, ids, cols):
        # What the page does: the estimate, then, where it is under the limit (a fast machine), the
        # whole sweep one head at a time as the page runs it so that its Stop waits for one head.
        try:
            estimate = effects.sweep_estimate(model, ids)
        except effects.SweepTooLongError:
            return
        for _ in effects.head_sweep_layers(model, ids, estimate, batch=1, stop=lambda: False):
            pass

    return [
        {
            "name": "logit lens (opening the tab) + its cell",
            "tab": None,
            "elements": ["pg-lens", "pg-lens-cell"],
            "library": lambda m, ids, cols: (
                lenses.logit_lens(m, ids, first=cols[0], stop=cols[1]),
                lenses.lens_cell(m, ids, L, T - 1),
            ),
        },
        {
            "name": "logit attribution",
            "tab": "inside_dla",
            "button": "#pg-dla-btn",
            "elements": ["pg-dla-heat", "pg-dla-fall", "pg-dla-md", "pg-dla-msg"],
            "library": lambda m, ids, cols: attribution.logit_attribution(m, ids, p),
        },
        {
            "name": "attention maths",
            "tab": "inside_maths",
            "numbers": [("layer", mid), ("head", 1), ("inside_query_position", p)],
            "button": "#pg-maths-btn",
            "elements": ["pg-maths-table", "pg-maths-plot", "pg-maths-md", "pg-maths-msg"],
            "library": lambda m, ids, cols: attention_maths.attention_maths(m, ids, mid, 1, p),
        },
        {
            "name": "intervention before/after (+ lens after)",
            "tab": "inside_interventions",
            "texts": [("inside_zero_heads", f"{mid}.0, {L - 1}.{H - 1}")],
            "button": "#pg-intervene-btn",
            "elements": ["pg-intervene-bars", "pg-intervene-loss", "pg-intervene-lens", "pg-intervene-md"],
            "library": lambda m, ids, cols: effects.compare(
                m, ids, Intervention(zero_heads=((mid, 0), (L - 1, H - 1))), p, lens_window=window
            ),
        },
        {
            "name": "dose-response (11 α, drawn as it grows, at most 4 updates a second)",
            "tab": "inside_interventions",
            "texts": [("inside_scale_head", f"{mid}.0")],
            "button": "#pg-dose-btn",
            "elements": ["pg-dose", "pg-intervene-msg"],
            "library": lambda m, ids, cols: list(effects.dose_response_points(m, ids, mid, 0, p, chunk=1)),
        },
        {
            "name": "head sweep (whole, or refused if its estimate is over the limit)",
            "tab": "inside_interventions",
            "button": "#pg-sweep-btn",
            "elements": ["pg-sweep", "pg-sweep-md", "pg-intervene-msg"],
            "library": sweep,
        },
    ]


def chosen_views(all_views: list[dict], only: list[str] | None = None, reps: int = 1) -> list[dict]:
    """The views to click, in order: those whose names contain one of the words ``only`` (all when
    None), each ``reps`` times, after the tab's opening view (the lens) once: the others are in it."""
    out = []
    for v in all_views:
        if v["tab"] is None:
            out.append(v)
        elif not only or any(word in v["name"] for word in only):
            out += [v] * reps
    return out


def run_prompt(n_tokens: int = PROMPT_TOKENS) -> str:
    """The 300-word prompt cut to its first ``n_tokens`` tokens."""
    from playground.engine.tokenizer import load_tokenizer

    tok = load_tokenizer()
    return tok.decode(tok.encode(long_prompt())[:n_tokens])


def measure(bench, model: str = "gpt2-small", log=print, only: list[str] | None = None, reps: int = 1) -> dict:
    """Every view of the Inside tab on ``model`` (a Bench's server and browser): page and library.
    ``only``: the views whose names contain one of these words (the lens, which opening the tab
    draws, always runs); ``reps``: clicks of each chosen view, each timed with its own library call."""
    import torch

    from playground.accel import accelerate
    from playground.engine.model import GPTModel
    from playground.engine.presets import PRESETS
    from playground.i18n import EN

    context, page, cdp, net, errors = bench.open_page(model)
    out: dict = {"model": MODELS[model]["label"], "views": []}
    try:
        bench.set_inputs(page, run_prompt(), NEW_TOKENS)
        t_issue = bench.now_ms()
        page.click("#pg-generate")
        if not bench.wait_state(page, ("done",), t_issue, time.perf_counter() + bench.run_timeout):
            raise RuntimeError("the run before the Inside views did not finish")
        ids = ids_from_chip_titles(page.evaluate(CHIP_TITLES_JS))
        out["tokens"] = len(ids)
        # What the server decided for the readout's product (the Model tab's kernels box): the
        # intervention's and the lens's readouts run on it, and the decision is made under whatever load
        # the build met.
        out["server_readout_product"] = server_readout_product(page, EN)
        bench.wait_server_idle()
        lib_model = accelerate(
            GPTModel(PRESETS[MODELS[model]["preset"]], generator=torch.Generator().manual_seed(0)).eval()
        )
        cfg = lib_model.cfg
        lib_model(torch.tensor([ids]))  # warm: the library's first call pays for nothing the page's did not
        for view in chosen_views(views(len(ids), cfg.n_layers, cfg.n_heads), only, reps):
            log(f"  Inside view in the page: {view['name']} ...", end="", flush=True)
            r = _page_view(bench, page, view, EN)
            cols = r.pop("lens_cols", None) or (max(0, len(ids) - 32), len(ids))
            bench.wait_server_idle()
            r["library_s"] = _library_seconds(view["library"], lib_model, ids, cols)
            if r.get("drawn_s") is not None:
                r["target_s"] = RATIO_TARGET * r["library_s"] + SLACK_S
                r["ratio"] = r["drawn_s"] / r["library_s"]
            log(f" drawn {_fmt(r.get('drawn_s'))}, library {_fmt(r['library_s'])}")
            out["views"].append(r)
        if errors:
            out["page_errors"] = errors[:3]
    finally:
        context.close()
    return out


def server_readout_product(page, en: dict) -> list[str]:
    """The many-row product rows of the Model tab's kernels box (its accordion opened to read them;
    the page is left on the Generate tab, where the run put it)."""
    page.get_by_role("tab", name="Model", exact=False).first.click()
    page.get_by_text(en["kernels"], exact=True).first.click()
    try:
        page.wait_for_function("() => document.querySelectorAll('#pg-kernels tr').length > 0", timeout=10_000)
        rows = [row for row in page.evaluate(KERNEL_ROWS_JS) if "many-row" in row]
    except Exception:
        rows = []
    page.get_by_role("tab", name="Generate").click()
    return rows


def ids_from_chip_titles(titles: list[str]) -> list[int]:
    """The run's token ids, read from its chips' titles ("... position 12 · id 318 ...") in the
    page itself. (An API client on the page's own session would share its event stream with the
    page, and either may then receive the other's messages: the client saw its stream closed,
    a CancelledError, in some runs.)"""
    found = {}
    for title in titles:
        m = re.search(r"\bposition (\d+) · id (\d+)", title)
        if m is None:
            raise RuntimeError(f"a chip's title names no position and id: {title[:120]!r}")
        found[int(m.group(1))] = int(m.group(2))
    if not found or sorted(found) != list(range(min(found), min(found) + len(found))):
        raise RuntimeError(f"the chips' positions are not one run: {sorted(found)[:10]} ...")
    return [found[p] for p in sorted(found)]


def _page_view(bench, page, view: dict, en: dict) -> dict:
    """Fill the view's fields, click, and time it until drawn. A button's view is its own event
    (the fields' events are left out); opening the tab counts every event it starts."""
    r: dict = {"view": view["name"]}
    if view["tab"] is not None:
        page.get_by_role("tab", name=en[view["tab"]], exact=True).click()
        page.wait_for_timeout(300)
    for label, value in view.get("texts", []):
        page.get_by_label(en[label], exact=True).locator("visible=true").first.fill(value)
    for label, value in view.get("numbers", []):
        box = page.get_by_label(en[label], exact=True).locator("visible=true").first
        box.fill(str(value))
        box.press("Tab")
    page.wait_for_timeout(300)  # the fields' change events settle before the click
    ids = view["elements"]
    if view["tab"] is None:
        target = page.get_by_role("tab", name=en["tab_inside"].split(" · ")[-1], exact=False)
    else:
        target = page.locator(view["button"])
    target.scroll_into_view_if_needed()
    page.evaluate(WATCH_JS, ids)
    trigger = page.evaluate(COMPONENT_JS, view["button"][1:]) if view["tab"] is not None else None
    cpu0, split0 = renderer_main_thread_cpu(), cpu_by_process(bench.app.proc.pid)
    t0 = bench.now_ms()
    target.click()
    # (elements a tab renders only once shown are watched as soon as they exist)
    page.wait_for_function(WATCH_JS, arg=ids, timeout=60_000, polling=20)
    deadline = time.perf_counter() + bench.run_timeout
    state = None
    while time.perf_counter() < deadline:
        events = None if trigger is None else page.evaluate(EVENTS_JS, [t0, trigger])
        if events == []:
            time.sleep(0.05)
            continue
        state = page.evaluate(STATE_JS, [ids, t0, events])
        if state["completed"] and state["last"] > t0:
            settled = state["now"] - max(state["last"], state["completed"][-1]) >= QUIET_S * 1000
            if settled:
                break
        time.sleep(0.1)
    else:
        r["error"] = f"not drawn within {bench.run_timeout:.0f} s"
        return r
    drawn = state["last"]
    r["main_thread_cpu_s"] = renderer_main_thread_cpu() - cpu0
    r["cpu_s"] = {k: v - split0[k] for k, v in cpu_by_process(bench.app.proc.pid).items()}
    r["drawn_s"] = (drawn - t0) / 1000
    r["server_s"] = (state["completed"][-1] - t0) / 1000
    r["page_s"] = max(0.0, (drawn - state["completed"][-1]) / 1000)
    r["bytes"] = state["bytes"]
    r["messages"] = state["msgs"]
    tasks = [lt["dur"] for lt in state["longtasks"] if lt["start"] <= drawn]
    r["longest_task_s"] = max(tasks, default=0.0) / 1000
    r["long_task_total_s"] = sum(tasks) / 1000
    if view["tab"] is None:
        x = page.evaluate("() => document.querySelector('#pg-lens .js-plotly-plot').data[0].x")
        r["lens_cols"] = (int(min(x)), int(max(x)) + 1)  # absolute = window positions: the run fits the context
        r["lens_positions"] = len(x)
    return r


def renderer_main_thread_cpu() -> float:
    """CPU seconds so far of the main threads (thread id = process id) of this process's Chromium renderers."""
    import psutil

    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "--type=renderer" not in " ".join(proc.cmdline()):
                continue
            total += sum(t.user_time + t.system_time for t in proc.threads() if t.id == proc.pid)
        except psutil.Error:
            pass
    return total


def cpu_by_process(server_pid: int) -> dict:
    """CPU seconds so far of the app server, of Chromium (every process) and of the harness (this
    process and Playwright's driver): on a 2-core machine, what the page and the harness use while
    the server computes is taken from the server's threads."""
    import psutil

    def used(proc) -> float:
        t = proc.cpu_times()
        return t.user + t.system

    out = {"server": 0.0, "chromium": 0.0, "harness": used(psutil.Process())}
    try:
        out["server"] = used(psutil.Process(server_pid))
    except psutil.Error:
        pass
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.pid == server_pid:
                continue
            out["chromium" if "chrom" in proc.name().lower() else "harness"] += used(proc)
        except psutil.Error:
            pass
    return out


def _library_seconds(call, model, ids, cols, reps: int = 2) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call(model, ids, cols)
        times.append(time.perf_counter() - t0)
    return min(times)


def _fmt_cpu(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def _fmt_split(cpu) -> str:
    return "—" if not cpu else f"{cpu['server']:.2f} / {cpu['chromium']:.2f}"


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.2f} s"


def targets(result: dict) -> list:
    from bench.checks import Target

    out = []
    for r in (result.get("inside_views") or {}).get("views", []):
        if r.get("drawn_s") is None:
            out.append(Target(f"Inside, {r['view']}: drawn (s)", None, "measured", False))
            continue
        out.append(
            Target(
                f"Inside, {r['view']}: click to drawn (s) against 1.3 × library {r['library_s']:.2f} s + 0.3 s",
                r["drawn_s"],
                f"<= {r['target_s']:.2f}",
                r["drawn_s"] <= r["target_s"],
            )
        )
        out.append(
            Target(
                f"Inside, {r['view']}: longest main-thread task (s)",
                r["longest_task_s"],
                f"<= {LONGTASK_TARGET_S}",
                r["longest_task_s"] <= LONGTASK_TARGET_S,
            )
        )
    return out


def table(result: dict) -> str:
    d = result.get("inside_views")
    if not d:
        return ""
    if "error" in d:
        return f"Inside views: {d['error']}"
    load = [result.get("loadavg_start"), result.get("loadavg_end")]
    lines = [
        f"Inside views in the page: {d['model']}, a {d.get('tokens', '?')}-token run"
        + (f"; 1-minute load average {load[0][0]:.1f} at the start, {load[1][0]:.1f} at the end" if all(load) else ""),
        *(f"The server's readout product: {' '.join(row.split())}" for row in d.get("server_readout_product", [])),
        "",
        "| view | click → drawn s | library s | drawn / library | target s | server s | page s | KB | "
        "longest task s | long tasks total s | main-thread CPU s | CPU s server / Chromium |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in d["views"]:
        if r.get("drawn_s") is None:
            lines.append(f"| {r['view']} | {r.get('error', '—')} |")
            continue
        lines.append(
            f"| {r['view']} | {r['drawn_s']:.2f} | {r['library_s']:.2f} | {r['ratio']:.2f}× | {r['target_s']:.2f} | "
            f"{r['server_s']:.2f} | {r['page_s']:.2f} | {r['bytes'] / 1000:,.0f} | {r['longest_task_s']:.2f} | "
            f"{r['long_task_total_s']:.2f} | {_fmt_cpu(r.get('main_thread_cpu_s'))} | {_fmt_split(r.get('cpu_s'))} |"
        )
    return "\n".join(lines)
