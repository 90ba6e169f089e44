// history.js: the dashboard's History view. It reads the summary of a
// range of the recorded timeline (GET /v1/timeline?points=N, with the
// admin token) and draws it with chart.js; while the range ends now, the
// live samples and level events the page receives are appended. It
// defines one global, DegradedHistory; app.js starts it.
'use strict';
const DegradedHistory = (function () {
  const RANGES = { '15m': 15 * 60e3, '1h': 3600e3, '6h': 6 * 3600e3, '24h': 24 * 3600e3 };
  const MAX_POINTS = 2000;
  const RENDER_GAP_MS = 500; // live updates are drawn at most this often

  function init(deps) {
    const $ = (id) => document.getElementById(id);
    const state = {
      range: '1h', from: null, to: null, // from/to (ms) for a fixed range; null for a live one
      view: null, // the charts' data
      last: null, // the last state document seen live
      asked: 0, timer: null, busy: false, refetch: null, lineAbort: null,
    };

    const live = () => state.from === null;
    const token = () => ($('tl-token').value || $('ov-token').value || '').trim();

    function status(text, error) {
      const s = $('tl-status');
      s.textContent = text;
      s.classList.toggle('error', !!error);
    }

    function pressRange() {
      for (const b of document.querySelectorAll('#timeline .tl-range')) {
        b.setAttribute('aria-pressed', String(live() && b.dataset.range === state.range));
      }
    }

    // toInput is a time as a datetime-local value in UTC; fromInput reads one.
    const toInput = (ms) => new Date(ms).toISOString().slice(0, 19);
    const fromInput = (v) => Date.parse(v.length === 16 ? v + ':00Z' : v + 'Z');

    // load asks for the summary of the range and draws it. Of overlapping
    // loads, the last one wins.
    async function load() {
      const ask = ++state.asked;
      const charts = $('tl-charts');
      const width = Math.max(480, charts.clientWidth || 960);
      const points = Math.min(MAX_POINTS, Math.max(300, Math.round(width)));
      const now = Date.now();
      const to = live() ? now : state.to;
      const from = live() ? now - RANGES[state.range] : state.from;
      $('tl-from').value = toInput(from);
      $('tl-to').value = toInput(to);
      pressRange();
      const started = performance.now();
      charts.setAttribute('aria-busy', 'true');
      status('Loading ' + (live() ? 'the last ' + state.range : DegradedCharts.stamp(from) + ' to ' + DegradedCharts.stamp(to)) + '…');
      const q = 'v1/timeline?points=' + points + '&from=' + new Date(from).toISOString() + (live() ? '' : '&to=' + new Date(to).toISOString());
      let r;
      try {
        r = await deps.api('GET', q, undefined, token());
      } catch (e) {
        if (ask === state.asked) { charts.removeAttribute('aria-busy'); status('Could not reach degraded: ' + e.message, true); }
        return;
      }
      if (ask !== state.asked) return;
      charts.removeAttribute('aria-busy');
      $('tl-auth').hidden = r.status !== 401;
      if (r.status === 401) {
        status('The timeline is read with the admin token: enter it below.', true);
        charts.replaceChildren();
        return;
      }
      if (r.status === 404) {
        status('Nothing is recorded: this daemon has no data_dir, or record.enabled is false.');
        charts.replaceChildren();
        return;
      }
      if (!r.ok || !r.data) {
        status((r.data && r.data.error) || 'Refused with HTTP ' + r.status + '.', true);
        return;
      }
      const fetched = performance.now();
      state.view = DegradedCharts.fromSeries(r.data);
      state.view.width = width;
      draw();
      const done = performance.now();
      charts.dataset.loadMs = String(Math.round(done - started));
      charts.dataset.fetchMs = String(Math.round(fetched - started));
      charts.dataset.lines = String(r.data.lines);
      charts.dataset.loaded = String(ask);
      const v = state.view;
      status(v.lines ? v.lines + ' lines from ' + DegradedCharts.stamp(v.from) + ' to ' + DegradedCharts.stamp(v.to) +
        (live() ? '; live samples are added as they arrive' : '') + '. Point at a chart to see the moment, and rest on it for its recorded line.'
        : 'Nothing was recorded in this range.');
    }

    function draw() {
      const v = state.view;
      if (!v) return;
      state.timer = null;
      DegradedCharts.render($('tl-charts'), {
        from: v.from, to: v.to, bucket: v.bucket, tables: v.tables, marks: v.marks, signals: v.signals,
        lanes: [{ id: 'published', title: 'Published level', bands: v.bands, tables: v.tables, flags: true }],
        thresholds: [{ id: 'table', label: 'Table in force', tables: v.tables, judged: { bands: v.bands } }],
      }, { width: v.width, onRest: showLine });
    }

    function later() {
      if (!state.timer) state.timer = setTimeout(draw, RENDER_GAP_MS);
    }

    // showLine adds the recorded line nearest t to the tooltip: the
    // timeline's own NDJSON lines of the bucket around it.
    async function showLine(t, tip) {
      const v = state.view;
      if (!v) return;
      if (state.lineAbort) state.lineAbort.abort();
      const ctl = new AbortController();
      state.lineAbort = ctl;
      const half = Math.max(v.bucket || 0, 2000);
      const q = 'v1/timeline?from=' + new Date(t - half).toISOString() + '&to=' + new Date(t + half).toISOString();
      const headers = {};
      if (token()) headers.Authorization = 'Bearer ' + token();
      try {
        const resp = await fetch(q, { headers, cache: 'no-store', signal: ctl.signal });
        if (!resp.ok) return;
        let best = null;
        for (const s of (await resp.text()).split('\n')) {
          if (!s) continue;
          const l = JSON.parse(s);
          if (!best || Math.abs(Date.parse(l.at) - t) < Math.abs(Date.parse(best.at) - t)) best = l;
        }
        if (!best || tip.hidden || tip.dataset.t !== new Date(t).toISOString()) return;
        const p = document.createElement('p');
        p.className = 'tip-line';
        p.textContent = lineText(best);
        tip.append(p);
      } catch (e) {
        // Aborted by the next hover, or the daemon is gone: the summary stays.
      }
    }

    function lineText(l) {
      let s = 'line ' + l.at + ' ' + l.trigger + ': published ' + l.published + ' (' + l.source + '), recommended ' + l.recommended;
      if (l.partial) s += ', partial ' + Math.round(l.partial.fraction * 100) + '% of ' + l.partial.from + '+';
      if (l.override) s += ', override ' + l.override.mode + ' ' + l.override.level + (l.override.actor ? ' by ' + l.override.actor : '');
      if (l.actor) s += ', by ' + l.actor;
      const sigs = Object.keys(l.signals || {}).sort().filter((n) => l.signals[n].state !== 'off');
      for (const n of sigs) {
        const x = l.signals[n];
        const info = DegradedCharts.info(n);
        s += '\n  ' + n + ' ' + (x.value === null ? '–' : Number(x.value.toPrecision(6)) + info.unit) + ' ' + x.state;
      }
      return s;
    }

    // ---- live ----

    // slide moves a live view's range to end now, dropping what fell out.
    function slide(now) {
      const v = state.view;
      if (!v || !live()) return false;
      v.to = now;
      v.from = now - RANGES[state.range];
      for (const s of v.signals) {
        let i = 0;
        while (i < s.t.length && s.t[i] < v.from) i++;
        if (i) { s.t.splice(0, i); s.min.splice(0, i); s.max.splice(0, i); s.state.splice(0, i); }
      }
      while (v.bands.length > 1 && v.bands[0].to < v.from) v.bands.shift();
      while (v.marks.length && v.marks[0].at < v.from) v.marks.shift();
      return true;
    }

    // sample appends a health check's signals, merged into the last
    // point while within one bucket of it.
    function sample(sig) {
      const at = Date.parse(sig.sampled_at);
      if (Number.isNaN(at) || !slide(Math.max(Date.now(), at))) return;
      const v = state.view;
      const status = sig.status || {};
      for (const name of Object.keys(status)) {
        if (status[name] === 'off') continue;
        const info = DegradedCharts.info(name);
        const raw = info.custom ? (sig.custom || {})[name] : sig[info.key];
        const val = raw === null || raw === undefined ? null : raw;
        let s = v.signals.find((x) => x.name === name);
        if (!s) {
          s = { name, t: [], min: [], max: [], state: [] };
          v.signals.push(s);
        }
        const n = s.t.length;
        if (n && at <= s.t[n - 1]) continue; // seen already (the summary holds it)
        if (n && at - s.t[n - 1] < (v.bucket || 0)) {
          if (val !== null) {
            s.min[n - 1] = s.min[n - 1] === null ? val : Math.min(s.min[n - 1], val);
            s.max[n - 1] = s.max[n - 1] === null ? val : Math.max(s.max[n - 1], val);
          }
          if (rank(status[name]) > rank(s.state[n - 1])) s.state[n - 1] = status[name];
        } else {
          s.t.push(at); s.min.push(val); s.max.push(val); s.state.push(status[name]);
        }
      }
      extendBand(at);
      later();
    }

    const rank = (st) => ({ available: 1, absent: 2, warming: 3, failed: 4 })[st] || 0;

    function extendBand(at) {
      const bands = state.view.bands;
      const b = bands[bands.length - 1];
      if (b && at > b.to) b.to = at;
    }

    // levelEvent appends a published state: a new band when the level,
    // its source or the partial admission changed, a mark when the local
    // override did. A reload is read again from the timeline.
    function levelEvent(st) {
      const prev = state.last;
      state.last = st;
      const now = Date.now();
      if (!slide(now)) return;
      const v = state.view;
      const bands = v.bands;
      const b = bands[bands.length - 1];
      const same = b && b.level === st.level && b.source === st.source && JSON.stringify(b.partial) === JSON.stringify(st.partial);
      if (same) {
        b.to = Math.max(b.to, now);
      } else {
        if (b) b.to = Math.max(b.to, now);
        bands.push({ from: now, to: now, level: st.level, index: st.index, source: st.source, partial: st.partial, mixed: false });
      }
      if (prev) {
        const was = prev.override, is = st.override;
        const key = (o) => (o ? o.level + ' ' + o.mode + ' ' + o.set_at : '');
        if (key(was) !== key(is)) {
          const m = is
            ? { at: now, kind: 'override', action: 'set', level: is.level, mode: is.mode, reason: is.reason, actor: is.actor || '',
              ttl: Math.round((Date.parse(is.expires_at) - Date.parse(is.set_at)) / 1000) + 's', published: st.level }
            : { at: now, kind: 'override', action: (st.reason || '').startsWith('override expired') ? 'expired' : 'clear',
              level: was.level, mode: was.mode, reason: was.reason, actor: '', published: st.level };
          v.marks.push(m);
        }
        if (prev.sequence !== st.sequence && (st.reason || '').startsWith('config')) refetchSoon();
      }
      later();
    }

    function refetchSoon() {
      clearTimeout(state.refetch);
      state.refetch = setTimeout(load, 1000);
    }

    // ---- controls ----

    for (const b of document.querySelectorAll('#timeline .tl-range')) {
      b.addEventListener('click', () => {
        state.range = b.dataset.range;
        state.from = state.to = null;
        load();
      });
    }
    $('tl-custom').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const from = fromInput($('tl-from').value), to = fromInput($('tl-to').value);
      if (Number.isNaN(from) || Number.isNaN(to) || to <= from) {
        status('From must be a time before To (both in UTC).', true);
        return;
      }
      state.from = from;
      state.to = to;
      load();
    });
    $('tl-auth').addEventListener('submit', (ev) => {
      ev.preventDefault();
      load();
    });
    let resized = null;
    window.addEventListener('resize', () => {
      clearTimeout(resized);
      resized = setTimeout(() => {
        if (state.view) { state.view.width = Math.max(480, $('tl-charts').clientWidth || 960); draw(); }
      }, 200);
    });

    // A page opened at #history=FROM/TO (RFC 3339) shows that range.
    const m = /^#history=([^/]+)\/(.+)$/.exec(location.hash);
    if (m && !Number.isNaN(Date.parse(decodeURIComponent(m[1]))) && !Number.isNaN(Date.parse(decodeURIComponent(m[2])))) {
      state.from = Date.parse(decodeURIComponent(m[1]));
      state.to = Date.parse(decodeURIComponent(m[2]));
    }
    // The first load waits for the page's own first reads (the stream
    // opened, the table and the samples asked for): the level comes first.
    let started = false;
    const start = () => {
      if (!started) { started = true; load(); }
    };
    return { sample, state: levelEvent, opened: () => { if (started) load(); else start(); }, start, reload: load };
  }

  return { init };
}());
