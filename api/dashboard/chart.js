// chart.js: the timeline charts, drawn in plain SVG with no library and
// nothing loaded from elsewhere (chart-base.js, loaded before it, holds
// the pieces). The dashboard's History view and the report of `degraded
// replay --format html` both draw with it: level bands with partial
// admission shaded, one chart per signal with the thresholds of the tables
// in force, and marks for overrides, reloads and restarts. It defines one
// global, DegradedCharts.
'use strict';
const DegradedCharts = (function () {
  const {
    SIGNALS, ROW, SIGNAL_H, LABEL_COLUMN, info, svg, html, severity, stamp, iso, fmt, admission, fromSeries,
    tableAt, bandAt, nearest, markText, frame, drawMarks, drawAxis,
  } = DegradedChartKit;

  // ---- level bands -------------------------------------------------------

  function levelNames(tables) {
    let names = ['Normal'];
    for (const tb of tables) if (tb.levels.length > names.length) names = tb.levels.map((l) => l.name);
    return names;
  }

  function drawLane(ctx, lane, withAxis) {
    const names = levelNames(lane.tables.length ? lane.tables : ctx.tables);
    const flags = lane.flags ? 40 : 0;
    const bottom = flags + names.length * ROW;
    const height = bottom + (withAxis ? 18 : 4);
    const f = frame(ctx, lane.title, height, 'lane');
    f.root.dataset.lane = lane.id;
    f.root.dataset.bottom = String(bottom);
    f.root.dataset.row = String(ROW);
    const y = (index) => bottom - (index + 1) * ROW;
    const g = svg('g', { class: 'tl-levels' });
    names.forEach((n, i) => {
      g.append(svg('text', { class: 'ylabel', x: f.x0 - 6, y: y(i) + ROW - 4, 'text-anchor': 'end' }, n));
      g.append(svg('line', { class: 'row', x1: f.x0, x2: f.x1, y1: y(i), y2: y(i) }));
    });
    f.root.append(g);
    const bands = svg('g', { class: 'tl-bands' });
    for (const b of lane.bands) {
      const tb = tableAt(lane.tables.length ? lane.tables : ctx.tables, b.from);
      const count = tb ? tb.levels.length : names.length;
      const index = Math.max(0, b.index);
      const x = f.x(b.from), w = Math.max(1, f.x(b.to) - x);
      const rect = svg('rect', { class: 'band sev-' + severity(index, count) + (b.mixed ? ' mixed' : ''), x, y: y(index), width: w, height: (index + 1) * ROW });
      Object.assign(rect.dataset, { from: iso(b.from), to: iso(b.to), level: b.level, source: b.source });
      rect.append(svg('title', {}, b.level + ' (' + b.source + ') ' + stamp(b.from) + ' – ' + stamp(b.to) + '. ' + admission(b, tb)));
      bands.append(rect);
      if (b.partial) {
        const part = svg('rect', { class: 'partial', x, y: y(index), width: w, height: ROW });
        Object.assign(part.dataset, { from: iso(b.from), fraction: String(b.partial.fraction) });
        bands.append(part);
      }
    }
    f.root.append(bands);
    if (lane.overlay) {
      let d = '';
      for (const b of lane.overlay.bands) {
        const yy = y(Math.max(0, b.index));
        d += (d ? 'L' : 'M') + f.x(b.from).toFixed(1) + ' ' + yy + 'L' + f.x(b.to).toFixed(1) + ' ' + yy;
      }
      if (d) {
        const p = svg('path', { class: 'overlay', d });
        p.dataset.lane = lane.overlay.id;
        f.root.append(p);
      }
    }
    drawMarks(ctx, f, flags ? 2 : 0, bottom, !!lane.flags);
    if (withAxis) drawAxis(ctx, f, bottom);
    f.root.setAttribute('aria-label', lane.title + ': ' + lane.bands.length + ' spans of published level; ' + ctx.marks.length + ' marks');
    f.lane = lane;
    f.levelY = y;
    return f;
  }

  // ---- signals -----------------------------------------------------------

  // thresholdSpans are a signal's thresholds over time in one set of
  // tables: a span per table in force and level with a threshold.
  function thresholdSpans(ctx, tables, name) {
    const out = [];
    tables.forEach((tb, i) => {
      const from = Math.max(tb.at, ctx.from);
      const to = i + 1 < tables.length ? Math.min(tables[i + 1].at, ctx.to) : ctx.to;
      if (to <= from && !(i + 1 === tables.length && from === ctx.to)) return;
      tb.levels.forEach((lv, index) => {
        const v = (lv.thresholds || {})[name];
        if (v !== undefined && v !== null) out.push({ from, to, index, count: tb.levels.length, level: lv.name, value: v });
      });
    });
    return out;
  }

  function scale(s, values, ths) {
    const all = values.filter((v) => v !== null && !Number.isNaN(v)).concat(ths);
    if (s.fixedMax) return { lo: 0, hi: s.fixedMax };
    let lo = Math.min(0, ...all), hi = Math.max(1, ...all);
    hi += (hi - lo) * 0.12;
    if (s.unit === '%') hi = Math.min(100, hi);
    return { lo, hi };
  }

  function drawSignal(ctx, sig, withAxis) {
    const s = info(sig.name);
    const top = 6, bottom = SIGNAL_H - 8;
    const height = SIGNAL_H + (withAxis ? 18 : 0);
    const f = frame(ctx, s.title + (s.unit ? ' (' + s.unit + ')' : ''), height, 'signal');
    f.root.dataset.signal = sig.name;
    const sets = ctx.thresholds.map((set) => ({ set, spans: thresholdSpans(ctx, set.tables, sig.name) }));
    const { lo, hi } = scale(s, sig.max.concat(sig.min), [].concat(...sets.map((x) => x.spans.map((sp) => sp.value))));
    const y = (v) => bottom - (Math.min(Math.max(v, lo), hi) - lo) / Math.max(1e-9, hi - lo) * (bottom - top);
    Object.assign(f.root.dataset, { lo: String(lo), hi: String(hi), top: String(top), bottom: String(bottom), points: String(sig.t.length) });
    f.root.append(svg('text', { class: 'ylabel', x: f.x0 - 6, y: top + 8, 'text-anchor': 'end' }, fmt(s, hi)));
    f.root.append(svg('text', { class: 'ylabel', x: f.x0 - 6, y: bottom, 'text-anchor': 'end' }, fmt(s, lo)));

    // The thresholds of each set: every level's, dashed, and the one the
    // signal was judged against (the next level above the published one)
    // drawn bold over each band.
    const g = svg('g', { class: 'tl-thresholds' });
    const labels = [];
    sets.forEach(({ set, spans }, si) => {
      for (const sp of spans) {
        const yy = y(sp.value);
        const line = svg('line', { class: 'th th-' + set.id + ' sev-' + severity(sp.index, sp.count), x1: f.x(sp.from), x2: f.x(sp.to), y1: yy, y2: yy });
        Object.assign(line.dataset, { set: set.id, level: sp.level, value: String(sp.value), from: iso(sp.from), to: iso(sp.to) });
        line.append(svg('title', {}, set.label + ': ' + sp.level + ' > ' + fmt(s, sp.value) + ' from ' + stamp(sp.from)));
        g.append(line);
        if (sp.to >= ctx.to) labels.push({ y: yy + 3, text: sp.level + ' ' + fmt(s, sp.value), cls: 'thlabel th-' + set.id, col: si });
      }
      if (set.judged) {
        let d = '';
        for (const b of set.judged.bands) {
          const tb = tableAt(set.tables, b.from);
          if (!tb) continue;
          const next = tb.levels.find((lv, i) => i > b.index && lv.thresholds && lv.thresholds[sig.name] !== undefined);
          if (!next) continue;
          const yy = y(next.thresholds[sig.name]).toFixed(1);
          d += 'M' + f.x(b.from).toFixed(1) + ' ' + yy + 'H' + f.x(b.to).toFixed(1);
        }
        if (d) g.append(svg('path', { class: 'judged th-' + set.id, d }));
      }
    });
    // The labels at the right edge, pushed apart where thresholds are close.
    for (let col = 0; col < sets.length; col++) {
      let last = -Infinity;
      labels.filter((l) => l.col === col).sort((a, b) => a.y - b.y).forEach((l) => {
        const yy = Math.max(l.y, last + 10);
        last = yy;
        g.append(svg('text', { class: l.cls, x: f.x1 + 4 + col * LABEL_COLUMN, y: yy }, l.text));
      });
    }
    f.root.append(g);

    // The values: the band from each bucket's minimum to its maximum, and
    // a line through the maxima. A gap in the data breaks both.
    const gap = Math.max(3 * (ctx.bucket || 0), 3 * medianStep(sig.t));
    let area = '', line = '', segMax = [], segMin = [];
    const flush = () => {
      if (segMax.length) {
        line += 'M' + segMax.join('L');
        area += 'M' + segMax.join('L') + 'L' + segMin.reverse().join('L') + 'Z';
      }
      segMax = []; segMin = [];
    };
    for (let i = 0; i < sig.t.length; i++) {
      const v = sig.max[i], w = sig.min[i];
      if (v === null || Number.isNaN(v) || (i > 0 && sig.t[i] - sig.t[i - 1] > gap)) flush();
      if (v === null || Number.isNaN(v)) continue;
      const x = f.x(sig.t[i]).toFixed(1);
      segMax.push(x + ' ' + y(v).toFixed(1));
      segMin.push(x + ' ' + y(w === null || Number.isNaN(w) ? v : w).toFixed(1));
    }
    flush();
    f.root.append(svg('path', { class: 'envelope', d: area }), svg('path', { class: 'value', d: line }));

    // The buckets whose signal was not available, as a strip along the bottom.
    const bad = svg('g', { class: 'tl-states' });
    for (let i = 0; i < sig.t.length; i++) {
      const st = sig.state[i];
      if (st === 'available') continue;
      const x = f.x(sig.t[i]);
      const r = svg('rect', { class: 'st st-' + st, x: x - 1, y: bottom + 2, width: 3, height: 4 });
      bad.append(r);
    }
    f.root.append(bad);
    drawMarks(ctx, f, top, bottom, false);
    if (withAxis) drawAxis(ctx, f, bottom + 6);
    const vals = sig.max.filter((v) => v !== null && !Number.isNaN(v));
    f.root.setAttribute('aria-label', s.title + ': ' + sig.t.length + ' points' +
      (vals.length ? ', highest ' + fmt(s, Math.max(...vals)) + ', lowest ' + fmt(s, Math.min(...sig.min.filter((v) => v !== null && !Number.isNaN(v)))) : ', no value'));
    f.sig = sig; f.info = s;
    return f;
  }

  function medianStep(ts) {
    if (ts.length < 3) return 0;
    const d = [];
    for (let i = 1; i < ts.length; i += Math.max(1, Math.floor(ts.length / 200))) d.push(ts[i] - ts[i - 1]);
    d.sort((a, b) => a - b);
    return d[d.length >> 1];
  }

  // ---- hover -------------------------------------------------------------

  function describe(ctx, t) {
    const out = [html('p', 'tip-time', stamp(t))];
    for (const lane of ctx.lanes) {
      const b = bandAt(lane.bands, t);
      if (!b) continue;
      const tb = tableAt(lane.tables.length ? lane.tables : ctx.tables, t);
      let s = lane.title + ': ' + b.level + ' (' + b.source + ')';
      const adm = admission(b, tb);
      if (adm) s += ', ' + adm;
      out.push(html('p', 'tip-lane', s));
    }
    for (const sig of ctx.signals) {
      const i = nearest(sig.t, t);
      if (i < 0 || Math.abs(sig.t[i] - t) > Math.max(ctx.bucket || 0, 1000) * 3) continue;
      const s = info(sig.name);
      const lo = sig.min[i], hi = sig.max[i];
      let v = fmt(s, hi);
      if (lo !== null && hi !== null && !Number.isNaN(lo) && lo !== hi) v = fmt(s, lo) + ' – ' + fmt(s, hi);
      out.push(html('p', 'tip-sig', s.title + ': ' + v + (sig.state[i] !== 'available' ? ' (' + sig.state[i] + ')' : '')));
    }
    const near = (ctx.to - ctx.from) / 150;
    for (const m of ctx.marks) if (Math.abs(m.at - t) <= near) out.push(html('p', 'tip-mark', markText(m)));
    return out;
  }

  function hover(ctx, frames, root, tip, opts) {
    let rest = null;
    const hide = () => {
      tip.hidden = true;
      for (const f of frames) f.cursor.setAttribute('visibility', 'hidden');
      clearTimeout(rest);
    };
    for (const f of frames) {
      f.cursor = svg('line', { class: 'cursor', y1: 0, y2: f.height, visibility: 'hidden' });
      f.root.append(f.cursor);
      f.root.addEventListener('pointermove', (ev) => {
        const r = f.root.getBoundingClientRect();
        const x = ev.clientX - r.left;
        if (x < f.x0 || x > f.x1) { hide(); return; }
        const t = f.t(x);
        for (const g of frames) {
          g.cursor.setAttribute('x1', x); g.cursor.setAttribute('x2', x);
          g.cursor.setAttribute('visibility', 'visible');
        }
        tip.replaceChildren(...describe(ctx, t));
        tip.hidden = false;
        // Fixed to the viewport, so that no scrolling box clips it.
        const left = Math.min(ev.clientX + 14, document.documentElement.clientWidth - tip.offsetWidth - 4);
        const top = ev.clientY + 14 + tip.offsetHeight > window.innerHeight ? ev.clientY - tip.offsetHeight - 10 : ev.clientY + 14;
        tip.style.left = Math.max(0, left) + 'px';
        tip.style.top = Math.max(0, top) + 'px';
        tip.dataset.t = iso(t);
        clearTimeout(rest);
        if (opts.onRest) rest = setTimeout(() => opts.onRest(t, tip), 250);
      });
      f.root.addEventListener('pointerleave', hide);
    }
  }

  // ---- the whole view ----------------------------------------------------

  // render draws view into root, replacing what it held:
  //   view.from, view.to: the range (ms); view.bucket: the bucket width;
  //   view.lanes: [{id, title, bands, tables, flags, overlay}] level charts;
  //   view.signals: [{name, t, min, max, state}];
  //   view.thresholds: [{id, label, tables, judged}] the threshold sets
  //     drawn on every signal chart (judged: a lane whose bands pick the
  //     threshold each moment was judged against);
  //   view.tables: the tables a lane without its own uses;
  //   view.marks: [{at, kind, action, level, mode, ttl, reason, actor}].
  // opts.width overrides the root's width; opts.onRest(t, tip) is called
  // when the pointer rests on a moment.
  function render(root, view, opts) {
    opts = opts || {};
    const width = Math.max(480, Math.floor(opts.width || root.clientWidth || 960));
    const ctx = Object.assign({ width, marks: [], tables: [], thresholds: [], signals: [], lanes: [] }, view);
    root.classList.add('tl');
    const frames = [];
    const items = [];
    ctx.lanes.forEach((lane, i) => {
      frames.push(drawLane(ctx, Object.assign({ tables: [] }, lane), !ctx.signals.length && i === ctx.lanes.length - 1));
    });
    ctx.signals.forEach((sig, i) => { frames.push(drawSignal(ctx, sig, i === ctx.signals.length - 1)); });
    for (const f of frames) items.push(f.box);
    const tip = html('div', 'tl-tip');
    tip.setAttribute('role', 'tooltip');
    tip.hidden = true;
    items.push(tip);
    root.replaceChildren(...items);
    hover(ctx, frames, root, tip, opts);
    return { frames, tip };
  }

  return { render, fromSeries, severity, info, stamp, markText, admission, tableAt, SIGNALS };
}());
