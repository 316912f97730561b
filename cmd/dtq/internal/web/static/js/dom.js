// DOM building and formatting helpers. The page is built with DOM calls
// only (never HTML strings), so text from the API can never become markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

// Properties set as DOM properties rather than attributes.
const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'open', 'indeterminate']);

function apply(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false && !PROPS.has(k)) continue;
    if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (PROPS.has(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// h builds an HTML element: h('a', {href: '#/', class: 'x'}, 'text', child).
// Attributes named on<event> with a function value become listeners.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

// add appends children to el, skipping null, undefined and false (which
// the DOM's own append would turn into text).
export function add(el, ...children) {
  append(el, children);
  return el;
}

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

// setText changes a node's text only when it differs, so that screen
// readers and layout are not disturbed by no-op updates.
export function setText(el, text) {
  const t = String(text);
  if (el.textContent !== t) el.textContent = t;
}

// --- formatting -----------------------------------------------------------

const nf = new Intl.NumberFormat();

export function fmtInt(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '—';
  return nf.format(Math.round(n));
}

// fmtRate shows a per-second rate with a sensible number of decimals.
export function fmtRate(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '—';
  if (n === 0) return '0';
  if (n < 0.1) return n.toFixed(3);
  if (n < 10) return n.toFixed(2);
  if (n < 100) return n.toFixed(1);
  return fmtInt(n);
}

// fmtMS shows a duration given in milliseconds.
export function fmtMS(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1) return ms === 0 ? '0 ms' : '<1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const sec = ms / 1000;
  if (sec < 60) return `${sec < 10 ? sec.toFixed(2) : sec.toFixed(1)} s`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min} min ${Math.round(sec % 60)} s`;
  const hr = Math.floor(min / 60);
  if (hr < 48) return `${hr} h ${min % 60} min`;
  return `${Math.floor(hr / 24)} d ${hr % 24} h`;
}

// fmtBytes shows a size in bytes in binary units, as Redis counts them
// ("1gb" is 1024³ bytes): "512 B", "28.5 MB", "1.0 GB".
const BYTE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
export function fmtBytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '—';
  let v = Math.max(0, n), u = 0;
  while (u < BYTE_UNITS.length - 1 && v >= 1024) { v /= 1024; u++; }
  if (u === 0) return `${Math.round(v)} B`;
  // 1023.96 KB would round to "1024 KB": show it as the next unit.
  if (Math.round(v) >= 1024 && u < BYTE_UNITS.length - 1) { v /= 1024; u++; }
  return `${v >= 99.95 ? Math.round(v) : v.toFixed(1)} ${BYTE_UNITS[u]}`;
}

function pad(n, w = 2) { return String(n).padStart(w, '0'); }

// fmtTime shows a wire time (UTC, ISO) as local wall-clock time; the date
// is added when it is not today.
export function fmtTime(iso, withMS = false) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '—';
  const now = new Date();
  let t = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (withMS) t += `.${pad(d.getMilliseconds(), 3)}`;
  if (d.toDateString() !== now.toDateString()) {
    t = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${t}`;
  }
  return t;
}

// fmtAgo shows how long ago a wire time was.
export function fmtAgo(iso) {
  if (!iso) return '—';
  const ms = Date.now() - new Date(iso).getTime();
  if (Number.isNaN(ms)) return '—';
  if (ms < 0) return 'in ' + fmtMS(-ms);
  if (ms < 1000) return 'just now';
  const sec = Math.floor(ms / 1000);
  if (sec < 60) return `${sec} s ago`;
  const min = Math.floor(sec / 60);
  if (min < 60) return `${min} min ago`;
  const hr = Math.floor(min / 60);
  if (hr < 48) return `${hr} h ago`;
  return `${Math.floor(hr / 24)} d ago`;
}

// shortID shortens a task id for tables. Ids are time-ordered UUIDv7s:
// tasks made close together share their leading digits, while hex digits
// 16..27 are random, so those tell tasks apart.
export function shortID(id) {
  if (!id || id.length !== 32) return id || '';
  return id.slice(16, 28);
}

export function isTaskID(v) { return /^[0-9a-f]{32}$/.test(v); }

// prettyJSON shows a JSON value indented; null stays "null".
export function prettyJSON(v) {
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}

export function compactJSON(v) {
  try { return JSON.stringify(v); } catch { return String(v); }
}

// --- small UI pieces -------------------------------------------------------

export const STATUSES = ['waiting', 'pending', 'queued', 'running', 'retrying', 'succeeded', 'failed', 'dead_lettered', 'cancelled', 'expired'];
export const TERMINAL = new Set(['succeeded', 'failed', 'dead_lettered', 'cancelled', 'expired']);

export function statusLabel(st) { return (st || '').replace('_', ' '); }

export function statusBadge(st) {
  return h('span', {class: `badge st-${st || 'unknown'}`, dataset: {status: st || ''}}, statusLabel(st) || 'unknown');
}

// progressView shows a task's progress: a bar and its percent for a
// number, the compact JSON of an object (a bar too when it has numeric
// done/of or current/total fields); '—' when there is none. A native
// <progress> element: no inline style (the page's CSP forbids it).
export function progressView(p) {
  if (p === undefined || p === null) return '—';
  let pct = null;
  if (typeof p === 'number') pct = p;
  else if (typeof p === 'object') {
    const done = p.done ?? p.current, of = p.of ?? p.total;
    if (typeof done === 'number' && typeof of === 'number' && of > 0) pct = Math.min(100, Math.max(0, done / of * 100));
  }
  const label = typeof p === 'number' ? `${Math.round(p)}%` : compactJSON(p);
  if (pct === null) return h('span', {class: 'progress-text', title: label}, label.length > 60 ? label.slice(0, 59) + '…' : label);
  return h('span', {class: 'progress-cell', title: label},
    h('progress', {max: '100', value: String(pct), 'aria-label': `progress ${Math.round(pct)}%`}),
    h('span', {class: 'progress-text'}, typeof p === 'number' ? label : `${Math.round(pct)}%`));
}

// dedupKey is a task's dedup key as text ('' when it has none): the
// lists show it only when present.
export function dedupKey(t) {
  const k = t?.dedup_key;
  if (k === undefined || k === null || k === '') return '';
  return typeof k === 'string' ? k : compactJSON(k);
}

// taskLink links to a task's page, showing its short id.
export function taskLink(id, full = false) {
  if (!id) return '—';
  return h('a', {href: `#/tasks/${id}`, class: 'mono', title: id}, full ? id : shortID(id));
}

// numCell is a right-aligned table cell with tabular digits.
export function numCell(v, fmt = fmtInt) {
  return h('td', {class: 'num'}, fmt(v));
}

export function emptyRow(cols, text) {
  return h('tr', {class: 'empty'}, h('td', {colspan: cols}, text));
}

// debounce runs fn at most once per wait ms after calls stop, and at least
// every maxWait ms while calls keep coming.
export function debounce(fn, wait, maxWait = wait * 4) {
  let timer = null, first = 0;
  const run = () => { timer = null; first = 0; fn(); };
  const call = () => {
    const now = Date.now();
    if (!first) first = now;
    clearTimeout(timer);
    timer = setTimeout(run, Math.max(0, Math.min(wait, first + maxWait - now)));
  };
  call.cancel = () => { clearTimeout(timer); timer = null; first = 0; };
  return call;
}
