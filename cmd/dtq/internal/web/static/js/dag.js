// A workflow's graph: laid out in layers by dependency depth (a node's
// column is one more than its deepest dep's), ordered inside each layer to
// reduce edge crossings (barycenter sweeps), and drawn as SVG with DOM
// calls only. Past a size a drawing stops being readable: such a graph is
// summarized per layer instead (see fitsDrawing).

import {h, s, setText, fmtInt, statusLabel, STATUSES} from './dom.js';

// Bounds of a drawing: more nodes, a wider layer or more edges than this
// and the graph is summarized per layer.
export const DRAW_MAX_NODES = 500;
export const DRAW_MAX_LAYER = 100;
export const DRAW_MAX_EDGES = 5000;

// Node box and spacing, in SVG units (CSS pixels at scale 1).
const NODE_W = 132, NODE_H = 22, COL_GAP = 56, ROW_GAP = 6, PAD = 8;
// How many characters of a ref fit in a box at the font size of app.css.
const REF_CHARS = 19;

// layers assigns each node its depth and returns {depth: Map ref -> layer,
// layers: [[ref, ...], ...]} with refs in submission order inside each
// layer. Deps naming no node are ignored; nodes on a cycle (the API
// refuses those) are put after the last layer rather than lost.
export function layers(nodes) {
  const byRef = new Map(nodes.map(n => [n.ref, n]));
  const dependants = new Map(nodes.map(n => [n.ref, []]));
  const missing = new Map(); // ref -> deps not yet placed
  for (const n of nodes) {
    const deps = (n.deps || []).filter(d => byRef.has(d) && d !== n.ref);
    missing.set(n.ref, new Set(deps).size);
    for (const d of new Set(deps)) dependants.get(d).push(n.ref);
  }
  const depth = new Map();
  const ready = nodes.filter(n => missing.get(n.ref) === 0).map(n => n.ref);
  for (const r of ready) depth.set(r, 0);
  for (let i = 0; i < ready.length; i++) {
    const r = ready[i];
    for (const c of dependants.get(r)) {
      depth.set(c, Math.max(depth.get(c) ?? 0, depth.get(r) + 1));
      const left = missing.get(c) - 1;
      missing.set(c, left);
      if (left === 0) ready.push(c);
    }
  }
  let max = -1;
  for (const d of depth.values()) max = Math.max(max, d);
  for (const n of nodes) if (!depth.has(n.ref)) depth.set(n.ref, max + 1);
  const out = [];
  for (const n of nodes) {
    const d = depth.get(n.ref);
    while (out.length <= d) out.push([]);
    out[d].push(n.ref);
  }
  return {depth, layers: out};
}

// crossings counts the crossing edges between adjacent layers (edges that
// skip layers are not counted: they are drawn as curves around the rest).
// Per pair of layers it counts inversions with a Fenwick tree: O(E log V).
export function crossings(order, nodes, depth) {
  const pos = positions(order);
  let n = 0;
  for (let l = 1; l < order.length; l++) {
    const edges = [];
    for (const ref of order[l]) {
      for (const d of new Set(nodes.get(ref).deps || [])) {
        if (depth.get(d) === l - 1) edges.push([pos.get(d), pos.get(ref)]);
      }
    }
    // Sorted by source then target: an earlier edge crosses a later one
    // exactly when its target is lower down.
    edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const size = order[l].length;
    const tree = new Array(size + 1).fill(0);
    let seen = 0;
    for (const [, to] of edges) {
      let atMost = 0; // earlier edges with a target <= to
      for (let i = to + 1; i > 0; i -= i & -i) atMost += tree[i];
      n += seen - atMost;
      for (let i = to + 1; i <= size; i += i & -i) tree[i]++;
      seen++;
    }
  }
  return n;
}

function positions(order) {
  const pos = new Map();
  for (const layer of order) layer.forEach((ref, i) => pos.set(ref, i));
  return pos;
}

// relative is a node's place in its layer as a fraction (0 top, 1
// bottom), so that layers of different widths can be compared.
function relative(order, depth, pos, ref) {
  const len = order[depth.get(ref)].length;
  return len > 1 ? pos.get(ref) / (len - 1) : 0.5;
}

// barycenterSweep reorders each layer by the mean place of its nodes'
// neighbours in the layers already placed: deps on a down sweep,
// dependants on an up sweep. Nodes without neighbours keep their place.
function barycenterSweep(order, nodes, dependants, depth, down) {
  const range = down ? [...order.keys()].slice(1) : [...order.keys()].reverse().slice(1);
  for (const l of range) {
    const pos = positions(order);
    const keyed = order[l].map((ref, i) => {
      const nb = down ? [...new Set(nodes.get(ref).deps || [])].filter(d => nodes.has(d) && d !== ref) : dependants.get(ref);
      if (!nb.length) return {ref, key: order[l].length > 1 ? i / (order[l].length - 1) : 0.5, i};
      const sum = nb.reduce((t, r) => t + relative(order, depth, pos, r), 0);
      return {ref, key: sum / nb.length, i};
    });
    keyed.sort((a, b) => a.key - b.key || a.i - b.i);
    order[l] = keyed.map(k => k.ref);
  }
}

// layout places every node: {order: layers of refs, depth, widest (the
// largest layer), edges (their number), crossings}. When the graph fits a
// drawing (fitsDrawing) it runs a few down and up barycenter sweeps and
// keeps the order with the fewest crossings; a graph to be summarized
// keeps the submission order (no sweep is spent on it).
export function layout(nodeList, {sweeps = 4} = {}) {
  const nodes = new Map(nodeList.map(n => [n.ref, n]));
  const {depth, layers: initial} = layers(nodeList);
  const dependants = new Map(nodeList.map(n => [n.ref, []]));
  let edges = 0;
  for (const n of nodeList) {
    for (const d of new Set(n.deps || [])) {
      if (nodes.has(d) && d !== n.ref) { dependants.get(d).push(n.ref); edges++; }
    }
  }
  const widest = Math.max(0, ...initial.map(l => l.length));
  const fits = fitsDrawing(nodeList.length, widest, edges);
  if (!fits) return {order: initial, depth, widest, edges, fits, crossings: null};
  const order = initial.map(l => [...l]);
  let best = order.map(l => [...l]);
  let bestCross = crossings(order, nodes, depth);
  for (let i = 0; i < sweeps && bestCross > 0; i++) {
    for (const down of [true, false]) {
      barycenterSweep(order, nodes, dependants, depth, down);
      const c = crossings(order, nodes, depth);
      if (c < bestCross) { best = order.map(l => [...l]); bestCross = c; }
    }
  }
  return {order: best, depth, widest, edges, fits, crossings: bestCross};
}

// fitsDrawing says whether a graph is drawn node by node (true) or
// summarized per layer.
export function fitsDrawing(nodeCount, widest, edges) {
  return nodeCount <= DRAW_MAX_NODES && widest <= DRAW_MAX_LAYER && edges <= DRAW_MAX_EDGES;
}

function shortRef(ref) {
  return ref.length > REF_CHARS ? ref.slice(0, REF_CHARS - 1) + '…' : ref;
}

function nodeTitle(n) {
  return `${n.ref}: ${statusLabel(n.status)} (queue ${n.queue})${n.error_class ? ' · ' + n.error_class : ''}`;
}

// DagView draws a graph that fits (fitsDrawing) as SVG: a column per
// layer, each node a link to its task's page coloured by its status.
// setStatus recolours one node in place as events arrive.
export class DagView {
  constructor(nodeList, lay) {
    this.nodes = new Map(); // task_id -> {n, g, title}
    const byRef = new Map(nodeList.map(n => [n.ref, n]));
    const {order} = lay;
    const tallest = Math.max(1, ...order.map(l => l.length));
    const width = PAD * 2 + order.length * NODE_W + (order.length - 1) * COL_GAP;
    const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * ROW_GAP;
    const at = new Map(); // ref -> {x, y} of the box's top left
    order.forEach((layer, l) => {
      // Short layers are centred against the tallest one.
      const top = PAD + (tallest - layer.length) * (NODE_H + ROW_GAP) / 2;
      layer.forEach((ref, i) => at.set(ref, {x: PAD + l * (NODE_W + COL_GAP), y: top + i * (NODE_H + ROW_GAP)}));
    });

    const edgeGroup = s('g', {class: 'dag-edges'});
    const paths = [];
    for (const n of nodeList) {
      const to = at.get(n.ref);
      for (const d of new Set(n.deps || [])) {
        const from = at.get(d);
        if (!from || d === n.ref) continue;
        const x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2;
        const mid = (x1 + x2) / 2;
        paths.push(s('path', {d: `M${x1} ${y1}C${mid} ${y1} ${mid} ${y2} ${x2} ${y2}`, dataset: {from: d, to: n.ref}}));
      }
    }
    edgeGroup.append(...paths);

    const nodeGroup = s('g', {class: 'dag-nodes'});
    for (const layer of order) {
      for (const ref of layer) {
        const n = byRef.get(ref);
        const {x, y} = at.get(ref);
        const title = s('title', {}, nodeTitle(n));
        const g = s('a', {class: 'dag-node', href: `#/tasks/${n.task_id}`, dataset: {ref, taskId: n.task_id, status: n.status},
          'aria-label': nodeTitle(n)},
        title,
        s('rect', {x, y, width: NODE_W, height: NODE_H, rx: 4}),
        s('text', {x: x + 8, y: y + NODE_H / 2, 'dominant-baseline': 'central'}, shortRef(ref)));
        nodeGroup.append(g);
        this.nodes.set(n.task_id, {n, g, title});
      }
    }
    this.svg = s('svg', {class: 'dag-svg', id: 'wf-dag', width, height, viewBox: `0 0 ${width} ${height}`,
      role: 'group', 'aria-label': `Workflow graph: ${fmtInt(nodeList.length)} nodes in ${order.length} layers`},
    edgeGroup, nodeGroup);
    this.el = h('div', {class: 'dag-wrap', tabindex: '-1'}, this.svg);
  }

  // setStatus shows a node's new status; false when the task is not drawn.
  setStatus(taskID, status, errorClass) {
    const e = this.nodes.get(taskID);
    if (!e) return false;
    const ec = errorClass ?? e.n.error_class ?? '';
    if (e.n.status === status && (e.n.error_class ?? '') === ec) return true;
    e.n = {...e.n, status, error_class: ec};
    e.g.dataset.status = status;
    const t = nodeTitle(e.n);
    setText(e.title, t);
    e.g.setAttribute('aria-label', t);
    return true;
  }
}

// statusBar is a stacked bar of counts by status, an SVG of rects whose
// widths are attributes (the page's CSP allows no inline style).
export function statusBar(counts, total, {width = 120, height = 8} = {}) {
  const svg = s('svg', {class: 'status-bar', width, height, viewBox: `0 0 ${width} ${height}`, 'aria-hidden': 'true'});
  fillStatusBar(svg, counts, total, width, height);
  return svg;
}

// fillStatusBar redraws a statusBar for new counts.
export function fillStatusBar(svg, counts, total, width = Number(svg.getAttribute('width')), height = Number(svg.getAttribute('height'))) {
  const parts = [s('rect', {class: 'bar-bg', x: 0, y: 0, width, height, rx: 2})];
  let x = 0;
  if (total > 0) {
    for (const st of STATUSES) {
      const n = counts[st] || 0;
      if (!n) continue;
      const w = n / total * width;
      parts.push(s('rect', {class: 'bar-part', dataset: {status: st}, x, y: 0, width: w, height}));
      x += w;
    }
  }
  svg.replaceChildren(...parts);
}

// countsText lists non-zero counts in the order of STATUSES: "3 running · 2
// waiting".
export function countsText(counts) {
  const parts = STATUSES.filter(st => counts[st]).map(st => `${fmtInt(counts[st])} ${statusLabel(st)}`);
  return parts.length ? parts.join(' · ') : 'no nodes';
}

// SUMMARY_MAX_ROWS bounds the summary's rows: a deeper graph (a long
// chain) shows ranges of consecutive layers, each row summing its layers.
export const SUMMARY_MAX_ROWS = 100;

// LayerSummary is a graph too large to draw: a row per layer (or range of
// layers) with its node count and its nodes' counts by status, kept up to
// date by setStatus.
export class LayerSummary {
  constructor(nodeList, lay) {
    this.rowOf = new Map(); // task_id -> row index
    this.status = new Map(); // task_id -> status
    const per = Math.ceil(lay.order.length / SUMMARY_MAX_ROWS) || 1;
    this.rows = [];
    const byRef = new Map(nodeList.map(n => [n.ref, n]));
    for (const [l, refs] of lay.order.entries()) {
      const r = Math.floor(l / per);
      if (!this.rows[r]) {
        const last = Math.min(lay.order.length - 1, (r + 1) * per - 1);
        this.rows[r] = {label: last > l ? `${l}–${last}` : String(l), total: 0, counts: {}};
      }
      const row = this.rows[r];
      for (const ref of refs) {
        const n = byRef.get(ref);
        this.rowOf.set(n.task_id, r);
        this.status.set(n.task_id, n.status);
        row.counts[n.status] = (row.counts[n.status] || 0) + 1;
        row.total++;
      }
    }
    const tbody = h('tbody', {});
    for (const row of this.rows) {
      row.bar = statusBar(row.counts, row.total, {width: 160});
      row.text = h('td', {class: 'cell-counts'});
      row.tr = h('tr', {dataset: {layer: row.label}},
        h('th', {scope: 'row', class: 'num'}, row.label),
        h('td', {class: 'num'}, fmtInt(row.total)),
        h('td', {}, row.bar),
        row.text);
      this.fill(row);
      tbody.append(row.tr);
    }
    this.el = h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'wf-layers'},
      h('thead', {}, h('tr', {},
        h('th', {scope: 'col', class: 'num'}, per > 1 ? 'Layers' : 'Layer'), h('th', {scope: 'col', class: 'num'}, 'Nodes'),
        h('th', {scope: 'col'}, 'Status'), h('th', {scope: 'col'}, 'Counts'))),
      tbody));
  }

  fill(row) {
    fillStatusBar(row.bar, row.counts, row.total);
    setText(row.text, countsText(row.counts));
    row.tr.dataset.counts = JSON.stringify(row.counts);
  }

  // setStatus moves a node to a new status in its layer's counts.
  setStatus(taskID, status) {
    const r = this.rowOf.get(taskID);
    if (r === undefined) return false;
    const old = this.status.get(taskID);
    if (old === status) return true;
    const row = this.rows[r];
    row.counts[old] -= 1;
    if (!row.counts[old]) delete row.counts[old];
    row.counts[status] = (row.counts[status] || 0) + 1;
    this.status.set(taskID, status);
    this.fill(row);
    return true;
  }
}
