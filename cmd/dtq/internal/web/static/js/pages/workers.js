// Workers: every worker that sent a heartbeat in the last 24 hours, live,
// stopped or stale, with its slots, counters and the tasks it runs right now.

import {api, listAll} from '../api.js';
import {h, add, setText, fmtInt, fmtAgo, shortID} from '../dom.js';
import {pageHeader} from '../ui.js';
import {refresher, errorBox, markReady, keepFocus, keyedRows} from './common.js';

// liveness is live, stopped (it shut down cleanly) or stale (it went
// silent: it may have crashed).
function liveness(w) {
  if (w.live) return 'live';
  return w.status === 'stopped' ? 'stopped' : 'stale';
}

// At most this many running tasks per worker are looked up for their type.
const LOOKUP_MAX = 12;
// At most this many worker records are listed (10 pages).
const WORKERS_MAX = 10000;

export function mount(root, {app}) {
  const ctrl = new AbortController();
  const typeOf = new Map(); // task id -> task type (never changes)
  let workers = [];
  let more = false; // more records than WORKERS_MAX
  const tbody = h('tbody', {});
  const status = h('div', {class: 'page-status'});
  const summary = h('p', {class: 'muted', id: 'workers-summary'}, '');

  add(root,
    pageHeader('Workers'),
    summary,
    status,
    h('div', {class: 'card card-flush'}, h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'workers-table'},
      h('thead', {}, h('tr', {},
        h('th', {scope: 'col'}, 'Worker'), h('th', {scope: 'col'}, 'State'), h('th', {scope: 'col'}, 'Queues'),
        h('th', {class: 'num', scope: 'col'}, 'In flight'), h('th', {class: 'num', scope: 'col'}, 'Processed'),
        h('th', {class: 'num', scope: 'col'}, 'Failed'), h('th', {class: 'num', scope: 'col'}, 'Retried'),
        h('th', {scope: 'col'}, 'Heartbeat'), h('th', {scope: 'col'}, 'Running now'))),
      tbody))),
    h('p', {class: 'muted small'}, 'A worker is stopped when it shut down cleanly (its tasks were drained or handed back), stale when it missed three heartbeats: it may have crashed, and its leases are reclaimed by its peers.'));

  const table = keyedRows(tbody, {key: w => w.worker_id, make: makeRow, fill, colspan: 9,
    empty: 'No worker has sent a heartbeat in the last 24 hours.'});

  function makeRow(w) {
    const c = {};
    const tr = h('tr', {dataset: {workerId: w.worker_id}},
      h('td', {}, h('div', {class: 'mono strong'}, w.worker_id), c.host = h('div', {class: 'muted small'})),
      c.state = h('td', {}),
      c.queues = h('td', {class: 'cell-queues'}),
      h('td', {class: 'num'}, c.inflight = h('div', {}),
        h('span', {class: 'slot', role: 'img'}, c.fill = h('span', {class: 'slot-fill'}))),
      c.processed = h('td', {class: 'num'}),
      c.failed = h('td', {class: 'num'}),
      c.retried = h('td', {class: 'num'}),
      h('td', {class: 'cell-time'}, c.beat = h('span', {}), c.up = h('div', {class: 'muted small'})),
      c.running = h('td', {class: 'cell-running'}));
    return {tr, c};
  }

  function runningList(w) {
    if (!w.in_flight.length) return h('span', {class: 'muted'}, 'idle');
    return h('ul', {class: 'running-list'}, w.in_flight.map(id => h('li', {},
      h('a', {href: `#/tasks/${id}`, class: 'mono', title: id}, shortID(id)),
      typeOf.has(id) ? h('span', {class: 'muted'}, ' ' + typeOf.get(id)) : null)));
  }

  function fill({tr, c}, w) {
    tr.dataset.live = String(w.live);
    tr.dataset.kind = w.kind || 'go';
    tr.classList.toggle('row-stale', liveness(w) === 'stale');
    const http = w.kind === 'http';
    // An HTTP worker (any language, over the API) has no host or slots the
    // server knows of: show when it last asked for tasks instead.
    setText(c.host, http ? `HTTP worker · last claim ${w.last_claim ? fmtAgo(w.last_claim) : 'never'}`
      : `${w.hostname || '?'} · pid ${w.pid} · ${w.version || ''}`);
    const stateKey = `${w.live}|${w.status}`;
    if (c.state.dataset.key !== stateKey) {
      c.state.dataset.key = stateKey;
      const state = liveness(w);
      c.state.replaceChildren(h('span', {class: `badge st-${state === 'live' ? 'active' : state}`, dataset: {state}}, state),
        ...(state === 'stopped' ? [] : [' ', h('span', {class: 'muted small'}, w.status)]));
    }
    setText(c.queues, w.queues.join(', '));
    const busy = w.in_flight.length;
    setText(c.inflight, http ? fmtInt(busy) : `${fmtInt(busy)} / ${fmtInt(w.concurrency)}`);
    c.fill.parentNode.hidden = http;
    c.fill.style.width = `${(w.concurrency ? Math.min(1, busy / w.concurrency) * 100 : 0).toFixed(1)}%`;
    c.fill.parentNode.setAttribute('aria-label', `${busy} of ${w.concurrency} slots busy`);
    setText(c.processed, fmtInt(w.processed));
    setText(c.failed, fmtInt(w.failed));
    setText(c.retried, fmtInt(w.retried));
    setText(c.beat, fmtAgo(w.last_heartbeat));
    c.beat.title = w.last_heartbeat || '';
    setText(c.up, (http ? 'first seen ' : 'up since ') + fmtAgo(w.started_at).replace(' ago', ''));
    // The running list is rebuilt only when it changed, keeping focus.
    const runKey = w.in_flight.map(id => id + (typeOf.get(id) || '')).join();
    if (c.running.dataset.key !== runKey) {
      c.running.dataset.key = runKey;
      keepFocus(c.running, () => c.running.replaceChildren(runningList(w)));
    }
  }

  function render() {
    const count = state => workers.filter(w => liveness(w) === state).length;
    setText(summary, workers.length ? `${fmtInt(count('live'))} live, ${fmtInt(count('stopped'))} stopped, ${fmtInt(count('stale'))} stale (heartbeat in the last 24 hours)` +
      (more ? `; the first ${fmtInt(workers.length)} records by worker id are shown` : '') : '');
    table.render(workers);
  }

  async function lookupTypes() {
    const ids = [];
    for (const w of workers) ids.push(...w.in_flight.slice(0, LOOKUP_MAX).filter(id => !typeOf.has(id)));
    if (!ids.length) return;
    const found = await Promise.allSettled(ids.map(id => api(`tasks/${id}`, {signal: ctrl.signal})));
    found.forEach(r => { if (r.status === 'fulfilled') typeOf.set(r.value.task_id, r.value.task_type); });
    if (typeOf.size > 5000) typeOf.clear();
    render();
  }

  async function load() {
    try {
      // The list is paged; follow it up to WORKERS_MAX records.
      const res = await listAll('workers', {}, {max: WORKERS_MAX, signal: ctrl.signal});
      workers = res.items;
      more = res.more;
      status.replaceChildren();
      render();
      lookupTypes().catch(() => {});
    } catch (e) {
      if (e.name === 'AbortError') return;
      status.replaceChildren(errorBox(e, () => refresh.now()));
    }
    markReady(root);
  }

  // Liveness follows heartbeats, which send no events: refresh when idle.
  const refresh = refresher(load, {wait: 1000, maxWait: 3000, idleMS: 10000});
  refresh.now();

  return {
    onEvent(ev) {
      if (ev.type === 'TASK_STARTED' || ev.type.startsWith('WORKER_') || ev.worker_id) refresh.soon();
    },
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      refresh.stop();
    },
  };
}
