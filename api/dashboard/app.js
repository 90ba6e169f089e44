// degraded dashboard: plain JavaScript, no build step, nothing loaded from
// elsewhere. It reads the JSON API of the daemon that serves it and follows
// the level over Server-Sent Events. All paths are relative, so the page also
// works behind a proxy that mounts the daemon under a prefix.
'use strict';
(function () {
  const HISTORY_LIMIT = 50;
  const SAMPLES_SPAN_MS = 10 * 60 * 1000; // what the daemon keeps: about ten minutes
  const SAMPLES_MAX = 1200;
  // FLEET_GAP_MS is the least time between two reads of GET /v1/fleet: the
  // level and sample events ask for one, at most this often.
  const FLEET_GAP_MS = 1000;
  // RECONNECT_WINDOW_MS is how long a lost stream is "Reconnecting…"
  // before the page says it is disconnected, and for how long, and the
  // badge stops looking live. EventSource retries every 2s (retry: 2000),
  // so a daemon's restart fits in it.
  const RECONNECT_WINDOW_MS = 5000;
  // DEFAULT_TTL is the override form's expiry when no override is active.
  const DEFAULT_TTL = '15m';
  // BUILTIN are the built-in signals in the order the levels package names
  // them; custom signals follow, sorted by name. name is the signal's name
  // in signals.status, key its value's name in the signals object and its
  // threshold's in GET /v1/levels.
  const BUILTIN = [
    { name: 'error_rate', key: 'error_rate_percent', title: 'Error rate', unit: '%', digits: 2 },
    { name: 'latency', key: 'latency_ms', title: 'Latency', unit: 'ms', digits: 1 },
    { name: 'cpu', key: 'cpu_percent', title: 'CPU', unit: '%', digits: 1, fixedMax: 100 },
    { name: 'memory', key: 'memory_percent', title: 'Memory', unit: '%', digits: 1, fixedMax: 100 },
    { name: 'cpu_pressure', key: 'cpu_pressure_percent', avg60: 'cpu_pressure_avg60_percent', title: 'CPU pressure', unit: '%', digits: 1 },
    { name: 'memory_pressure', key: 'memory_pressure_percent', avg60: 'memory_pressure_avg60_percent', title: 'Memory pressure', unit: '%', digits: 1 },
    { name: 'io_pressure', key: 'io_pressure_percent', avg60: 'io_pressure_avg60_percent', title: 'I/O pressure', unit: '%', digits: 1 },
  ].map((s) => Object.assign(s, {
    id: 'sig-' + s.key,
    value: (sig) => sig[s.key],
    threshold: (level) => level[s.key],
  }));
  // STATES explains each state but available, shown on a signal's card.
  const STATES = {
    warming: 'Warming up: not enough history yet',
    failed: 'Failed: the last reading failed or is stale',
    absent: 'Absent: nothing to measure',
  };
  const SVG = 'http://www.w3.org/2000/svg';
  const W = 300, H = 60; // sparkline view box

  const model = { levels: [], state: null, signals: null, configured: null, samples: [], history: [], wouldShed: null, stateFile: null, fleet: null };
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

  const missing = (v) => v === null || v === undefined;

  // number shows a value of s with its unit: percentages and latencies to
  // the signal's digits, custom values as they are (six significant digits).
  function number(s, v) {
    return (s.custom ? String(Number(v.toPrecision(6))) : v.toFixed(s.digits)) + s.unit;
  }

  function fmtValue(s, v) {
    return missing(v) ? 'unavailable' : number(s, v);
  }

  function fmtThreshold(s, v) {
    return missing(v) ? 'never triggers' : '> ' + v + s.unit;
  }

  function customSignal(name) {
    return {
      name, key: name, title: name, unit: '', custom: true, id: 'sig-custom-' + name,
      value: (sig) => (sig.custom || {})[name],
      threshold: (level) => (level.custom || {})[name],
    };
  }

  // configured lists the signals the daemon has configured (every signal
  // whose status is not off), built-in ones first, then custom ones by name.
  function configured(sig) {
    const status = (sig && sig.status) || {};
    const on = (name) => status[name] !== undefined && status[name] !== 'off';
    const builtin = new Set(BUILTIN.map((s) => s.name));
    const custom = Object.keys(status).filter((n) => !builtin.has(n) && on(n)).sort();
    return BUILTIN.filter((s) => on(s.name)).concat(custom.map(customSignal));
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

  // ago shows how long ago a moment was, as "3s ago"; tick() keeps it current.
  function ago(node, iso) {
    node.dataset.ago = iso;
    const t = Date.parse(iso);
    node.textContent = Number.isNaN(t) ? '–' : fmtDuration(Date.now() - t) + ' ago';
  }

  function tick() {
    for (const node of document.querySelectorAll('[data-at]')) {
      if (node.dataset.at) relative(node, node.dataset.at);
    }
    for (const node of document.querySelectorAll('[data-ago]')) ago(node, node.dataset.ago);
    renderConn();
    fillForm();
  }

  // severity maps a level index onto the six badge colours, whatever the
  // table's length: 0 is always Normal, the last level always the darkest.
  const severity = DegradedCharts.severity;

  function levelByName(name) {
    return model.levels.find((l) => l.name === name);
  }

  // share is a fraction as a whole percentage, never 0% or 100% for one
  // strictly between 0 and 1.
  function share(f) {
    const pct = f * 100;
    if (pct > 0 && pct < 1) return '<1%';
    if (pct > 99 && pct < 100) return '>99%';
    return Math.round(pct) + '%';
  }

  // shedText says what the published admission sheds: "priority below
  // 50", or with a partial admission "priority below 30, and 77% of
  // 30-49" (the share shed, 1 - fraction, of the band from..threshold-1).
  function shedText(st) {
    const th = st.priority_threshold;
    const p = st.partial;
    let what;
    if (p && p.from < th) {
      const band = share(1 - p.fraction) + ' of ';
      what = p.from > 0 ? 'priority below ' + p.from + ', and ' + band + p.from + '-' + (th - 1)
        : band + 'priority 0-' + (th - 1);
    } else if (th > 0) {
      what = 'priority below ' + th;
    } else {
      return 'nothing (Normal)';
    }
    return st.shadow ? what + ' (shadow mode: counted, not shed)' : what;
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

  // loadLevels re-reads the table; of overlapping reads, the last one wins.
  let levelsAsked = 0;
  const loadLevels = () => {
    const ask = ++levelsAsked;
    return load('v1/levels', (d) => {
      if (ask !== levelsAsked) return;
      model.levels = d.levels || [];
      renderLevelsSelect(); renderState(); renderSignals(); renderFleet();
    });
  };
  const loadSamples = () => load('v1/samples', (d) => { model.samples = d.samples || []; renderSignals(); });
  const loadHistory = () => load('v1/history?limit=' + HISTORY_LIMIT, (d) => { model.history = d.transitions || []; renderHistory(); });
  // loadLive reads what only GET /v1/level carries, outside the stream's
  // state events: the would-shed counts, and whether the state file can be
  // saved (state_file: null, or why not and whether the state is held).
  const loadLive = () => load('v1/level', (d) => {
    model.wouldShed = (d.reports && d.reports.would_shed) || null;
    model.stateFile = d.state_file || null;
    renderShadow(); renderUnsaved();
  });

  // loadFleet reads GET /v1/fleet, one read at a time and at most once per
  // FLEET_GAP_MS; a call in between is answered by one read after the gap.
  // A 404 means fleet mode is off: no panel, and no read again until the
  // page is loaded again.
  const fleetRead = { off: false, busy: false, again: false, last: 0, timer: null };
  function loadFleet() {
    const f = fleetRead;
    if (f.off) return;
    if (f.busy) { f.again = true; return; }
    const wait = f.last + FLEET_GAP_MS - Date.now();
    if (wait > 0) {
      if (!f.timer) f.timer = setTimeout(() => { f.timer = null; loadFleet(); }, wait);
      return;
    }
    f.busy = true;
    f.last = Date.now();
    api('GET', 'v1/fleet').then((r) => {
      if (r.status === 404) {
        f.off = true;
        model.fleet = null;
      } else if (r.ok && r.data) {
        model.fleet = r.data;
      }
      renderFleet();
    }).catch(() => {
      // The event stream reports the connection; the panel keeps the last read.
    }).finally(() => {
      f.busy = false;
      if (f.again) { f.again = false; loadFleet(); }
    });
  }

  // ---- state -------------------------------------------------------------

  // applyState shows a state document. The stream is authoritative (after
  // a restart without a state file the sequence starts again); an answer to
  // our own PUT or DELETE may arrive after a newer event, and is dropped then.
  function applyState(st, fromStream) {
    const prev = model.state;
    if (!fromStream && prev && st.sequence < prev.sequence) return;
    model.state = st;
    const changed = prev && prev.sequence !== st.sequence;
    // A reload may change the table (thresholds, levels) with the level,
    // or only the set of signals: both re-read it.
    if (!setSignals(st.signals) && (changed || !levelByName(st.level))) loadLevels();
    if (!prev || changed) loadHistory();
    loadLive();
    loadFleet();
    renderState();
    renderSignals();
    if (fromStream) timelineView.state(st);
  }

  function addSample(sig) {
    const s = model.samples;
    if (s.length && s[s.length - 1].sampled_at === sig.sampled_at) return;
    s.push(sig);
    const newest = Date.parse(sig.sampled_at);
    while (s.length > SAMPLES_MAX || (s.length > 1 && newest - Date.parse(s[0].sampled_at) > SAMPLES_SPAN_MS)) s.shift();
    setSignals(sig);
    renderSignals();
    timelineView.sample(sig);
    loadLive();
    loadFleet();
  }

  // setSignals takes the latest signals object. When the set of configured
  // signals changed (a reload), it re-reads the table for their thresholds
  // and says so.
  function setSignals(sig) {
    model.signals = sig;
    if (!sig || !sig.status) return false; // before the first health check
    const names = configured(sig).map((s) => s.name).join(' ');
    const changed = model.configured !== null && names !== model.configured;
    model.configured = names;
    if (changed) loadLevels();
    return changed;
  }

  // ---- rendering ---------------------------------------------------------

  function renderState() {
    const st = model.state;
    if (!st) return;
    const badge = $('badge');
    // Level 0 is always Normal; any other level's colour depends on the
    // table's length, so until the table has loaded it has none.
    const sev = st.index === 0 ? 0 : model.levels.length ? severity(st.index, model.levels.length) : 'none';
    badge.classList.remove(...Array.from(badge.classList).filter((c) => c.startsWith('sev-')));
    badge.classList.add('sev-' + sev);
    badge.dataset.level = st.level;
    badge.dataset.sequence = String(st.sequence);
    $('level-name').textContent = st.level;
    $('level-index').textContent = st.index === 0
      ? 'Level 0: everything is served'
      : 'Level ' + st.index + (model.levels.length ? ' of ' + (model.levels.length - 1) : '');
    $('threshold-label').textContent = st.shadow ? 'Would shed' : 'Sheds';
    $('threshold').textContent = shedText(st);
    let source = st.source === 'override' ? 'operator override' : st.source === 'fleet' ? 'fleet override' : 'automatic';
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
    renderShadow();
    renderConn();
  }

  // renderShadow shows the SHADOW banner while the state says shadow, with
  // what would have been shed by level, in table order.
  function renderShadow() {
    const st = model.state;
    $('shadow').hidden = !(st && st.shadow);
    const counts = model.wouldShed || {};
    const names = model.levels.map((l) => l.name).concat(['unknown']);
    for (const n of Object.keys(counts)) if (!names.includes(n)) names.push(n);
    const parts = names.filter((n) => counts[n] > 0).map((n) => n + ' ' + counts[n]);
    $('would-shed').textContent = parts.length ? parts.join(', ') : 'none yet';
  }

  // renderUnsaved shows the STATE NOT SAVED banner while GET /v1/level's
  // state_file says saves fail: why, since when, and, when the state is
  // held, that nothing on this page's level can change until one succeeds.
  function renderUnsaved() {
    const f = model.stateFile;
    $('unsaved').hidden = !f;
    if (!f) return;
    $('unsaved-since').textContent = fmtTime(f.failing_since);
    $('unsaved-error').textContent = f.error;
    $('unsaved-then').textContent = f.held
      ? 'HELD: the level, its signals and overrides shown here cannot change until a save succeeds; overrides are refused (503). Free the disk.'
      : 'The level still changes, but a restart goes back to the state last saved; overrides are refused (503) until a save succeeds.';
  }

  function renderOverride() {
    const o = model.state && model.state.override;
    const cur = $('override-current');
    cur.replaceChildren();
    cur.classList.toggle('active', !!o);
    $('ov-clear').disabled = !o;
    if (!o) {
      cur.textContent = 'No override is active: the signals decide.';
    } else {
      describeOverride(cur, o);
    }
    fillForm();
  }

  // describeOverride is an override in words: "Pinned at Major until …",
  // then its reason, appended to node.
  function describeOverride(node, o) {
    const exp = el('span', {});
    setTimeField(exp, o.expires_at, '–', true);
    node.append(
      (o.mode === 'pin' ? 'Pinned at ' : 'Floored at ') + o.level + ' until ', exp,
      o.actor ? el('span', { class: 'actor' }, ', set by ' + o.actor) : '',
      el('br'), 'Reason: ' + o.reason);
  }

  // renderFleet shows the fleet panel while fleet mode is on: the etcd
  // connection, the fleet override, the levels and the error rate summed
  // over the live instances, and one row per instance.
  function renderFleet() {
    const f = model.fleet;
    $('fleet').hidden = !f;
    if (!f) return;
    $('fleet-name').textContent = f.name;
    $('fleet-instance').textContent = f.instance;
    const conn = $('fleet-conn');
    conn.dataset.state = f.connected ? 'connected' : 'disconnected';
    conn.textContent = f.connected ? 'Connected to etcd'
      : 'Disconnected: etcd cannot be reached. This instance keeps the last fleet override it saw and its local error rate; the view below is the last one read.';

    const ov = $('fleet-override');
    ov.replaceChildren();
    ov.classList.toggle('active', !!f.override);
    if (f.override) describeOverride(ov, f.override);
    else ov.textContent = 'none';

    const counts = f.levels || {};
    const names = model.levels.map((l) => l.name);
    for (const n of Object.keys(counts).sort()) if (!names.includes(n)) names.push(n);
    const parts = names.filter((n) => counts[n] > 0).map((n) => n + ' ' + counts[n]);
    $('fleet-levels').textContent = parts.length ? parts.join(', ') : 'no instance reported';

    $('fleet-errors').textContent = (missing(f.error_rate_percent) ? 'no attempts reported' : f.error_rate_percent.toFixed(2) + '%') +
      ' (' + f.window_failures + ' failed of ' + f.window_attempts + ' attempts)';

    // The aggregator: the instance that sums the reports, its term, when
    // its last sum was published, and whether that sum is stale (then the
    // fleet error rate is this instance's own).
    const ag = f.aggregator;
    const agEl = $('fleet-aggregator');
    agEl.dataset.stale = ag && ag.stale ? 'true' : 'false';
    if (!ag) {
      agEl.textContent = 'none yet: no instance has summed the reports';
    } else {
      const when = el('span', { class: 'time' });
      ago(when, ag.at);
      agEl.replaceChildren((ag.instance === f.instance ? ag.instance + ' (this one)' : ag.instance) + ', term ' + ag.term + ', summed ', when,
        ag.stale ? '. Stale: this instance judges by its own error rate until a new sum arrives' : '');
    }

    const rows = (f.instances || []).map((i) => {
      const seen = el('td', { class: 'time' });
      ago(seen, i.seen_at);
      return el('tr', { class: i.instance === f.instance ? 'self' : '', 'data-instance': i.instance },
        el('td', {}, i.instance === f.instance ? i.instance + ' (this one)' : i.instance),
        el('td', {}, i.level),
        el('td', {}, i.source),
        seen);
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: '4' }, 'No live instance in the view.')));
    document.querySelector('#fleet-instances tbody').replaceChildren(...rows);
  }

  function renderLevelsSelect() {
    const sel = $('ov-level');
    const chosen = sel.value || (model.state ? model.state.level : '');
    sel.replaceChildren(...model.levels.map((l) =>
      el('option', { value: l.name }, l.name + ' — sheds priority < ' + l.priority_threshold)));
    if (levelByName(chosen)) sel.value = chosen;
    fillForm(); // the override's level may not have been an option before
  }

  // renderSignals keeps one card per configured signal, in order: a
  // reload that adds or removes a signal adds or removes its card.
  function renderSignals() {
    const box = $('signals');
    const sig = model.signals || {};
    const list = configured(sig);
    const ids = list.map((s) => s.id);
    if (ids.join(' ') !== Array.from(box.children, (c) => c.id).join(' ')) {
      box.replaceChildren(...list.map((s) => $(s.id) || signalCard(s)));
    }
    const st = model.state;
    const cur = st ? model.levels[st.index] : null;
    for (const s of list) updateSignal(s, sig, cur);

    const span = $('samples-span');
    const n = model.samples.length;
    if (n > 1) {
      const ms = Date.parse(model.samples[n - 1].sampled_at) - Date.parse(model.samples[0].sampled_at);
      span.textContent = 'Sparklines show the last ' + fmtDuration(ms) + ' (' + n + ' health checks). Dashed lines: this level\'s threshold and the next one.';
    } else if (sig.sampled_at) {
      span.textContent = 'Last health check at ' + fmtTime(sig.sampled_at) + '.';
    }
    if (sig.status && !list.length) span.textContent = 'No signal is configured: only overrides change the level.';
  }

  function signalCard(s) {
    const id = s.id;
    const card = el('article', { class: 'signal', id, 'aria-labelledby': id + '-h', 'data-signal': s.name },
      el('h3', { id: id + '-h' }, s.title),
      el('p', { class: 'value', 'data-field': 'value' }, '–'),
      el('p', { class: 'state', 'data-field': 'state' }),
      el('p', { class: 'detail', 'data-field': 'detail' }),
      el('p', { class: 'verdict', 'data-field': 'verdict' }),
      el('dl', { class: 'thresholds' },
        el('dt', {}, el('span', { class: 'key current', 'aria-hidden': 'true' }), el('span', { 'data-field': 'cur-name' }, 'This level')),
        el('dd', { 'data-field': 'cur-th' }, '–'),
        el('dt', {}, el('span', { class: 'key next', 'aria-hidden': 'true' }), el('span', { 'data-field': 'next-name' }, 'Next threshold')),
        el('dd', { 'data-field': 'next-th' }, '–')));
    const spark = svg('svg', { class: 'spark', viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none', role: 'img', 'data-field': 'spark', 'data-points': '0' });
    card.append(spark, el('div', { class: 'spark-axis', 'aria-hidden': 'true' },
      el('span', { 'data-field': 'axis-from' }), el('span', { 'data-field': 'axis-max' })));
    return card;
  }

  // nextThreshold is the least severe level above cur with a threshold
  // for s: the next level this signal alone can ask for.
  function nextThreshold(s, cur) {
    const next = model.levels.find((l) => l.index > cur.index && !missing(s.threshold(l)));
    return next ? { level: next, th: s.threshold(next) } : null;
  }

  function detailOf(s, sig, v) {
    if (!sig.sampled_at) return '';
    switch (s.name) {
      case 'error_rate':
        return sig.window_failures + ' failed of ' + sig.window_attempts + ' in the window' + (missing(v) ? ' (too few to count)' : '');
      case 'latency':
        return sig.latency_observations + ' observations in the window' + (missing(v) ? ' (too few to count)' : '');
    }
    if (s.avg60) return 'avg60 ' + fmtValue(s, sig[s.avg60]);
    return '';
  }

  function updateSignal(s, sig, cur) {
    const card = $(s.id);
    const f = (name) => card.querySelector('[data-field="' + name + '"]');
    const v = s.value(sig);
    const value = f('value');
    value.textContent = fmtValue(s, v);
    value.classList.toggle('unavailable', missing(v));

    const state = (sig.status || {})[s.name] || 'available';
    card.dataset.state = state;
    f('state').textContent = STATES[state] || '';
    f('detail').textContent = detailOf(s, sig, v);

    const curTh = cur && cur.index > 0 ? s.threshold(cur) : null;
    const next = cur ? nextThreshold(s, cur) : null;
    const nextTh = next ? next.th : null;
    f('cur-name').textContent = cur ? 'This level (' + cur.name + ')' : 'This level';
    f('cur-th').textContent = !cur ? '–' : cur.index === 0 ? 'none (Normal)' : fmtThreshold(s, curTh);
    f('next-name').textContent = next ? 'Next threshold (' + next.level.name + ')' : 'Next threshold';
    f('next-th').textContent = !cur ? '–' : next ? fmtThreshold(s, nextTh) : 'none above';

    const verdict = f('verdict');
    const over = !missing(v) && next !== null && v > nextTh;
    verdict.textContent = over ? 'Above ' + next.level.name + '\u2019s threshold' : '';
    verdict.classList.toggle('over', over);

    drawSpark(s, f('spark'), curTh, nextTh, f('axis-from'), f('axis-max'));
  }

  // scale is the sparkline's range: 0 to 100 for CPU and memory, else
  // from the values and thresholds shown, with a margin (percentages end
  // at 100; custom values may be negative).
  function scale(s, vals, ths) {
    if (s.fixedMax) return { lo: 0, hi: s.fixedMax };
    const all = vals.concat(ths.filter((th) => !missing(th)));
    let lo = Math.min(0, ...all), hi = Math.max(1, ...all);
    const margin = (hi - lo) * 0.15;
    hi += margin;
    if (lo < 0) lo -= margin;
    if (s.unit === '%') hi = Math.min(100, hi);
    return { lo, hi };
  }

  function drawSpark(s, box, curTh, nextTh, axisFrom, axisMax) {
    const pts = model.samples
      .map((x) => ({ t: Date.parse(x.sampled_at), v: s.value(x) }))
      .filter((p) => !Number.isNaN(p.t));
    const vals = pts.filter((p) => !missing(p.v)).map((p) => p.v);
    const { lo, hi } = scale(s, vals, [curTh, nextTh]);
    const t0 = pts.length ? pts[0].t : 0;
    const t1 = pts.length ? pts[pts.length - 1].t : 0;
    const x = (t) => (t1 > t0 ? (t - t0) / (t1 - t0) * W : W);
    const y = (v) => H - (Math.min(Math.max(v, lo), hi) - lo) / (hi - lo) * H;

    const kids = [svg('rect', { class: 'frame', x: 0, y: 0, width: W, height: H })];
    for (const [th, cls] of [[curTh, 'current'], [nextTh, 'next']]) {
      if (!missing(th) && th >= lo && th <= hi) {
        kids.push(svg('line', { class: 'th ' + cls, x1: 0, x2: W, y1: y(th), y2: y(th) }));
      }
    }
    let d = '', pen = false, last = null;
    for (const p of pts) {
      if (missing(p.v)) { pen = false; continue; }
      d += (pen ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(p.v).toFixed(1);
      pen = true;
      last = p;
    }
    if (d) kids.push(svg('path', { class: 'line', d }));
    if (last) kids.push(svg('circle', { class: 'dot', cx: x(last.t), cy: y(last.v), r: 2.5 }));
    box.replaceChildren(...kids);
    box.setAttribute('data-points', String(pts.length));

    let label = s.title + ': no samples yet';
    if (vals.length) {
      label = s.title + ' over the last ' + fmtDuration(t1 - t0) + ': min ' + fmtValue(s, Math.min(...vals)) +
        ', max ' + fmtValue(s, Math.max(...vals)) + ', now ' + fmtValue(s, pts[pts.length - 1].v);
    } else if (pts.length) {
      label = s.title + ': unavailable over the last ' + fmtDuration(t1 - t0);
    }
    box.setAttribute('aria-label', label);
    axisFrom.textContent = pts.length > 1 ? '−' + fmtDuration(t1 - t0) : '';
    const round = (v) => String(Number(v.toPrecision(3)));
    axisMax.textContent = 'scale ' + round(lo) + '–' + round(hi) + s.unit;
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
        el('td', { class: 'actor', 'data-label': 'By' }, t.actor || '–'),
        el('td', { class: 'reason', 'data-label': 'Reason' }, t.reason));
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: '6' }, 'No transitions yet.')));
    document.querySelector('#history tbody').replaceChildren(...rows);
  }

  // ---- override form -----------------------------------------------------

  // The form starts from the active local override (its level, mode,
  // reason and the time it has left, rounded up to the minute), so that
  // "Set override" renews it as it is, a floor staying a floor. Once the
  // operator edits the form it is theirs, until a set or a clear succeeds.
  let formDirty = false;
  // filledFrom names the override the form was last filled from ('' for
  // none); REFILL makes the next fillForm fill it again.
  const REFILL = '*';
  let filledFrom = '';

  // goDuration is a time left as a Go duration the API takes, rounded up
  // to the minute: "10m", "1h", "2h30m".
  function goDuration(ms) {
    const m = Math.max(1, Math.ceil(ms / 60000));
    const h = Math.floor(m / 60), r = m % 60;
    return (h ? h + 'h' : '') + (r || !h ? r + 'm' : '');
  }

  function fillForm() {
    if (formDirty) return;
    const o = model.state && model.state.override;
    const key = o ? [o.level, o.mode, o.set_at, o.expires_at].join(' ') : '';
    const form = $('override-form');
    const hint = $('ov-renew-hint');
    if (o) {
      const left = Date.parse(o.expires_at) - Date.now();
      if (levelByName(o.level)) $('ov-level').value = o.level;
      form.elements.mode.value = o.mode;
      $('ov-ttl').value = goDuration(left);
      if (key !== filledFrom) $('ov-reason').value = o.reason;
      hint.hidden = false;
      hint.textContent = 'Filled in from the active ' + o.mode + ' (' + fmtDuration(Math.max(0, left)) +
        ' left): "Set override" renews it as it is; a longer time extends it.';
    } else if (filledFrom) { // the override the form showed has ended
      form.elements.mode.value = 'pin';
      $('ov-ttl').value = DEFAULT_TTL;
      $('ov-reason').value = '';
      hint.hidden = true;
    }
    filledFrom = key;
  }

  $('override-form').addEventListener('input', (ev) => {
    if (ev.target.id === 'ov-token') return; // typing the token edits nothing the form shows
    formDirty = true;
    $('ov-renew-hint').hidden = true;
  });

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
        formDirty = false;
        filledFrom = REFILL; // follow the override now in force, or go back to the defaults
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

  // lostAt is when the stream was lost (Date.now()); null while it is
  // live, and before it first opened.
  let lostAt = null;

  // renderConn shows a lost stream: "Reconnecting…" for the reconnect
  // window, then "Disconnected for 1m 20s", counting, with the badge
  // greyed and headed as the last level known, not a live one. tick()
  // keeps it current.
  function renderConn() {
    const badge = $('badge');
    const note = $('badge-stale');
    if (lostAt === null) {
      badge.classList.remove('stale');
      badge.dataset.live = model.state ? 'true' : 'false';
      $('level-heading').textContent = 'Current level';
      note.hidden = true;
      return;
    }
    const gone = Date.now() - lostAt;
    if (gone < RECONNECT_WINDOW_MS) {
      setConn('reconnecting', 'Reconnecting…');
      return;
    }
    const text = 'Disconnected for ' + fmtDuration(gone);
    setConn('down', text);
    badge.classList.add('stale');
    badge.dataset.live = 'false';
    $('level-heading').textContent = 'Last known level';
    note.hidden = false;
    note.textContent = text + ': this is the last level the daemon published, not a live one.';
  }

  let backoff = 1000;
  let opens = 0;
  function connect() {
    if (lostAt === null) setConn('connecting', 'Connecting…');
    const es = new EventSource('v1/level/stream?samples=1');
    es.onopen = () => {
      backoff = 1000;
      opens++;
      $('conn').dataset.opens = String(opens);
      lostAt = null;
      setConn('live', 'Live');
      renderConn();
      // Whatever happened while we were away: the table may have been
      // reloaded, samples and history moved on. The state comes as the
      // stream's first event.
      loadLevels();
      loadSamples();
      loadHistory();
      timelineView.opened(); // the first time, its first load; after, fill in what the page missed
    };
    es.addEventListener('level', (e) => applyState(JSON.parse(e.data), true));
    es.addEventListener('sample', (e) => addSample(JSON.parse(e.data)));
    es.onerror = () => {
      if (lostAt === null) lostAt = Date.now();
      timelineView.start(); // a daemon that cannot stream may still have a timeline
      if (es.readyState === EventSource.CLOSED) {
        // Refused outright (such as 503 at the subscriber limit): EventSource
        // gives up, so retry with a growing delay.
        es.close();
        setTimeout(connect, backoff);
        backoff = Math.min(backoff * 2, 30000);
      }
      renderConn();
    };
  }

  // The History view (history.js) reads the recorded timeline; this page
  // hands it the live samples and level events.
  const timelineView = DegradedHistory.init({ api });
  renderSignals();
  renderHistory();
  setInterval(tick, 1000);
  loadFleet();
  connect();
}());
