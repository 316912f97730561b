// Tasks: newest first, filtered by queue, status and type, with lookup by
// id. Rows follow the event feed: a status changes in place at once, and
// new tasks that match the filter appear at the top.

import {api} from '../api.js';
import {h, add, setText, fmtInt, fmtMS, fmtTime, statusBadge, statusLabel, taskLink, isTaskID, progressView, dedupKey, STATUSES, TERMINAL} from '../dom.js';
import {TASK_STATUS_BY_EVENT} from '../feed.js';
import {pageHeader} from '../ui.js';
import {refresher, errorBox, queueSelect, fillQueueSelect, field, markReady, moreLoader, readFilter, showFilter} from './common.js';

const PAGE = 50;
// The filters, as the URL's params and the API's query name them.
const FILTERS = ['queue', 'status', 'type'];

function durationText(t) {
  const ex = t.execution || {};
  if (ex.duration_ms !== null && ex.duration_ms !== undefined && t.status !== 'running') return fmtMS(ex.duration_ms);
  if (t.status === 'running' && ex.started_at) return 'running ' + fmtMS(Date.now() - new Date(ex.started_at).getTime());
  return '—';
}

export function mount(root, {app, params}) {
  let ctrl = new AbortController();
  let filter = readFilter(params, FILTERS);
  let next = null;
  const rows = new Map(); // task_id -> {tr, cells, task}
  const types = new Set();

  // --- controls ---------------------------------------------------------
  const lookupInput = h('input', {id: 'task-lookup', type: 'search', placeholder: '32 hex digits', autocomplete: 'off',
    spellcheck: 'false', class: 'mono', 'aria-describedby': 'task-lookup-error'});
  const lookupError = h('span', {class: 'form-error', id: 'task-lookup-error', role: 'alert'});
  const lookup = h('form', {class: 'inline-form', role: 'search', 'aria-label': 'Open a task by id'},
    field('Task id', lookupInput), h('button', {class: 'btn', type: 'submit', id: 'task-lookup-open'}, 'Open'), lookupError);
  lookup.addEventListener('submit', e => {
    e.preventDefault();
    const id = lookupInput.value.trim().toLowerCase();
    if (!isTaskID(id)) {
      setText(lookupError, 'A task id is 32 lowercase hex digits.');
      lookupInput.focus();
      return;
    }
    setText(lookupError, '');
    app.navigate(`/tasks/${id}`);
  });

  const queueSel = queueSelect('tasks-queue', [], filter.queue, v => apply({queue: v}));
  const statusSel = h('select', {id: 'tasks-status', name: 'status'},
    h('option', {value: ''}, 'Any status'),
    STATUSES.map(st => h('option', {value: st, selected: st === filter.status}, statusLabel(st))));
  statusSel.addEventListener('change', () => apply({status: statusSel.value}));
  const typeList = h('datalist', {id: 'tasks-types'});
  const typeInput = h('input', {id: 'tasks-type', name: 'type', type: 'search', list: 'tasks-types', value: filter.type,
    placeholder: 'any type', autocomplete: 'off', spellcheck: 'false'});
  const filters = h('form', {class: 'filters', 'aria-label': 'Filter tasks'},
    field('Queue', queueSel), field('Status', statusSel), field('Type', typeInput), typeList,
    h('div', {class: 'field field-actions'},
      h('button', {class: 'btn', type: 'submit'}, 'Apply'),
      h('button', {class: 'btn btn-ghost', type: 'button', onclick: () => apply({queue: '', status: '', type: ''})}, 'Clear')));
  filters.addEventListener('submit', e => { e.preventDefault(); apply({type: typeInput.value.trim()}); });
  typeInput.addEventListener('change', () => apply({type: typeInput.value.trim()}));

  function apply(change) {
    app.navigate('/tasks', {...filter, ...change});
  }

  // --- table --------------------------------------------------------------
  const tbody = h('tbody', {});
  const more = h('button', {class: 'btn', type: 'button', id: 'tasks-more', hidden: true}, 'Load more');
  const count = h('span', {class: 'muted', id: 'tasks-count'}, '');
  const status = h('div', {class: 'page-status'});
  more.addEventListener('click', () => loadMore());

  add(root,
    pageHeader('Tasks', lookup),
    filters,
    status,
    h('div', {class: 'card card-flush'}, h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'tasks-table'},
      h('thead', {}, h('tr', {},
        h('th', {scope: 'col'}, 'Task'), h('th', {scope: 'col'}, 'Type'), h('th', {scope: 'col'}, 'Queue'),
        h('th', {scope: 'col'}, 'Status'), h('th', {class: 'num', scope: 'col'}, 'Attempt'),
        h('th', {scope: 'col'}, 'Created'), h('th', {class: 'num', scope: 'col'}, 'Duration'), h('th', {scope: 'col'}, 'Progress'))),
      tbody))),
    h('div', {class: 'list-foot'}, count, more));

  function makeRow(t) {
    const cells = {
      status: h('td', {class: 'cell-status'}),
      attempt: h('td', {class: 'num'}),
      duration: h('td', {class: 'num'}),
      progress: h('td', {class: 'cell-progress'}),
    };
    const tr = h('tr', {dataset: {taskId: t.task_id}},
      h('td', {}, taskLink(t.task_id)),
      h('td', {class: 'cell-type'}, t.task_type, dedupKey(t) ? h('span', {class: 'cell-dedup', title: 'Dedup key'}, 'dedup ', dedupKey(t)) : null),
      h('td', {}, t.queue),
      cells.status,
      cells.attempt,
      h('td', {class: 'cell-time'}, fmtTime(t.created_at)),
      cells.duration,
      cells.progress);
    const row = {tr, cells, task: t};
    fillRow(row, t);
    return row;
  }

  function fillRow(row, t) {
    row.task = t;
    if (row.cells.status.dataset.status !== t.status) {
      row.cells.status.dataset.status = t.status;
      row.cells.status.replaceChildren(statusBadge(t.status));
      row.tr.dataset.status = t.status;
    }
    setText(row.cells.attempt, `${t.attempt} / ${t.max_attempts}`);
    setText(row.cells.duration, durationText(t));
    const shown = JSON.stringify(t.progress ?? null);
    if (row.cells.progress.dataset.shown !== shown) {
      row.cells.progress.dataset.shown = shown;
      const v = progressView(t.progress);
      row.cells.progress.replaceChildren(v);
    }
  }

  // render puts items (newest first) in the table, reusing rows so that
  // nothing focused is replaced.
  function render(items, append) {
    const order = [];
    const seen = new Set();
    for (const t of items) {
      types.add(t.task_type);
      let row = rows.get(t.task_id);
      if (row) fillRow(row, t);
      else {
        row = makeRow(t);
        rows.set(t.task_id, row);
      }
      order.push(row);
      seen.add(t.task_id);
    }
    if (append) {
      for (const row of order) if (row.tr.parentNode !== tbody) tbody.append(row.tr);
    } else {
      // Rows already shown but not in the fresh first page stay below it
      // (they were loaded with "Load more", or left the filter).
      const rest = [...rows.values()].filter(r => !seen.has(r.task.task_id) && r.tr.parentNode === tbody);
      const want = [...order, ...rest];
      want.forEach((row, i) => {
        if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] || null);
      });
      while (tbody.children.length > want.length) tbody.lastElementChild.remove();
    }
    const placeholder = tbody.querySelector('tr.empty');
    if (rows.size === 0 && !placeholder) {
      tbody.append(h('tr', {class: 'empty'}, h('td', {colspan: 8}, 'No tasks match these filters.')));
    } else if (rows.size && placeholder) placeholder.remove();
    setText(count, rows.size ? `${fmtInt(rows.size)} shown` : '');
    typeList.replaceChildren(...[...types].sort().map(t => h('option', {value: t})));
  }

  async function fetchPage(cursor) {
    return api('tasks', {query: {...filter, limit: PAGE, cursor}, signal: ctrl.signal});
  }

  async function load() {
    try {
      const page = await fetchPage('');
      if (next === null || rows.size <= PAGE) next = page.next_cursor;
      more.hidden = !next;
      render(page.items, false);
      status.replaceChildren();
    } catch (e) {
      if (e.name === 'AbortError') return;
      status.replaceChildren(errorBox(e, () => refresh.now()));
    }
    markReady(root);
  }

  const loadMore = moreLoader({more, status, render, fetchPage,
    cursor: {get: () => next, set: c => { next = c; }}});

  async function loadQueues() {
    try {
      const qs = await api('queues', {query: {limit: 1000}, signal: ctrl.signal});
      fillQueueSelect(queueSel, qs.items.map(q => q.queue));
    } catch { /* the filter still accepts typed names */ }
  }

  const refresh = refresher(load, {wait: 400, maxWait: 2000});
  refresh.now();
  loadQueues();

  // Running rows show a growing duration.
  const ticker = setInterval(() => {
    for (const row of rows.values()) if (row.task.status === 'running') setText(row.cells.duration, durationText(row.task));
  }, 1000);

  function matches(ev) {
    return (!filter.queue || ev.queue === filter.queue) && (!filter.type || ev.task_type === filter.type);
  }

  return {
    setParams(p) {
      filter = readFilter(p, FILTERS);
      showFilter(filter, {queue: queueSel, status: statusSel, type: typeInput});
      ctrl.abort();
      ctrl = new AbortController();
      rows.clear();
      tbody.replaceChildren();
      next = null;
      more.hidden = true;
      refresh.now();
    },
    onEvent(ev) {
      if (!ev.task_id) return;
      const row = rows.get(ev.task_id);
      if (ev.type === 'TASK_PROGRESS') {
        if (row && ev.metadata && 'progress' in ev.metadata) fillRow(row, {...row.task, progress: ev.metadata.progress});
        return;
      }
      const st = TASK_STATUS_BY_EVENT[ev.type];
      if (row && st) {
        const t = {...row.task, status: st, attempt: ev.attempt || row.task.attempt};
        if (st === 'running') t.execution = {...t.execution, started_at: ev.ts, duration_ms: null};
        if (TERMINAL.has(st) && ev.metadata?.duration_ms !== undefined) t.execution = {...t.execution, duration_ms: ev.metadata.duration_ms};
        fillRow(row, t);
        refresh.soon();
      } else if (st && matches(ev) && (!filter.status || filter.status === st)) {
        refresh.soon();
      }
    },
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      refresh.stop();
      clearInterval(ticker);
    },
  };
}
