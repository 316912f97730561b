// Queues: depth, ready tasks per priority band, delivered and scheduled
// tasks, dead letters and workers per queue, with pause and resume, and
// creating and deleting queues. The API pages the list by name; the page
// shows the first PAGE queues and reads more on request.

import {api} from '../api.js';
import {h, add, setText, fmtInt, fmtRate, statusLabel, STATUSES} from '../dom.js';
import {bandBars} from '../charts.js';
import {pageHeader, confirmAction, toast, errorToast, readOnlyNote} from '../ui.js';
import {refresher, errorBox, markReady, field, keyedRows} from './common.js';

const PAGE = 100;
const QUEUE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export function mount(root, {app}) {
  const ctrl = new AbortController();
  const admin = app.session.canAdmin;
  const busy = new Set();
  const tbody = h('tbody', {});
  const status = h('div', {class: 'page-status'});
  let shown = PAGE; // how many queues to read and show
  const count = h('p', {class: 'muted small', id: 'queues-count'});
  const moreBtn = h('button', {class: 'btn', type: 'button', id: 'queues-more', hidden: true,
    onclick: () => { shown += PAGE; refresh.now(); }}, `Show ${PAGE} more`);

  const createInput = h('input', {id: 'queue-create-name', type: 'text', placeholder: 'queue name', autocomplete: 'off',
    spellcheck: 'false', class: 'mono', maxlength: 64, 'aria-describedby': 'queue-create-error'});
  const createError = h('span', {class: 'form-error', id: 'queue-create-error', role: 'alert'});
  const createForm = admin ? h('form', {class: 'inline-form', id: 'queue-create', 'aria-label': 'Create a queue'},
    field('New queue', createInput),
    h('button', {class: 'btn btn-primary', type: 'submit', id: 'queue-create-submit', dataset: {admin: ''}}, 'Create queue'),
    createError) : null;
  createForm?.addEventListener('submit', e => { e.preventDefault(); createQueue(); });

  const cols = [
    ['Queue', ''], ['State', ''], ['Live', 'num'], ['Ready', 'num'], ['By band (p9 → p0)', ''], ['Running', 'num'],
    ['Delivered', 'num'], ['Scheduled', 'num'], ['Dead', 'num'], ['Kept', 'num'], ['Workers', 'num'], ['Done / min', 'num'],
    ['Limits', ''],
  ];
  if (admin) cols.push(['', '']);
  const table = keyedRows(tbody, {key: q => q.queue, make: makeRow, fill, colspan: cols.length,
    empty: 'No queues yet: a queue appears with its first task, or when an admin creates it.'});

  add(root,
    pageHeader('Queues'),
    admin ? null : readOnlyNote(),
    createForm,
    status,
    h('div', {class: 'card card-flush'}, h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'queues-table'},
      h('thead', {}, h('tr', {}, cols.map(([c, cls]) => h('th', {class: cls || null, scope: 'col'}, c)))),
      tbody))),
    h('div', {class: 'inline-form'}, count, moreBtn),
    h('p', {class: 'muted small'},
      'Live: tasks not finished yet (waiting on workflow deps, queued, delayed, running, retrying). Delivered: handed to a worker and not yet acknowledged. ',
      'Scheduled: delayed or waiting for a retry. Kept: finished tasks kept until their retention ends (dead letters count under Dead). ',
      'A paused queue delivers nothing until it is resumed; running tasks finish.'));

  function stateBadge(q) {
    return q.paused ? h('span', {class: 'badge st-paused'}, 'paused') : h('span', {class: 'badge st-active'}, 'active');
  }

  function actionCell(q) {
    const label = q.paused ? 'Resume' : 'Pause';
    return [h('button', {
      class: q.paused ? 'btn btn-small btn-primary' : 'btn btn-small',
      type: 'button', dataset: {admin: '', action: label.toLowerCase(), queue: q.queue},
      disabled: busy.has(q.queue), 'aria-label': `${label} queue ${q.queue}`,
      onclick: () => togglePause(q),
    }, label), ' ', h('button', {
      class: 'btn btn-small btn-ghost', type: 'button', dataset: {admin: '', action: 'delete', queue: q.queue},
      disabled: busy.has(q.queue), 'aria-label': `Delete queue ${q.queue}`,
      onclick: () => deleteQueue(q),
    }, 'Delete')];
  }

  function makeRow(q) {
    const c = {};
    const num = k => (c[k] = h('td', {class: 'num'}));
    const tr = h('tr', {dataset: {queue: q.queue}},
      h('th', {scope: 'row'}, h('a', {href: `#/tasks?queue=${encodeURIComponent(q.queue)}`}, q.queue)),
      c.state = h('td', {}),
      num('depth'), num('ready'), c.bands = h('td', {class: 'cell-bands'}), num('running'),
      num('pending'), num('scheduled'), c.dlq = h('td', {class: 'num'}), c.kept = h('td', {class: 'num cell-kept'}),
      num('workers'), num('rate'),
      c.limits = h('td', {class: 'cell-limits small'}),
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
    const top = describeTopKeys(q.top_keys);
    const dedup = describeDedup(q.deduplicated);
    setText(c.limits, [describeLimits(q.limits), top && `top keys: ${top}`, dedup && `deduplicated: ${dedup}`]
      .filter(Boolean).join(' · '));
    c.limits.title = [top && `Keys with the most queued tasks: ${top}`,
      dedup && `Deduplicated submissions since the queue was created: ${dedup}`].filter(Boolean).join('\n');
    const kept = keptCounts(q.retained);
    c.kept.dataset.value = String(kept.total);
    setText(c.kept, fmtInt(kept.total));
    c.kept.title = kept.title;
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
        c.action.replaceChildren(...actionCell(q));
        if (hadFocus) c.action.querySelector('button').focus();
      }
    }
  }

  function render(qs, totals, more) {
    app.recordDepth(totals.depth);
    setText(count, more || qs.length < totals.queues
      ? `Showing ${fmtInt(qs.length)} of ${fmtInt(totals.queues)} queues, by name.` : '');
    moreBtn.hidden = !more;
    table.render(qs);
  }

  async function load() {
    try {
      // Follow the cursor until shown queues are read; the first page
      // carries the totals over every queue.
      const items = [];
      let cursor = '', totals = null, more = false;
      for (;;) {
        const res = await api('queues', {query: {limit: Math.min(1000, shown - items.length), cursor}, signal: ctrl.signal});
        totals ??= res.totals;
        items.push(...res.items);
        more = !!res.next_cursor;
        if (!more || items.length >= shown) break;
        cursor = res.next_cursor;
      }
      render(items, totals, more);
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
    fill(table.get(q.queue), q);
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

  async function createQueue() {
    const name = createInput.value.trim();
    if (!QUEUE_NAME.test(name)) {
      setText(createError, 'A queue name is 1 to 64 lowercase letters, digits, - or _, starting with a letter or digit.');
      createInput.focus();
      return;
    }
    setText(createError, '');
    try {
      const res = await api(`queues/${encodeURIComponent(name)}`, {method: 'PUT'});
      toast(res.created ? `Queue ${name} created` : `Queue ${name} already existed`, 'ok');
      createInput.value = '';
    } catch (e) {
      errorToast(e, `Could not create ${name}`);
    } finally {
      await refresh.now();
    }
  }

  async function deleteQueue(q) {
    const yes = await confirmAction({
      title: `Delete queue ${q.queue}?`,
      body: `${q.queue} leaves the queue list. Only an empty queue can be deleted: one that still holds tasks or dead letters is refused. Under the declared queue policy, producers can no longer submit to it.`,
      confirm: 'Delete queue',
      danger: true,
    });
    if (!yes) return;
    busy.add(q.queue);
    fill(table.get(q.queue), q);
    try {
      await api(`queues/${encodeURIComponent(q.queue)}`, {method: 'DELETE'});
      toast(`Queue ${q.queue} deleted`, 'ok');
    } catch (e) {
      errorToast(e, `Could not delete ${q.queue}`);
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

// describeLimits names a queue's flow-control limits, e.g.
// "10/1s · 5 running · 1 per key · fair (acme ×5) · 2/1s per key · fifo
// per key · outcome events only"; "" when none are set.
export function describeLimits(l) {
  if (!l) return '';
  const parts = [];
  if (l.rate) parts.push(`${l.rate.limit}/${l.rate.period}` + (l.rate.burst > 1 ? ` (burst ${l.rate.burst})` : ''));
  if (l.concurrency) parts.push(`${l.concurrency} running`);
  if (l.key_concurrency) parts.push(`${l.key_concurrency} per key`);
  if (l.fairness) {
    const w = Object.entries(l.fairness.weights || {}).sort((a, b) => a[0].localeCompare(b[0]));
    const dw = l.fairness.default_weight > 1 ? [`others ×${l.fairness.default_weight}`] : [];
    const named = [...w.slice(0, 5).map(([k, n]) => `${k} ×${n}`), ...(w.length > 5 ? [`+${w.length - 5}`] : []), ...dw];
    parts.push(named.length ? `fair (${named.join(', ')})` : 'fair');
  }
  if (l.key_rate) parts.push(`${l.key_rate.limit}/${l.key_rate.period} per key` + (l.key_rate.burst > 1 ? ` (burst ${l.key_rate.burst})` : ''));
  if (l.key_order === 'fifo') parts.push('fifo per key');
  // Not a limit, but what the queue's live views can show: with outcomes,
  // no queued or started events.
  if (l.events === 'outcomes') parts.push('outcome events only');
  return parts.join(' · ');
}

// describeTopKeys names the keys with the most queued tasks, e.g.
// "acme 1,200, (no key) 3"; "" when there are none.
export function describeTopKeys(top) {
  return (top || []).slice(0, 5).map(k => `${k.key === '' ? '(no key)' : k.key} ${fmtInt(k.queued)}`).join(', ');
}

// describeDedup lists a queue's deduplicated submissions by mode, in the
// modes' order (docs/deduplication.md), e.g. "drop 12, replace 3".
export function describeDedup(counts) {
  const order = ['drop', 'throttle', 'debounce', 'replace', 'keep_last'];
  return Object.entries(counts || {}).filter(([, n]) => n > 0)
    .sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]))
    .map(([mode, n]) => `${mode} ${fmtInt(n)}`).join(', ');
}

// keptCounts sums a queue's retained counts (by status; statuses with none
// are left out) and describes them for a tooltip, one status a line.
export function keptCounts(retained) {
  const counts = Object.entries(retained || {}).filter(([, n]) => n > 0);
  const rank = st => { const i = STATUSES.indexOf(st); return i < 0 ? STATUSES.length : i; };
  counts.sort((a, b) => rank(a[0]) - rank(b[0]) || a[0].localeCompare(b[0]));
  const total = counts.reduce((t, [, n]) => t + n, 0);
  const title = total
    ? ['Finished tasks kept until their retention ends:', ...counts.map(([st, n]) => `${fmtInt(n)} ${statusLabel(st)}`)].join('\n')
    : 'No finished tasks kept.';
  return {total, title};
}
