// Helpers shared by the pages.

import {h, debounce, fmtMS} from '../dom.js';

// refresher runs load now and then, never twice at once: soon() after a
// burst of events (debounced), now() at once. With idleMS set it also runs
// when nothing triggered it for that long and the tab is visible, so that
// numbers that change without events (worker heartbeats, the minute
// window) stay fresh without a busy polling loop.
export function refresher(load, {wait = 800, maxWait = 3000, idleMS = 0} = {}) {
  let running = false, again = false, stopped = false, last = Date.now();
  const run = async () => {
    if (stopped) return;
    if (running) { again = true; return; }
    running = true;
    try {
      await load();
    } catch (e) {
      if (e?.name !== 'AbortError') console.warn('refresh failed', e);
    } finally {
      running = false;
      last = Date.now();
      if (again && !stopped) { again = false; soon(); }
    }
  };
  const soon = debounce(run, wait, maxWait);
  const timer = idleMS ? setInterval(() => {
    if (!document.hidden && Date.now() - last >= idleMS) run();
  }, Math.max(1000, idleMS / 3)) : 0;
  return {
    now: run,
    soon,
    stop() { stopped = true; soon.cancel(); clearInterval(timer); },
  };
}

// errorBox shows why something could not be loaded, with a retry button.
export function errorBox(err, onRetry) {
  const msg = typeof err?.describe === 'function' ? err.describe() : (err?.message || String(err));
  return h('div', {class: 'error-box', role: 'alert'},
    h('p', {}, msg),
    onRetry ? h('button', {class: 'btn btn-small', type: 'button', onclick: onRetry}, 'Try again') : null);
}

// bucketBounds turns a latency bucket label into its [low, high) bounds in
// ms. Labels name the exclusive upper bound: "lt_1ms" holds 0 ms,
// "lt_<2^k>ms" holds [2^(k-1), 2^k) ms.
export function bucketBounds(label) {
  const m = /(\d+)ms$/.exec(label);
  if (!m) return null;
  const hi = Number(m[1]);
  return [hi <= 1 ? 0 : hi / 2, hi];
}

// percentiles estimates the given quantiles (0..1) from bucket counts,
// interpolating linearly inside the bucket that holds each one. It returns
// {total, values} with values null when there are no samples.
export function percentiles(buckets, qs) {
  const rows = [];
  for (const [label, n] of Object.entries(buckets || {})) {
    const b = bucketBounds(label);
    if (b && n > 0) rows.push([b[0], b[1], n]);
  }
  rows.sort((a, b) => a[1] - b[1]);
  const total = rows.reduce((t, r) => t + r[2], 0);
  const values = qs.map(q => {
    if (!total) return null;
    const target = q * total;
    let cum = 0;
    for (const [lo, hi, n] of rows) {
      if (cum + n >= target) return lo + (hi - lo) * Math.min(1, Math.max(0, (target - cum) / n));
      cum += n;
    }
    return rows[rows.length - 1][1];
  });
  return {total, values};
}

// sumBuckets adds up the bucket maps of several minutes.
export function sumBuckets(items, field) {
  const out = {};
  for (const it of items) for (const [k, v] of Object.entries(it[field] || {})) out[k] = (out[k] || 0) + v;
  return out;
}

export function fmtEstimate(ms) {
  return ms === null ? '—' : '≈ ' + fmtMS(ms);
}

// queueSelect is a <select> of queue names with an "All queues" choice.
export function queueSelect(id, names, value, onChange) {
  const sel = h('select', {id, name: 'queue'},
    h('option', {value: ''}, 'All queues'),
    names.map(n => h('option', {value: n, selected: n === value}, n)));
  if (value && !names.includes(value)) sel.append(h('option', {value, selected: true}, value));
  if (onChange) sel.addEventListener('change', () => onChange(sel.value));
  return sel;
}

// fillQueueSelect replaces a queue select's choices, keeping its value.
export function fillQueueSelect(sel, names) {
  const value = sel.value;
  const all = [...new Set([...names, ...(value ? [value] : [])])].sort();
  const cur = [...sel.options].slice(1).map(o => o.value);
  if (cur.join('\n') === all.join('\n')) return;
  sel.replaceChildren(h('option', {value: ''}, 'All queues'), all.map(n => h('option', {value: n, selected: n === value}, n)));
}

// field wraps a labelled form control.
export function field(label, control) {
  return h('div', {class: 'field'}, h('label', {for: control.id}, label), control);
}

// markReady tells tests (and nothing else) that the page finished its first
// load.
export function markReady(root) {
  root.dataset.ready = 'true';
}

// keepFocus runs rebuild (which replaces what is inside container) and puts
// the keyboard focus back on the equivalent link or button, so that live
// updates do not throw a keyboard user back to the top of the page.
export function keepFocus(container, rebuild) {
  const a = document.activeElement;
  const key = a && container.contains(a) ? (a.getAttribute('href') || a.id || '') : '';
  rebuild();
  if (!key) return;
  const again = [...container.querySelectorAll('a, button')].find(el => (el.getAttribute('href') || el.id) === key);
  again?.focus({preventScroll: true});
}

// moreLoader returns the "Show more" handler of a paged list: it fetches
// the page after the current cursor (cursor.get()), hands its items to
// render(items, true), and keeps the button disabled while it reads and
// hidden once no page is left.
export function moreLoader({more, status, fetchPage, render, cursor}) {
  return async function loadMore() {
    if (!cursor.get()) return;
    more.disabled = true;
    try {
      const page = await fetchPage(cursor.get());
      cursor.set(page.next_cursor);
      render(page.items, true);
    } catch (e) {
      if (e.name !== 'AbortError') status.replaceChildren(errorBox(e, () => loadMore()));
    } finally {
      more.disabled = false;
      more.hidden = !cursor.get();
    }
  };
}
