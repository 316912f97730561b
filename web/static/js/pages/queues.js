// Queues: depth, ready tasks per priority band, delivered and scheduled
// tasks, dead letters and workers per queue, with pause and resume.

import {api} from '../api.js';
import {h, add, setText, fmtInt, fmtRate} from '../dom.js';
import {bandBars} from '../charts.js';
import {pageHeader, confirmAction, toast, errorToast, readOnlyNote} from '../ui.js';
import {refresher, errorBox, markReady} from './common.js';

export function mount(root, {app}) {
  const ctrl = new AbortController();
  const admin = app.session.canAdmin;
  const busy = new Set();
  const rows = new Map(); // queue -> {tr, cells, key}
  const tbody = h('tbody', {});
  const status = h('div', {class: 'page-status'});

  const cols = [
    ['Queue', ''], ['State', ''], ['Live', 'num'], ['Ready', 'num'], ['By band (p9 → p0)', ''], ['Running', 'num'],
    ['Delivered', 'num'], ['Scheduled', 'num'], ['Dead', 'num'], ['Workers', 'num'], ['Done / min', 'num'],
  ];
  if (admin) cols.push(['', '']);

  add(root,
    pageHeader('Queues'),
    admin ? null : readOnlyNote(),
    status,
    h('div', {class: 'card card-flush'}, h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'queues-table'},
      h('thead', {}, h('tr', {}, cols.map(([c, cls]) => h('th', {class: cls || null, scope: 'col'}, c)))),
      tbody))),
    h('p', {class: 'muted small'},
      'Live: tasks not finished yet (queued, delayed, running, retrying). Delivered: handed to a worker and not yet acknowledged. ',
      'Scheduled: delayed or waiting for a retry. A paused queue delivers nothing until it is resumed; running tasks finish.'));

  function stateBadge(q) {
    return q.paused ? h('span', {class: 'badge st-paused'}, 'paused') : h('span', {class: 'badge st-active'}, 'active');
  }

  function actionCell(q) {
    const label = q.paused ? 'Resume' : 'Pause';
    return h('button', {
      class: q.paused ? 'btn btn-small btn-primary' : 'btn btn-small',
      type: 'button', dataset: {admin: '', action: label.toLowerCase(), queue: q.queue},
      disabled: busy.has(q.queue), 'aria-label': `${label} queue ${q.queue}`,
      onclick: () => togglePause(q),
    }, label);
  }

  function makeRow(q) {
    const c = {};
    const num = k => (c[k] = h('td', {class: 'num'}));
    const tr = h('tr', {dataset: {queue: q.queue}},
      h('th', {scope: 'row'}, h('a', {href: `#/tasks?queue=${encodeURIComponent(q.queue)}`}, q.queue)),
      c.state = h('td', {}),
      num('depth'), num('ready'), c.bands = h('td', {class: 'cell-bands'}), num('running'),
      num('pending'), num('scheduled'), c.dlq = h('td', {class: 'num'}), num('workers'), num('rate'),
      admin ? (c.action = h('td', {class: 'cell-action'})) : null);
    return {tr, c, key: ''};
  }

  function fill(row, q) {
    const c = row.c;
    setText(c.depth, fmtInt(q.depth));
    setText(c.ready, fmtInt(q.ready_total));
    setText(c.running, fmtInt(q.running));
    setText(c.pending, fmtInt(q.pending));
    setText(c.scheduled, fmtInt(q.scheduled));
    setText(c.workers, fmtInt(q.live_workers));
    setText(c.rate, fmtRate(q.throughput?.per_minute ?? 0));
    const bandKey = JSON.stringify(q.ready);
    if (c.bands.dataset.key !== bandKey) {
      c.bands.dataset.key = bandKey;
      c.bands.replaceChildren(bandBars(q.ready));
    }
    c.dlq.replaceChildren(q.dlq ? h('a', {href: `#/dlq?queue=${encodeURIComponent(q.queue)}`}, fmtInt(q.dlq)) : '0');
    const key = `${q.paused}|${busy.has(q.queue)}`;
    if (row.key !== key) {
      row.key = key;
      row.tr.dataset.paused = String(q.paused);
      c.state.replaceChildren(stateBadge(q));
      if (c.action) {
        const hadFocus = c.action.contains(document.activeElement);
        c.action.replaceChildren(actionCell(q));
        if (hadFocus) c.action.querySelector('button').focus();
      }
    }
  }

  function render(qs) {
    app.recordDepth(qs);
    if (!qs.length) {
      rows.clear();
      tbody.replaceChildren(h('tr', {class: 'empty'}, h('td', {colspan: cols.length}, 'No queues yet: a queue appears with its first task.')));
      return;
    }
    tbody.querySelector('tr.empty')?.remove();
    const names = new Set(qs.map(q => q.queue));
    for (const [name, row] of rows) if (!names.has(name)) { row.tr.remove(); rows.delete(name); }
    qs.forEach((q, i) => {
      let row = rows.get(q.queue);
      if (!row) {
        row = makeRow(q);
        rows.set(q.queue, row);
      }
      fill(row, q);
      if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] || null);
    });
  }

  async function load() {
    try {
      const res = await api('queues', {signal: ctrl.signal});
      render(res.items);
      status.replaceChildren();
    } catch (e) {
      if (e.name === 'AbortError') return;
      status.replaceChildren(errorBox(e, () => refresh.now()));
    }
    markReady(root);
  }

  async function togglePause(q) {
    const pause = !q.paused;
    const yes = await confirmAction({
      title: pause ? `Pause queue ${q.queue}?` : `Resume queue ${q.queue}?`,
      body: pause
        ? `Workers stop fetching from ${q.queue} until it is resumed. Tasks already running finish; new submissions are still accepted and wait.`
        : `Workers start fetching from ${q.queue} again.`,
      confirm: pause ? 'Pause queue' : 'Resume queue',
      danger: pause,
    });
    if (!yes) return;
    busy.add(q.queue);
    fill(rows.get(q.queue), q);
    try {
      await api(`queues/${encodeURIComponent(q.queue)}/${pause ? 'pause' : 'resume'}`, {method: 'POST'});
      toast(`Queue ${q.queue} ${pause ? 'paused' : 'resumed'}`, 'ok');
    } catch (e) {
      errorToast(e, `Could not ${pause ? 'pause' : 'resume'} ${q.queue}`);
    } finally {
      busy.delete(q.queue);
      await refresh.now();
    }
  }

  const refresh = refresher(load, {wait: 800, maxWait: 3000, idleMS: 15000});
  refresh.now();

  return {
    onEvent(ev) {
      if (ev.queue || ev.type.startsWith('WORKER_')) refresh.soon();
    },
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      refresh.stop();
    },
  };
}
