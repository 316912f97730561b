// Small hand-drawn SVG charts. Each chart owns a box of fixed height (set
// in CSS), so drawing or redrawing never moves the page around it; it
// redraws itself when its width changes.

import {h, s, fmtInt} from './dom.js';

const M = {top: 10, right: 10, bottom: 22, left: 46};

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten, so that
// the axis labels (0, half, max) stay round numbers.
export function niceMax(v, floor = 1) {
  v = Math.max(v, floor);
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v * (1 - 1e-9)) return m * p;
  return 10 * p;
}

// clock formats an axis time; seconds are shown when the span is short.
function clock(ms, withSeconds) {
  const d = new Date(ms);
  const p = n => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}` + (withSeconds ? `:${p(d.getSeconds())}` : '');
}

// LineChart draws one or more series over time.
//   series: [{key, label, tone}] — tone picks the CSS colour class
//   yFormat: formats axis labels; floor: the smallest y maximum
//   step: draw steps (a value holds until the next sample) instead of lines
//   area: fill under the first series
export class LineChart {
  constructor({label, series, yFormat = fmtInt, floor = 1, step = false, area = false, emptyText = 'No data yet'}) {
    this.series = series;
    this.yFormat = yFormat;
    this.floor = floor;
    this.step = step;
    this.area = area;
    this.emptyText = emptyText;
    this.data = null;
    this.svg = s('svg', {class: 'chart-svg', role: 'img', 'aria-label': label});
    this.el = h('div', {class: 'chart'}, this.svg);
    this.ro = new ResizeObserver(() => this.draw());
    this.ro.observe(this.el);
  }

  // update sets the data: xs are epoch ms, values maps series key to
  // numbers (same length as xs); domain optionally fixes the x range.
  update(xs, values, domain) {
    this.data = {xs, values, domain};
    this.draw();
  }

  destroy() { this.ro.disconnect(); }

  draw() {
    const width = Math.floor(this.el.clientWidth);
    const height = Math.floor(this.el.clientHeight);
    if (!width || !height) return;
    const svg = this.svg;
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    const kids = [];
    const d = this.data;
    const iw = width - M.left - M.right, ih = height - M.top - M.bottom;
    if (!d || !d.xs.length) {
      kids.push(s('text', {x: width / 2, y: height / 2, class: 'chart-empty', 'text-anchor': 'middle'}, this.emptyText));
      svg.replaceChildren(...kids);
      return;
    }
    const [x0, x1] = d.domain || [d.xs[0], d.xs[d.xs.length - 1]];
    let ymax = 0;
    for (const se of this.series) for (const v of d.values[se.key] || []) ymax = Math.max(ymax, v);
    ymax = niceMax(ymax, this.floor);
    const X = t => M.left + (x1 === x0 ? iw : ((t - x0) / (x1 - x0)) * iw);
    const Y = v => M.top + ih - (v / ymax) * ih;

    for (const f of [0, 0.5, 1]) {
      const y = Y(ymax * f);
      kids.push(s('line', {x1: M.left, x2: M.left + iw, y1: y, y2: y, class: f === 0 ? 'axis' : 'grid'}));
      kids.push(s('text', {x: M.left - 6, y: y + 4, 'text-anchor': 'end', class: 'tick'}, this.yFormat(ymax * f)));
    }
    const secs = x1 - x0 < 10 * 60000;
    kids.push(s('text', {x: M.left, y: height - 6, class: 'tick'}, clock(x0, secs)));
    kids.push(s('text', {x: M.left + iw, y: height - 6, 'text-anchor': 'end', class: 'tick'}, clock(x1, secs)));
    if (iw > 260) kids.push(s('text', {x: M.left + iw / 2, y: height - 6, 'text-anchor': 'middle', class: 'tick'}, clock((x0 + x1) / 2, secs)));

    this.series.forEach((se, i) => {
      const vs = d.values[se.key] || [];
      const pts = [];
      d.xs.forEach((t, j) => {
        if (vs[j] === undefined || vs[j] === null) return;
        if (t < x0) {
          // A step chart carries the last value before the window into it.
          if (this.step) pts.splice(0, pts.length, [X(x0), Y(vs[j])]);
          return;
        }
        const x = X(t), y = Y(vs[j]);
        if (this.step && pts.length) pts.push([x, pts[pts.length - 1][1]]);
        pts.push([x, y]);
      });
      if (this.step && pts.length && d.domain) pts.push([X(x1), pts[pts.length - 1][1]]);
      if (!pts.length) return;
      const path = pts.map(([x, y], k) => `${k ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`).join('');
      if (this.area && i === 0) {
        const base = Y(0).toFixed(1);
        kids.push(s('path', {d: `${path}L${pts[pts.length - 1][0].toFixed(1)},${base}L${pts[0][0].toFixed(1)},${base}Z`, class: `area tone-${se.tone}`}));
      }
      kids.push(s('path', {d: path, class: `line tone-${se.tone}`}));
      const [lx, ly] = pts[pts.length - 1];
      kids.push(s('circle', {cx: lx, cy: ly, r: 3, class: `dot tone-${se.tone}`}));
    });
    svg.replaceChildren(...kids);
  }
}

// legend renders the series names with a value cell each; it returns the
// element and a map of key to value cell.
export function legend(series) {
  const cells = {};
  const el = h('ul', {class: 'legend'}, series.map(se => {
    cells[se.key] = h('span', {class: 'legend-value num', id: se.id || null}, '—');
    return h('li', {}, h('span', {class: `swatch tone-${se.tone}`, 'aria-hidden': 'true'}), h('span', {}, se.label), cells[se.key]);
  }));
  return {el, cells};
}

// bandBars draws ready tasks per priority band (p9 … p0) as tiny bars.
export function bandBars(ready) {
  const bands = [];
  for (let b = 9; b >= 0; b--) bands.push([`p${b}`, ready?.[`p${b}`] || 0]);
  const max = Math.max(1, ...bands.map(([, v]) => v));
  const W = 100, H = 22, bw = W / bands.length;
  const title = bands.map(([k, v]) => `${k}: ${fmtInt(v)}`).join(', ');
  return s('svg', {class: 'bands', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': `Ready by priority band: ${title}`},
    s('title', {}, title),
    bands.map(([k, v], i) => {
      const bh = v ? Math.max(2, (v / max) * (H - 2)) : 1;
      return s('rect', {x: i * bw + 1, y: H - bh, width: bw - 2, height: bh, class: v ? 'band' : 'band band-empty'});
    }));
}
