// Workflows: newest first, filtered by status and name, with the counts of
// each one's nodes by status. The list answer names workflows only, so the
// page reads each shown workflow once (a few at a time) for its counts and
// then keeps them current from its nodes' events.

import {api, APIError} from '../api.js';
import {TASK_STATUS_BY_EVENT, WORKFLOW_EVENTS} from '../feed.js';
import {h, add, setText, fmtInt, fmtTime, statusBadge, statusLabel, shortID, isTaskID} from '../dom.js';
import {statusBar, fillStatusBar, countsText} from '../dag.js';
import {pageHeader} from '../ui.js';
import {refresher, errorBox, field, markReady, moreLoader, readFilter, showFilter} from './common.js';

const PAGE = 20;
// A list call examines a bounded number of workflows, so a filtered page
// may come back short while more remain: a page read follows next_cursor
// this many times at most before showing what it found.
const PAGE_CALLS = 5;
// Workflow reads (for the counts) in flight at once.
const DETAIL_READS = 3;
const FILTERS = ['status', 'name'];
const WORKFLOW_STATUSES = ['submitting', 'running', 'succeeded', 'failed', 'cancelled'];

// idTime is the creation time a workflow id carries (a UUIDv7: its first
// 48 bits are milliseconds since the epoch), or null.
function idTime(id) {
  const ms = parseInt(id.slice(0, 12), 16);
  return Number.isFinite(ms) && ms > 0 ? new Date(ms).toISOString() : null;
}

export function mount(root, {app, params}) {
  let ctrl = new AbortController();
  let filter = readFilter(params, FILTERS);
  let next = null;
  const rows = new Map(); // workflow_id -> row
  const byTask = new Map(); // node task_id -> row
  const wanted = []; // rows waiting for their workflow read
  let reading = 0;

  // --- controls -----------------------------------------------------------
  const lookupInput = h('input', {id: 'workflow-lookup', type: 'search', placeholder: '32 hex digits', autocomplete: 'off',
    spellcheck: 'false', class: 'mono', 'aria-describedby': 'workflow-lookup-error'});
  const lookupError = h('span', {class: 'form-error', id: 'workflow-lookup-error', role: 'alert'});
  const lookup = h('form', {class: 'inline-form', role: 'search', 'aria-label': 'Open a workflow by id'},
    field('Workflow id', lookupInput), h('button', {class: 'btn', type: 'submit', id: 'workflow-lookup-open'}, 'Open'), lookupError);
  lookup.addEventListener('submit', e => {
    e.preventDefault();
    const id = lookupInput.value.trim().toLowerCase();
    if (!isTaskID(id)) {
      setText(lookupError, 'A workflow id is 32 lowercase hex digits.');
      lookupInput.focus();
      return;
    }
    setText(lookupError, '');
    app.navigate(`/workflows/${id}`);
  });

  const statusSel = h('select', {id: 'workflows-status', name: 'status'},
    h('option', {value: ''}, 'Any status'),
    WORKFLOW_STATUSES.map(st => h('option', {value: st, selected: st === filter.status}, statusLabel(st))));
  statusSel.addEventListener('change', () => apply({status: statusSel.value}));
  const nameInput = h('input', {id: 'workflows-name', name: 'name', type: 'search', value: filter.name, maxlength: '128',
    placeholder: 'exact name', autocomplete: 'off', spellcheck: 'false'});
  const filters = h('form', {class: 'filters', 'aria-label': 'Filter workflows'},
    field('Status', statusSel), field('Name', nameInput),
    h('div', {class: 'field field-actions'},
      h('button', {class: 'btn', type: 'submit'}, 'Apply'),
      h('button', {class: 'btn btn-ghost', type: 'button', onclick: () => apply({status: '', name: ''})}, 'Clear')));
  filters.addEventListener('submit', e => { e.preventDefault(); apply({status: statusSel.value, name: nameInput.value.trim()}); });
  nameInput.addEventListener('change', () => apply({name: nameInput.value.trim()}));

  function apply(change) {
    app.navigate('/workflows', {...filter, ...change});
  }

  // --- table --------------------------------------------------------------
  const tbody = h('tbody', {});
  const more = h('button', {class: 'btn', type: 'button', id: 'workflows-more', hidden: true}, 'Load more');
  const count = h('span', {class: 'muted', id: 'workflows-count'}, '');
  const status = h('div', {class: 'page-status'});
  more.addEventListener('click', () => loadMore());

  add(root,
    pageHeader('Workflows', lookup),
    filters,
    status,
    h('div', {class: 'card card-flush'}, h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'workflows-table'},
      h('thead', {}, h('tr', {},
        h('th', {scope: 'col'}, 'Workflow'), h('th', {scope: 'col'}, 'Name'), h('th', {scope: 'col'}, 'Status'),
        h('th', {scope: 'col'}, 'Created'), h('th', {class: 'num', scope: 'col'}, 'Nodes'), h('th', {scope: 'col'}, 'Nodes by status'))),
      tbody))),
    h('div', {class: 'list-foot'}, count, more),
    h('p', {class: 'muted small'}, 'Submit workflows with POST /api/v1/workflows or dtq workflows submit.'));

  function makeRow(w) {
    const cells = {
      status: h('td', {class: 'cell-status'}),
      created: h('td', {class: 'cell-time'}, fmtTime(idTime(w.workflow_id))),
      nodes: h('td', {class: 'num'}, '…'),
      counts: h('span', {class: 'wf-counts-text'}, '…'),
    };
    cells.bar = statusBar({}, 0, {width: 120});
    const tr = h('tr', {dataset: {workflowId: w.workflow_id}},
      h('td', {}, h('a', {href: `#/workflows/${w.workflow_id}`, class: 'mono', title: w.workflow_id}, shortID(w.workflow_id))),
      h('td', {class: 'cell-type'}, w.name || h('span', {class: 'muted'}, '—')),
      cells.status,
      cells.created,
      cells.nodes,
      h('td', {class: 'cell-counts'}, h('div', {class: 'wf-counts-cell'}, cells.bar, cells.counts)));
    const row = {tr, cells, w, nodes: null, read: false};
    fillStatus(row, w.status);
    return row;
  }

  function fillStatus(row, st) {
    row.w = {...row.w, status: st};
    if (row.cells.status.dataset.status !== st) {
      row.cells.status.dataset.status = st;
      row.cells.status.replaceChildren(statusBadge(st));
      row.tr.dataset.status = st;
    }
  }

  // fillCounts shows a row's node counts from its nodes' statuses.
  function fillCounts(row) {
    if (!row.nodes) return;
    const c = {};
    for (const st of row.nodes.values()) c[st] = (c[st] || 0) + 1;
    setText(row.cells.nodes, fmtInt(row.nodes.size));
    fillStatusBar(row.cells.bar, c, row.nodes.size);
    setText(row.cells.counts, countsText(c));
    row.tr.dataset.counts = JSON.stringify(c);
  }

  // want queues a row for a read of its workflow (counts, created time).
  function want(row) {
    if (row.queued) return;
    row.queued = true;
    wanted.push(row);
    pump();
  }

  function pump() {
    while (reading < DETAIL_READS && wanted.length) {
      const row = wanted.shift();
      row.queued = false;
      if (rows.get(row.w.workflow_id) !== row) continue; // left the list
      reading++;
      const signal = ctrl.signal;
      readOne(row, signal).finally(() => { reading--; pump(); });
    }
  }

  async function readOne(row, signal) {
    try {
      const wf = await api(`workflows/${row.w.workflow_id}`, {signal});
      if (row.nodes) for (const id of row.nodes.keys()) byTask.delete(id);
      row.nodes = new Map(wf.nodes.map(n => [n.task_id, n.status]));
      for (const id of row.nodes.keys()) byTask.set(id, row);
      row.read = true;
      setText(row.cells.created, fmtTime(wf.created_at));
      fillStatus(row, wf.status);
      fillCounts(row);
    } catch (e) {
      if (e.name === 'AbortError') return;
      setText(row.cells.counts, e instanceof APIError && e.status === 404 ? 'gone (retention passed)' : 'could not be read');
    }
  }

  function render(items, append) {
    const order = [];
    const seen = new Set();
    for (const w of items) {
      let row = rows.get(w.workflow_id);
      if (row) {
        if (row.w.status !== w.status) { fillStatus(row, w.status); want(row); }
      } else {
        row = makeRow(w);
        rows.set(w.workflow_id, row);
        want(row);
      }
      order.push(row);
      seen.add(w.workflow_id);
    }
    if (append) {
      for (const row of order) if (row.tr.parentNode !== tbody) tbody.append(row.tr);
    } else {
      const rest = [...rows.values()].filter(r => !seen.has(r.w.workflow_id) && r.tr.parentNode === tbody);
      const want = [...order, ...rest];
      want.forEach((row, i) => {
        if (tbody.children[i] !== row.tr) tbody.insertBefore(row.tr, tbody.children[i] || null);
      });
      while (tbody.children.length > want.length) tbody.lastElementChild.remove();
    }
    const placeholder = tbody.querySelector('tr.empty');
    if (rows.size === 0 && !placeholder) {
      tbody.append(h('tr', {class: 'empty'}, h('td', {colspan: 6}, next
        ? 'None found so far: Load more looks further back.' : 'No workflows match these filters.')));
    } else if (rows.size && placeholder) placeholder.remove();
    setText(count, rows.size ? `${fmtInt(rows.size)} shown` : '');
  }

  // fetchPage reads from cursor until it has a page of workflows or the
  // list ends (a filtered call may answer few or none while more remain).
  async function fetchPage(cursor) {
    const items = [];
    let c = cursor;
    for (let i = 0; i < PAGE_CALLS; i++) {
      const page = await api('workflows', {query: {...filter, limit: PAGE - items.length, cursor: c}, signal: ctrl.signal});
      items.push(...page.items);
      c = page.next_cursor;
      if (!c || items.length >= PAGE) break;
    }
    return {items, next_cursor: c};
  }

  async function load() {
    try {
      const page = await fetchPage('');
      if (next === null || rows.size <= PAGE) next = page.next_cursor;
      more.hidden = !next;
      tbody.querySelector('tr.empty')?.remove();
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

  const refresh = refresher(load, {wait: 500, maxWait: 2500});
  refresh.now();

  function matches(meta) {
    return (!filter.name || meta.name === filter.name) && (!filter.status || meta.status === filter.status);
  }

  return {
    setParams(p) {
      filter = readFilter(p, FILTERS);
      showFilter(filter, {status: statusSel, name: nameInput});
      ctrl.abort();
      ctrl = new AbortController();
      rows.clear();
      byTask.clear();
      wanted.length = 0;
      tbody.replaceChildren();
      next = null;
      more.hidden = true;
      refresh.now();
    },
    onEvent(ev) {
      if (WORKFLOW_EVENTS.has(ev.type)) {
        const meta = ev.metadata || {};
        const row = rows.get(meta.workflow_id);
        if (row) {
          if (meta.status) fillStatus(row, meta.status);
          want(row);
        } else if (matches(meta)) refresh.soon();
        return;
      }
      const row = ev.task_id && byTask.get(ev.task_id);
      const st = TASK_STATUS_BY_EVENT[ev.type];
      if (row && st && row.nodes) {
        row.nodes.set(ev.task_id, st);
        fillCounts(row);
      }
    },
    onReset() {
      for (const row of rows.values()) want(row);
      refresh.now();
    },
    destroy() {
      ctrl.abort();
      refresh.stop();
    },
  };
}
