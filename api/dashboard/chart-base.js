// chart-base.js: what the timeline charts (chart.js) are drawn with: the
// signals' names and units, SVG and HTML elements, the scales and axes of
// one chart, the marks, and the words for levels, admissions and marks.
// Plain JavaScript, no library. It defines one global, DegradedChartKit,
// which chart.js uses.
'use strict';
const DegradedChartKit = (function () {
  const NS = 'http://www.w3.org/2000/svg';
  // SIGNALS are the built-in signals: their title, unit, the key of their
  // value in a state document's signals object, and a fixed scale.
  const SIGNALS = {
    error_rate: { title: 'Error rate', unit: '%', key: 'error_rate_percent', digits: 2 },
    latency: { title: 'Latency', unit: 'ms', key: 'latency_ms', digits: 1 },
    cpu: { title: 'CPU', unit: '%', key: 'cpu_percent', digits: 1, fixedMax: 100 },
    memory: { title: 'Memory', unit: '%', key: 'memory_percent', digits: 1, fixedMax: 100 },
    cpu_pressure: { title: 'CPU pressure', unit: '%', key: 'cpu_pressure_percent', digits: 1 },
    memory_pressure: { title: 'Memory pressure', unit: '%', key: 'memory_pressure_percent', digits: 1 },
    io_pressure: { title: 'I/O pressure', unit: '%', key: 'io_pressure_percent', digits: 1 },
  };
  // MARGIN_LEFT holds the level names and the scale; the right margin
  // holds a column of threshold labels per set of thresholds.
  const MARGIN_LEFT = 118, LABEL_COLUMN = 86;
  const ROW = 15; // a level's row in a band chart, px
  const SIGNAL_H = 120;

  function info(name) {
    return SIGNALS[name] || { title: name, unit: '', key: name, custom: true };
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function html(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // severity maps a level index onto six colours whatever the table's
  // length: 0 is always Normal, the last level always the darkest.
  function severity(index, count) {
    if (index <= 0) return 0;
    if (count <= 2) return 5;
    return 1 + Math.round((index - 1) * 4 / Math.max(1, count - 2));
  }

  const pad = (n) => String(n).padStart(2, '0');
  function clock(ms, seconds) {
    const d = new Date(ms);
    return pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + (seconds ? ':' + pad(d.getUTCSeconds()) : '');
  }
  function stamp(ms) {
    const d = new Date(ms);
    return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' + clock(ms, true) + ' UTC';
  }
  const iso = (ms) => new Date(ms).toISOString();

  function fmt(s, v) {
    if (v === null || v === undefined || Number.isNaN(v)) return 'no value';
    return (s.custom || s.digits === undefined ? String(Number(v.toPrecision(6))) : v.toFixed(s.digits)) + s.unit;
  }

  // share is a fraction as a whole percentage, never 0% or 100% for one
  // strictly between them.
  function share(f) {
    const pct = f * 100;
    if (pct > 0 && pct < 1) return '<1%';
    if (pct > 99 && pct < 100) return '>99%';
    return Math.round(pct) + '%';
  }

  // admission says what a band sheds, "priority below 50" or with a
  // partial admission "priority below 30, and 77% of 30-49".
  function admission(band, table) {
    const lv = table && table.levels[band.index];
    const th = lv ? lv.priority_threshold : null;
    const p = band.partial;
    if (th === null) return '';
    if (p && p.from < th) {
      const part = share(1 - p.fraction) + ' of ';
      return p.from > 0 ? 'sheds priority below ' + p.from + ', and ' + part + p.from + '-' + (th - 1) : 'sheds ' + part + 'priority 0-' + (th - 1);
    }
    return th > 0 ? 'sheds priority below ' + th : 'sheds nothing';
  }

  // fromSeries turns a GET /v1/timeline?points=N document into the
  // numbers the charts use: every time in Unix milliseconds.
  function fromSeries(doc) {
    const ms = (s) => Date.parse(s);
    return {
      from: ms(doc.from), to: ms(doc.to), bucket: doc.bucket_ms, lines: doc.lines,
      tables: (doc.tables || []).map((t) => Object.assign({}, t, { at: ms(t.at) })),
      bands: (doc.bands || []).map((b) => Object.assign({}, b, { from: ms(b.from), to: ms(b.to) })),
      signals: (doc.signals || []).map((s) => ({ name: s.name, t: s.t.slice(), min: s.min.slice(), max: s.max.slice(), state: s.state.slice() })),
      marks: (doc.marks || []).map((m) => Object.assign({}, m, { at: ms(m.at) })),
    };
  }

  // tableAt is the table in force at t: the last one from at or before t
  // (the first one before any).
  function tableAt(tables, t) {
    let cur = tables[0] || null;
    for (const tb of tables) if (tb.at <= t) cur = tb;
    return cur;
  }

  function bandAt(bands, t) {
    let lo = 0, hi = bands.length - 1, found = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (bands[mid].from <= t) { found = bands[mid]; lo = mid + 1; } else hi = mid - 1;
    }
    return found && t <= Math.max(found.to, found.from) + 1 ? found : null;
  }

  // nearest is the index of the point of ts nearest to t, -1 for none.
  function nearest(ts, t) {
    if (!ts.length) return -1;
    let lo = 0, hi = ts.length - 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (ts[mid] <= t) lo = mid; else hi = mid;
    }
    return Math.abs(ts[lo] - t) <= Math.abs(ts[hi] - t) ? lo : hi;
  }

  function markLabel(m) {
    switch (m.kind) {
      case 'override':
      case 'fleet': {
        const who = m.actor ? ' · ' + m.actor : '';
        const what = m.kind === 'fleet' ? 'fleet ' : '';
        if (m.action === 'set') return what + m.mode + ' ' + m.level + who;
        return what + m.action + who;
      }
      case 'reload': return 'reload' + (m.actor ? ' · ' + m.actor : '');
      case 'restart': return 'restart';
    }
    return m.kind;
  }

  function markText(m) {
    let s = stamp(m.at) + ': ';
    switch (m.kind) {
      case 'override':
      case 'fleet':
        s += (m.kind === 'fleet' ? 'fleet override ' : 'override ') + m.action;
        if (m.level) s += ', ' + m.mode + ' ' + m.level;
        if (m.action === 'set' && m.ttl) s += ' for ' + m.ttl;
        if (m.actor) s += ', by ' + m.actor;
        if (m.reason) s += ': ' + m.reason;
        break;
      case 'reload':
        s += 'config reload' + (m.actor ? ' by ' + m.actor : '') + (m.changes && m.changes.length ? ': ' + m.changes.join('; ') : '');
        break;
      case 'restart':
        s += 'daemon started' + (m.changes && m.changes.length ? ' with a changed config: ' + m.changes.join('; ') : '');
        break;
      default:
        s += m.kind;
    }
    return s + (m.published ? ' (published ' + m.published + ')' : '');
  }

  // ticks are the time axis' ticks: a round step that fits the width.
  function ticks(t0, t1, width) {
    const steps = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 10800, 21600, 43200, 86400].map((s) => s * 1000);
    const want = Math.max(2, Math.floor(width / 90));
    const step = steps.find((s) => (t1 - t0) / s <= want) || steps[steps.length - 1];
    const out = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
    return { step, out };
  }

  // ---- one chart ---------------------------------------------------------

  // frame is one chart: its svg, its scales and its hover layer.
  function frame(ctx, title, height, kind) {
    const box = html('figure', 'tl-chart tl-' + kind);
    const head = html('figcaption', 'tl-title', title);
    const root = svg('svg', { class: 'tl-svg', width: ctx.width, height, viewBox: '0 0 ' + ctx.width + ' ' + height, role: 'img' });
    const x0 = MARGIN_LEFT, x1 = ctx.width - 18 - LABEL_COLUMN * Math.max(1, ctx.thresholds.length);
    root.dataset.x0 = x0; root.dataset.x1 = x1;
    root.dataset.t0 = ctx.from; root.dataset.t1 = ctx.to;
    box.append(head, root);
    const f = {
      box, root, height, x0, x1,
      x: (t) => x0 + (Math.min(Math.max(t, ctx.from), ctx.to) - ctx.from) / Math.max(1, ctx.to - ctx.from) * (x1 - x0),
      t: (x) => ctx.from + (x - x0) / Math.max(1, x1 - x0) * (ctx.to - ctx.from),
    };
    root.append(svg('rect', { class: 'tl-plot', x: x0, y: 0, width: x1 - x0, height }));
    return f;
  }

  function drawMarks(ctx, f, top, bottom, flags) {
    const g = svg('g', { class: 'tl-marks' });
    ctx.marks.forEach((m, i) => {
      const x = f.x(m.at);
      const line = svg('line', { class: 'mark mark-' + m.kind + (m.action ? ' mark-' + m.action : ''), x1: x, x2: x, y1: top, y2: bottom });
      Object.assign(line.dataset, { at: iso(m.at), kind: m.kind, action: m.action || '', actor: m.actor || '' });
      g.append(line);
      if (flags) {
        const y = 10 + (i % 3) * 11;
        const flag = svg('g', { class: 'flag flag-' + m.kind });
        flag.append(svg('path', { d: 'M' + x + ' ' + (y - 8) + 'l6 4l-6 4z' }));
        flag.append(svg('text', { x: x + 8, y: y }, markLabel(m)));
        flag.append(svg('title', {}, markText(m)));
        Object.assign(flag.dataset, { at: iso(m.at), kind: m.kind, actor: m.actor || '' });
        g.append(flag);
      }
    });
    f.root.append(g);
  }

  function drawAxis(ctx, f, y) {
    const g = svg('g', { class: 'tl-axis' });
    const { step, out } = ticks(ctx.from, ctx.to, f.x1 - f.x0);
    for (const t of out) {
      const x = f.x(t);
      g.append(svg('line', { x1: x, x2: x, y1: 0, y2: y, class: 'grid' }));
      g.append(svg('text', { x, y: y + 13, 'text-anchor': 'middle' }, clock(t, step < 60000)));
    }
    f.root.append(g);
  }

  return {
    SIGNALS, ROW, SIGNAL_H, LABEL_COLUMN, info, svg, html, severity, clock, stamp, iso, fmt, admission, fromSeries,
    tableAt, bandAt, nearest, markText, frame, drawMarks, drawAxis,
  };
}());
