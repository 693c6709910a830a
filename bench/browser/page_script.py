"""The script installed in every page before the app's: long tasks, SSE message sizes, clicks, a timeline."""

# has rendered) a MutationObserver timeline of chip count, run state and heatmap title.
INIT_SCRIPT = r"""
(() => {
  const now = () => performance.timeOrigin + performance.now();
  const pg = window.__pg = {longtasks: [], msgs: [], clicks: [], timeline: [], joins: [], chunks: 0};
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
      if (url.includes('/queue/join') && init && typeof init.body === 'string') {
        // which component started the event, and the event's id (its SSE messages carry it)
        const trigger = JSON.parse(init.body).trigger_id;
        resp.clone().json().then(j => pg.joins.push({t: now(), trigger, event: j.event_id})).catch(() => {});
      }
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
              const ev = /"event_id"\s*:\s*"([^"]+)"/.exec(text.slice(0, 400));
              // step: the last generated token whose chip the message carries (-1: none)
              let step = -1;
              for (const s of text.matchAll(/data-step='(\d+)'/g)) step = Math.max(step, +s[1]);
              pg.msgs.push({t: now(), bytes: new TextEncoder().encode(text).length, msg: m ? m[1] : null,
                            event: ev ? ev[1] : null, step});
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
