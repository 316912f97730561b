// Overview: health, live throughput and depth, latency estimates and a
// summary of the queues.

import {api, ready} from '../api.js';
import {h, add, setText, fmtInt, fmtRate, fmtTime, fmtBytes} from '../dom.js';
import {LineChart, legend} from '../charts.js';
import {pageHeader, section} from '../ui.js';
import {refresher, percentiles, sumBuckets, fmtEstimate, markReady, errorBox, keepFocus} from './common.js';

const WINDOW_MIN = 15;
// OVERVIEW_QUEUES is how many queues (by name) the overview's table shows;
// the cards use the list's totals over every queue.
const OVERVIEW_QUEUES = 20;
// The overview reads one page of workers (the list is paged and bounded by
// DTQ_MAX_WORKERS); past it the card says the count is of that page.
const OVERVIEW_WORKERS = 1000;
const TASK_EVENT = /^TASK_/;
// MEMORY_WARN_AT is the share of maxmemory past which the memory card
// warns, as the server's /ready does (at 100 % Redis refuses writes).
const MEMORY_WARN_AT = 0.8;

function statCard(id, label, sub) {
  const value = h('span', {class: 'stat-value num', id, 'data-value': ''}, '—');
  const note = h('span', {class: 'stat-sub'}, sub || '\u00a0');
  return {el: h('div', {class: 'stat'}, h('span', {class: 'stat-label'}, label), value, note), value, note};
}

function setStat(card, v, text, note) {
  card.value.dataset.value = v === null || v === undefined ? '' : String(v);
  setText(card.value, text ?? fmtInt(v));
  if (note !== undefined) setText(card.note, note || '\u00a0');
}

export function mount(root, {app}) {
  const ctrl = new AbortController();
  const cards = {
    redis: statCard('ov-redis', 'Redis'),
    memory: statCard('ov-memory', 'Redis memory'),
    workers: statCard('ov-workers', 'Live workers'),
    depth: statCard('ov-depth', 'Live tasks', 'not finished yet'),
    running: statCard('ov-running', 'Running'),
    dlq: statCard('ov-dlq', 'Dead letters'),
    kept: statCard('ov-kept', 'Finished, kept', 'until retention ends'),
    rate: statCard('ov-rate', 'Finished per second', 'last full minute'),
  };
  // Shown once the server reports Redis's memory.
  cards.memory.el.hidden = true;

  const tpSeries = [
    {key: 'succeeded', label: 'Succeeded', tone: 'ok', id: 'ov-succeeded'},
    {key: 'failed', label: 'Failed', tone: 'bad', id: 'ov-failed'},
    {key: 'retried', label: 'Retried', tone: 'warn', id: 'ov-retried'},
  ];
  const tpChart = new LineChart({label: 'Tasks finished per second, per minute', series: tpSeries, yFormat: fmtRate, floor: 0.1});
  const tpLegend = legend(tpSeries);
  const depthSeries = [{key: 'depth', label: 'Live tasks now', tone: 'accent', id: 'ov-depth-now'}];
  const depthChart = new LineChart({label: 'Total queue depth over time', series: depthSeries, step: true, area: true, floor: 2,
    emptyText: 'Collecting samples…'});
  const depthLegend = legend(depthSeries);

  const latBody = h('tbody', {});
  const queueBody = h('tbody', {});
  const queueFoot = h('a', {href: '#/queues', id: 'ov-queues-more'}, 'All queue details →');
  const tpNote = h('p', {class: 'note', id: 'ov-throughput-note', hidden: true});
  const status = h('div', {class: 'page-status'});

  add(root,
    pageHeader('Overview'),
    status,
    h('div', {class: 'stats'}, Object.values(cards).map(c => c.el)),
    h('div', {class: 'grid-2'},
      section('Throughput', h('p', {class: 'card-sub'}, `Per second, by minute, last ${WINDOW_MIN} minutes. Totals for the window:`),
        tpNote, tpLegend.el, tpChart.el),
      section('Queue depth', h('p', {class: 'card-sub'}, 'Live tasks in all queues, sampled since the dashboard was opened.'),
        depthLegend.el, depthChart.el)),
    h('div', {class: 'grid-2'},
      section('Latency',
        h('p', {class: 'card-sub'}, `Estimated from the power-of-two buckets of the last ${WINDOW_MIN} minutes.`),
        h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'ov-latency'},
          h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, ''), ['p50', 'p95', 'p99'].map(p => h('th', {class: 'num', scope: 'col'}, p)),
            h('th', {class: 'num', scope: 'col'}, 'Samples'))),
          latBody))),
      section('Queues',
        h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'ov-queues'},
          h('thead', {}, h('tr', {},
            h('th', {scope: 'col'}, 'Queue'), h('th', {class: 'num', scope: 'col'}, 'Live'),
            h('th', {class: 'num', scope: 'col'}, 'Ready'), h('th', {class: 'num', scope: 'col'}, 'Running'),
            h('th', {class: 'num', scope: 'col'}, 'Dead'), h('th', {scope: 'col'}, 'State'))),
          queueBody)),
        h('p', {class: 'card-foot'}, queueFoot))));

  function renderLatency(items) {
    const rows = [['Wait (created → started)', 'wait_buckets', 'ov-wait'], ['Run (handler duration)', 'run_buckets', 'ov-run']];
    latBody.replaceChildren(...rows.map(([label, f, id]) => {
      const {total, values} = percentiles(sumBuckets(items, f), [0.5, 0.95, 0.99]);
      return h('tr', {id},
        h('th', {scope: 'row'}, label),
        values.map(v => h('td', {class: 'num'}, fmtEstimate(v))),
        h('td', {class: 'num'}, fmtInt(total)));
    }));
  }

  function renderStats(items) {
    const xs = [], vals = {succeeded: [], failed: [], retried: []};
    const totals = {succeeded: 0, failed: 0, retried: 0};
    const now = Date.now();
    items.forEach(m => {
      const t = new Date(m.minute).getTime();
      // The current minute is still filling up: rate it by its elapsed part.
      const secs = Math.min(60, Math.max(10, (now - t) / 1000));
      const failed = m.failed + m.dead_lettered;
      xs.push(t);
      vals.succeeded.push(m.succeeded / secs);
      vals.failed.push(failed / secs);
      vals.retried.push(m.retried / secs);
      totals.succeeded += m.succeeded;
      totals.failed += failed;
      totals.retried += m.retried;
    });
    tpChart.update(xs, vals);
    for (const k of Object.keys(totals)) {
      tpLegend.cells[k].dataset.value = String(totals[k]);
      setText(tpLegend.cells[k], fmtInt(totals[k]));
    }
    const prev = items.length > 1 ? items[items.length - 2] : null;
    const done = prev ? prev.succeeded + prev.failed + prev.dead_lettered : null;
    setStat(cards.rate, done === null ? null : done / 60, done === null ? '—' : fmtRate(done / 60));
    renderLatency(items);
  }

  function renderQueues(qs, totals, more, memory) {
    app.recordDepth(totals.depth);
    const depth = totals.depth;
    setStat(cards.depth, depth);
    setStat(cards.running, totals.running);
    setStat(cards.kept, totals.retained);
    renderMemory(memory);
    setText(queueFoot, more ? `All ${fmtInt(totals.queues)} queues →` : 'All queue details →');
    const dead = totals.dlq;
    setStat(cards.dlq, dead);
    if (!dead) setText(cards.dlq.note, 'none');
    else if (!cards.dlq.note.querySelector('a')) cards.dlq.note.replaceChildren(h('a', {href: '#/dlq'}, 'Review dead letters →'));
    depthLegend.cells.depth.dataset.value = String(depth);
    setText(depthLegend.cells.depth, fmtInt(depth));
    // The chart spans the samples taken (at least a minute, at most the
    // window), so that it is readable soon after the page opens.
    const now = Date.now();
    const hist = app.depthHistory;
    const from = Math.min(now - 60000, Math.max(now - WINDOW_MIN * 60000, hist.length ? hist[0].t : now));
    depthChart.update(hist.map(s => s.t), {depth: hist.map(s => s.depth)}, [from, now]);
    if (!qs.length) {
      queueBody.replaceChildren(h('tr', {class: 'empty'}, h('td', {colspan: 6}, 'No queues yet: submit a task to create one.')));
      return;
    }
    keepFocus(queueBody, () => queueBody.replaceChildren(...qs.map(q => h('tr', {dataset: {queue: q.queue}},
      h('th', {scope: 'row'}, h('a', {href: `#/tasks?queue=${encodeURIComponent(q.queue)}`}, q.queue)),
      h('td', {class: 'num'}, fmtInt(q.depth)),
      h('td', {class: 'num'}, fmtInt(q.ready_total)),
      h('td', {class: 'num'}, fmtInt(q.running)),
      h('td', {class: 'num'}, fmtInt(q.dlq)),
      h('td', {}, ...queueBadges(q))))));
  }

  // renderMemory shows Redis's used memory against maxmemory; the card is
  // left out when Redis does not report its memory.
  function renderMemory(m) {
    const card = cards.memory;
    card.el.hidden = !m;
    if (!m) return;
    setStat(card, m.used_bytes, fmtBytes(m.used_bytes), memoryNote(m));
    const high = m.max_bytes > 0 && m.used_bytes > MEMORY_WARN_AT * m.max_bytes;
    card.el.dataset.tone = high ? 'warn' : '';
    card.el.title = !m.max_bytes
      ? 'Redis has no maxmemory set: it grows until the host runs out of memory.'
      : high ? 'Redis is close to maxmemory: at 100 % every submission is refused.' : '';
  }

  // queueBadges says whether a queue runs: paused, and whether any live
  // worker serves it (an unserved queue's tasks wait, silently otherwise).
  function queueBadges(q) {
    const out = [];
    if (q.paused) out.push(h('span', {class: 'badge st-paused'}, 'paused'));
    if (q.unserved) {
      out.push(h('span', {class: 'badge st-unserved', title: `No live worker serves queue ${q.queue}: its tasks wait until one does.`}, 'no worker'));
    }
    if (!out.length) out.push(h('span', {class: 'badge st-active'}, 'active'));
    return out;
  }

  function renderWorkers(ws, more) {
    const live = ws.filter(w => w.live);
    const slots = live.reduce((n, w) => n + w.concurrency, 0);
    const busy = live.reduce((n, w) => n + w.in_flight.length, 0);
    const note = live.length ? `${fmtInt(busy)} of ${fmtInt(slots)} slots busy` : ws.length ? `${ws.length} stale` : 'none seen';
    setStat(cards.workers, live.length, more ? `${fmtInt(live.length)}+` : undefined,
      more ? `${note}, in the first ${fmtInt(ws.length)} worker records` : note);
  }

  async function loadReady() {
    const r = await ready(ctrl.signal);
    setStat(cards.redis, r.ok ? 1 : 0, r.ok ? 'Ready' : 'Not ready', r.ok ? 'checked ' + fmtTime(new Date().toISOString()) : r.message);
    cards.redis.el.dataset.tone = r.ok ? 'ok' : 'bad';
  }

  async function load() {
    const signal = ctrl.signal;
    const [qs, ws, st] = await Promise.allSettled([
      api('queues', {query: {limit: OVERVIEW_QUEUES}, signal}),
      api('workers', {query: {limit: OVERVIEW_WORKERS}, signal}),
      api('stats', {query: {window: `${WINDOW_MIN}m`}, signal}),
    ]);
    if (signal.aborted) return;
    // With very many queues the API refuses to sum the window over all of
    // them (a bound, not a failure): say so where the chart would be.
    const tooMany = st.status === 'rejected' && st.reason?.status === 400 && ['window', 'queue'].includes(st.reason.details?.field);
    tpNote.hidden = !tooMany;
    if (tooMany) setText(tpNote, `Throughput over all queues is not shown: ${st.reason.message}`);
    const failed = [qs, ws, st].find(r => r.status === 'rejected' && !(r === st && tooMany));
    status.replaceChildren(failed ? errorBox(failed.reason, () => refresh.now()) : '');
    if (qs.status === 'fulfilled') renderQueues(qs.value.items, qs.value.totals, !!qs.value.next_cursor, qs.value.redis_memory);
    if (ws.status === 'fulfilled') renderWorkers(ws.value.items, !!ws.value.next_cursor);
    if (st.status === 'fulfilled') renderStats(st.value.items);
    markReady(root);
  }

  const refresh = refresher(load, {wait: 700, maxWait: 2500, idleMS: 15000});
  const readyRefresh = refresher(loadReady, {idleMS: 30000});
  readyRefresh.now();
  refresh.now();

  return {
    onEvent(ev) {
      if (TASK_EVENT.test(ev.type) || ev.type.startsWith('WORKER_') || ev.type.startsWith('QUEUE_')) refresh.soon();
    },
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      refresh.stop();
      readyRefresh.stop();
      tpChart.destroy();
      depthChart.destroy();
    },
  };
}

// memoryNote compares Redis's used memory with maxmemory: "of 1.0 GB (3%)",
// or "no maxmemory set" when there is none (max_bytes 0).
export function memoryNote(m) {
  if (!m.max_bytes) return 'no maxmemory set';
  const pct = 100 * m.used_bytes / m.max_bytes;
  return `of ${fmtBytes(m.max_bytes)} (${pct > 0 && pct < 1 ? '<1' : fmtInt(pct)}%)`;
}
