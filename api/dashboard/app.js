// degraded dashboard: plain JavaScript, no build step, nothing loaded from
// elsewhere. It reads the JSON API of the daemon that serves it and follows
// the level over Server-Sent Events. All paths are relative, so the page also
// works behind a proxy that mounts the daemon under a prefix.
'use strict';
(function () {
  const HISTORY_LIMIT = 50;
  const SAMPLES_SPAN_MS = 10 * 60 * 1000; // what the daemon keeps: about ten minutes
  const SAMPLES_MAX = 1200;
  const SIGNALS = [
    { key: 'cpu_percent', name: 'CPU', digits: 1, fixedMax: 100 },
    { key: 'memory_percent', name: 'Memory', digits: 1, fixedMax: 100 },
    { key: 'error_rate_percent', name: 'Error rate', digits: 2, fixedMax: 0 },
  ];
  const SVG = 'http://www.w3.org/2000/svg';
  const W = 300, H = 60; // sparkline view box

  const model = { levels: [], state: null, signals: null, samples: [], history: [] };
  const $ = (id) => document.getElementById(id);

  // ---- helpers -----------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  function pct(v, digits) {
    return v === null || v === undefined ? 'unavailable' : v.toFixed(digits) + '%';
  }

  function threshold(v) {
    return v === null || v === undefined ? 'never triggers' : '> ' + v + '%';
  }

  function pad(n) { return String(n).padStart(2, '0'); }

  // fmtTime shows a moment in UTC, as the API, the logs and the history do.
  function fmtTime(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    const time = pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds());
    const now = new Date();
    if (d.getUTCFullYear() === now.getUTCFullYear() && d.getUTCMonth() === now.getUTCMonth() && d.getUTCDate() === now.getUTCDate()) {
      return time + ' UTC';
    }
    return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' + time + ' UTC';
  }

  function fmtDuration(ms) {
    let s = Math.max(0, Math.round(ms / 1000));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d) return d + 'd ' + h + 'h';
    if (h) return h + 'h ' + m + 'm';
    if (m) return m + 'm ' + s + 's';
    return s + 's';
  }

  // relative renders "(3m 12s ago)" or "(in 42s)"; tick() keeps it current.
  function relative(node, iso) {
    node.dataset.at = iso || '';
    const rel = node.querySelector('.rel');
    if (!rel) return;
    if (!iso) { rel.textContent = ''; return; }
    const ms = Date.parse(iso) - Date.now();
    if (ms > 0) rel.textContent = ' (in ' + fmtDuration(ms) + ')';
    else if (node.dataset.deadline) rel.textContent = ' (reached)';
    else rel.textContent = ' (' + fmtDuration(-ms) + ' ago)';
  }

  // setTimeField shows a moment and how far away it is. A deadline (an
  // expiry, the earliest recovery) says "reached" once it has passed.
  function setTimeField(node, iso, empty, deadline) {
    node.replaceChildren();
    if (deadline) node.dataset.deadline = '1';
    if (!iso) { node.textContent = empty; delete node.dataset.at; return; }
    node.append(el('time', { datetime: iso }, fmtTime(iso)), el('span', { class: 'rel' }));
    relative(node, iso);
  }

  function tick() {
    for (const node of document.querySelectorAll('[data-at]')) {
      if (node.dataset.at) relative(node, node.dataset.at);
    }
  }

  // severity maps a level index onto the six badge colours, whatever the
  // table's length: 0 is always Normal, the last level always the darkest.
  function severity(index, count) {
    if (index <= 0) return 0;
    if (count <= 2) return 5;
    return 1 + Math.round((index - 1) * 4 / Math.max(1, count - 2));
  }

  function levelByName(name) {
    return model.levels.find((l) => l.name === name);
  }

  // ---- API ---------------------------------------------------------------

  async function api(method, path, body, token) {
    const headers = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (token) headers.Authorization = 'Bearer ' + token;
    const resp = await fetch(path, {
      method, headers, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    if ((resp.headers.get('Content-Type') || '').startsWith('application/json')) {
      data = await resp.json();
    }
    return { ok: resp.ok, status: resp.status, data };
  }

  async function load(path, apply) {
    try {
      const r = await api('GET', path);
      if (r.ok && r.data) apply(r.data);
    } catch (e) {
      // The event stream reports the connection; nothing more to say here.
    }
  }

  const loadLevels = () => load('v1/levels', (d) => { model.levels = d.levels || []; renderLevelsSelect(); renderState(); renderSignals(); });
  const loadSamples = () => load('v1/samples', (d) => { model.samples = d.samples || []; renderSignals(); });
  const loadHistory = () => load('v1/history?limit=' + HISTORY_LIMIT, (d) => { model.history = d.transitions || []; renderHistory(); });

  // ---- state -------------------------------------------------------------

  // applyState shows a state document. The stream is authoritative (after
  // a restart without a state file the sequence starts again); an answer to
  // our own PUT or DELETE may arrive after a newer event, and is dropped then.
  function applyState(st, fromStream) {
    const prev = model.state;
    if (!fromStream && prev && st.sequence < prev.sequence) return;
    model.state = st;
    model.signals = st.signals;
    if (!levelByName(st.level)) loadLevels(); // the table was reloaded
    if (!prev || prev.sequence !== st.sequence) loadHistory();
    renderState();
    renderSignals();
  }

  function addSample(sig) {
    const s = model.samples;
    if (s.length && s[s.length - 1].sampled_at === sig.sampled_at) return;
    s.push(sig);
    const newest = Date.parse(sig.sampled_at);
    while (s.length > SAMPLES_MAX || (s.length > 1 && newest - Date.parse(s[0].sampled_at) > SAMPLES_SPAN_MS)) s.shift();
    model.signals = sig;
    renderSignals();
  }

  // ---- rendering ---------------------------------------------------------

  function renderState() {
    const st = model.state;
    if (!st) return;
    const badge = $('badge');
    const count = model.levels.length || st.index + 1;
    badge.className = 'badge sev-' + severity(st.index, count);
    badge.dataset.level = st.level;
    badge.dataset.sequence = String(st.sequence);
    $('level-name').textContent = st.level;
    $('level-index').textContent = st.index === 0
      ? 'Level 0: everything is served'
      : 'Level ' + st.index + (model.levels.length ? ' of ' + (model.levels.length - 1) : '');
    $('threshold').textContent = st.priority_threshold === 0 ? 'nothing shed (0)' : String(st.priority_threshold);
    let source = st.source === 'override' ? 'operator override' : 'automatic';
    if (st.override && st.source !== 'override') source += ' (a floor is set below it)';
    $('source').textContent = source;
    const rec = levelByName(st.recommended);
    let recText = st.recommended;
    if (rec && rec.index > st.index) recText += ' (higher than published)';
    else if (rec && rec.index < st.index) recText += ' (lower than published)';
    $('recommended').textContent = recText;
    setTimeField($('since'), st.since, '–');
    setTimeField($('recovery'), st.earliest_recovery_at, 'already at Normal', true);
    $('disabled').textContent = st.disabled_features && st.disabled_features.length ? st.disabled_features.join(', ') : 'none';
    $('reason').textContent = st.reason || '–';
    renderOverride();
  }

  function renderOverride() {
    const o = model.state && model.state.override;
    const cur = $('override-current');
    cur.replaceChildren();
    cur.classList.toggle('active', !!o);
    $('ov-clear').disabled = !o;
    if (!o) {
      cur.textContent = 'No override is active: the signals decide.';
      return;
    }
    const exp = el('span', {});
    setTimeField(exp, o.expires_at, '–', true);
    cur.append(
      (o.mode === 'pin' ? 'Pinned at ' : 'Floored at ') + o.level + ' until ', exp,
      el('br'), 'Reason: ' + o.reason);
  }

  function renderLevelsSelect() {
    const sel = $('ov-level');
    const chosen = sel.value || (model.state ? model.state.level : '');
    sel.replaceChildren(...model.levels.map((l) =>
      el('option', { value: l.name }, l.name + ' — sheds priority < ' + l.priority_threshold)));
    if (levelByName(chosen)) sel.value = chosen;
  }

  function renderSignals() {
    const box = $('signals');
    if (!box.children.length) {
      for (const s of SIGNALS) box.append(signalCard(s));
    }
    const st = model.state;
    const cur = st ? model.levels[st.index] : null;
    const next = st ? model.levels[st.index + 1] : null;
    const sig = model.signals || {};
    for (const s of SIGNALS) updateSignal(s, sig, cur, next);

    const span = $('samples-span');
    const n = model.samples.length;
    if (n > 1) {
      const ms = Date.parse(model.samples[n - 1].sampled_at) - Date.parse(model.samples[0].sampled_at);
      span.textContent = 'Sparklines show the last ' + fmtDuration(ms) + ' (' + n + ' health checks). Dashed lines: this level\'s and the next level\'s thresholds.';
    } else if (sig.sampled_at) {
      span.textContent = 'Last health check at ' + fmtTime(sig.sampled_at) + '.';
    }
  }

  function signalCard(s) {
    const id = 'sig-' + s.key;
    const card = el('article', { class: 'signal', id, 'aria-labelledby': id + '-h' },
      el('h3', { id: id + '-h' }, s.name),
      el('p', { class: 'value', 'data-field': 'value' }, '–'),
      el('p', { class: 'detail', 'data-field': 'detail' }),
      el('p', { class: 'verdict', 'data-field': 'verdict' }),
      el('dl', { class: 'thresholds' },
        el('dt', {}, el('span', { class: 'key current', 'aria-hidden': 'true' }), el('span', { 'data-field': 'cur-name' }, 'This level')),
        el('dd', { 'data-field': 'cur-th' }, '–'),
        el('dt', {}, el('span', { class: 'key next', 'aria-hidden': 'true' }), el('span', { 'data-field': 'next-name' }, 'Next level')),
        el('dd', { 'data-field': 'next-th' }, '–')));
    const spark = svg('svg', { class: 'spark', viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img', 'data-field': 'spark', 'data-points': '0' });
    card.append(spark, el('div', { class: 'spark-axis', 'aria-hidden': 'true' },
      el('span', { 'data-field': 'axis-from' }), el('span', { 'data-field': 'axis-max' })));
    return card;
  }

  function updateSignal(s, sig, cur, next) {
    const card = $('sig-' + s.key);
    const f = (name) => card.querySelector('[data-field="' + name + '"]');
    const v = sig[s.key];
    const value = f('value');
    value.textContent = pct(v, s.digits);
    value.classList.toggle('unavailable', v === null || v === undefined);

    let detail = '';
    if (s.key === 'error_rate_percent' && sig.sampled_at) {
      detail = sig.window_failures + ' failed of ' + sig.window_attempts + ' in the window';
      if (v === null || v === undefined) detail += ' (too few to count)';
    } else if ((v === null || v === undefined) && sig.sampled_at) {
      detail = 'off, or the last sample failed';
    }
    f('detail').textContent = detail;

    const curTh = cur && cur.index > 0 ? cur[s.key] : null;
    const nextTh = next ? next[s.key] : null;
    f('cur-name').textContent = cur ? 'This level (' + cur.name + ')' : 'This level';
    f('cur-th').textContent = !cur ? '–' : cur.index === 0 ? 'none (Normal)' : threshold(curTh);
    f('next-name').textContent = next ? 'Next level (' + next.name + ')' : 'Next level';
    f('next-th').textContent = !cur ? '–' : next ? threshold(nextTh) : 'none: most severe';

    const verdict = f('verdict');
    const over = v !== null && v !== undefined && nextTh !== null && nextTh !== undefined && v > nextTh;
    verdict.textContent = over ? 'Above ' + next.name + '\u2019s threshold' : '';
    verdict.classList.toggle('over', over);

    drawSpark(s, f('spark'), curTh, nextTh, f('axis-from'), f('axis-max'));
  }

  function drawSpark(s, box, curTh, nextTh, axisFrom, axisMax) {
    const pts = model.samples
      .map((x) => ({ t: Date.parse(x.sampled_at), v: x[s.key] }))
      .filter((p) => !Number.isNaN(p.t));
    const vals = pts.filter((p) => p.v !== null && p.v !== undefined).map((p) => p.v);
    let max = s.fixedMax;
    if (!max) {
      max = Math.max(1, ...vals, curTh || 0, nextTh || 0) * 1.15;
      max = Math.min(100, max);
    }
    const t0 = pts.length ? pts[0].t : 0;
    const t1 = pts.length ? pts[pts.length - 1].t : 0;
    const x = (t) => (t1 > t0 ? (t - t0) / (t1 - t0) * W : W);
    const y = (v) => H - Math.min(v, max) / max * H;

    const kids = [svg('rect', { class: 'frame', x: 0, y: 0, width: W, height: H })];
    for (const [th, cls] of [[curTh, 'current'], [nextTh, 'next']]) {
      if (th !== null && th !== undefined && th <= max) {
        kids.push(svg('line', { class: 'th ' + cls, x1: 0, x2: W, y1: y(th), y2: y(th) }));
      }
    }
    let d = '', pen = false, last = null;
    for (const p of pts) {
      if (p.v === null || p.v === undefined) { pen = false; continue; }
      d += (pen ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(p.v).toFixed(1);
      pen = true;
      last = p;
    }
    if (d) kids.push(svg('path', { class: 'line', d }));
    if (last) kids.push(svg('circle', { class: 'dot', cx: x(last.t), cy: y(last.v), r: 2.5 }));
    box.replaceChildren(...kids);
    box.setAttribute('data-points', String(pts.length));

    let label = s.name + ': no samples yet';
    if (vals.length) {
      label = s.name + ' over the last ' + fmtDuration(t1 - t0) + ': min ' + pct(Math.min(...vals), s.digits) +
        ', max ' + pct(Math.max(...vals), s.digits) + ', now ' + pct(pts[pts.length - 1].v, s.digits);
    } else if (pts.length) {
      label = s.name + ': unavailable over the last ' + fmtDuration(t1 - t0);
    }
    box.setAttribute('aria-label', label);
    axisFrom.textContent = pts.length > 1 ? '−' + fmtDuration(t1 - t0) : '';
    axisMax.textContent = 'scale 0–' + Math.round(max) + '%';
  }

  function renderHistory() {
    const rows = model.history.map((t) => {
      const change = t.from === t.to ? t.to + ' (unchanged)' : t.from + ' → ' + t.to;
      // data-label heads each cell when a narrow screen stacks the rows.
      return el('tr', { class: t.source === 'override' ? 'override' : '' },
        el('td', { class: 'num', 'data-label': '#' }, String(t.sequence)),
        el('td', { class: 'time', 'data-label': 'At' }, el('time', { datetime: t.at }, fmtTime(t.at))),
        el('td', { 'data-label': 'Change' }, change),
        el('td', { 'data-label': 'Source' }, t.source),
        el('td', { class: 'reason', 'data-label': 'Reason' }, t.reason));
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: '5' }, 'No transitions yet.')));
    document.querySelector('#history tbody').replaceChildren(...rows);
  }

  // ---- override form -----------------------------------------------------

  function say(ok, msg) {
    $('ov-status').textContent = ok ? msg : '';
    $('ov-error').textContent = ok ? '' : msg;
  }

  function explain(r) {
    if (r.status === 401) return 'Not authorised: the admin token is missing or wrong.';
    return (r.data && r.data.error) ? 'Refused (' + r.status + '): ' + r.data.error : 'Refused with HTTP ' + r.status + '.';
  }

  async function send(method, body, done) {
    const buttons = [$('ov-set'), $('ov-clear')];
    const wasDisabled = buttons.map((b) => b.disabled);
    buttons.forEach((b) => { b.disabled = true; });
    $('override-form').setAttribute('aria-busy', 'true');
    try {
      const r = await api(method, 'v1/override', body, $('ov-token').value.trim());
      if (r.ok) {
        applyState(r.data, false);
        say(true, done(r.data));
      } else {
        say(false, explain(r));
      }
    } catch (e) {
      say(false, 'Could not reach degraded: ' + e.message);
    } finally {
      $('override-form').removeAttribute('aria-busy');
      buttons.forEach((b, i) => { b.disabled = wasDisabled[i]; });
      renderOverride();
    }
  }

  $('override-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    if (!form.reportValidity()) return;
    const body = {
      level: $('ov-level').value,
      mode: form.elements.mode.value,
      ttl: $('ov-ttl').value.trim(),
      reason: $('ov-reason').value.trim(),
    };
    send('PUT', body, (st) => 'Override set: ' + body.mode + ' ' + body.level + ' for ' + body.ttl + '. Published level: ' + st.level + '.');
  });

  $('ov-clear').addEventListener('click', () => {
    send('DELETE', undefined, (st) => 'Override cleared. Published level: ' + st.level + '; automatic control resumes from it.');
  });

  // ---- live updates ------------------------------------------------------

  function setConn(state, text) {
    const c = $('conn');
    c.dataset.state = state;
    c.textContent = text;
  }

  let backoff = 1000;
  let opens = 0;
  function connect() {
    setConn('connecting', 'Connecting…');
    const es = new EventSource('v1/level/stream?samples=1');
    es.onopen = () => {
      backoff = 1000;
      opens++;
      $('conn').dataset.opens = String(opens);
      setConn('live', 'Live');
      // Whatever happened while we were away: the table may have been
      // reloaded, samples and history moved on. The state comes as the
      // stream's first event.
      loadLevels();
      loadSamples();
      loadHistory();
    };
    es.addEventListener('level', (e) => applyState(JSON.parse(e.data), true));
    es.addEventListener('sample', (e) => addSample(JSON.parse(e.data)));
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // Refused outright (such as 503 at the subscriber limit): EventSource
        // gives up, so retry with a growing delay.
        es.close();
        setConn('down', 'Disconnected: retrying in ' + Math.round(backoff / 1000) + 's');
        setTimeout(connect, backoff);
        backoff = Math.min(backoff * 2, 30000);
      } else {
        setConn('reconnecting', 'Reconnecting…');
      }
    };
  }

  renderSignals();
  renderHistory();
  setInterval(tick, 1000);
  connect();
}());
