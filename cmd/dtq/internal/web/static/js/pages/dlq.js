// Dead letters: filtered by queue, task type and error class, with the
// last error of each. Requeue or discard one; requeue or purge everything
// that matches after a confirmation that shows how many.

import {api, listAll} from '../api.js';
import {h, add, setText, fmtInt, fmtTime, prettyJSON, taskLink, dedupKey} from '../dom.js';
import {pageHeader, confirmAction, toast, errorToast, readOnlyNote} from '../ui.js';
import {refresher, errorBox, queueSelect, fillQueueSelect, field, markReady, moreLoader, readFilter, showFilter} from './common.js';

const PAGE = 50;
// The filters, as the URL's params and the API's query name them.
const FILTERS = ['queue', 'type', 'error_class'];
// Counting what a bulk action would touch reads at most this many entries.
const COUNT_MAX = 20000;

export function mount(root, {app, params}) {
  let ctrl = new AbortController();
  const admin = app.session.canAdmin;
  let filter = readFilter(params, FILTERS);
  let next = null;
  let bulkBusy = false;
  const busy = new Set();
  const classes = new Set(), types = new Set();

  const queueSel = queueSelect('dlq-queue', [], filter.queue, v => apply({queue: v}));
  const typeList = h('datalist', {id: 'dlq-types'});
  const classList = h('datalist', {id: 'dlq-classes'});
  const typeInput = h('input', {id: 'dlq-type', type: 'search', list: 'dlq-types', value: filter.type, placeholder: 'any type',
    autocomplete: 'off', spellcheck: 'false'});
  const classInput = h('input', {id: 'dlq-class', type: 'search', list: 'dlq-classes', value: filter.error_class,
    placeholder: 'any error class', autocomplete: 'off', spellcheck: 'false'});
  const filters = h('form', {class: 'filters', 'aria-label': 'Filter dead letters'},
    field('Queue', queueSel), field('Task type', typeInput), field('Error class', classInput), typeList, classList,
    h('div', {class: 'field field-actions'},
      h('button', {class: 'btn', type: 'submit'}, 'Apply'),
      h('button', {class: 'btn btn-ghost', type: 'button', onclick: () => apply({queue: '', type: '', error_class: ''})}, 'Clear')));
  filters.addEventListener('submit', e => {
    e.preventDefault();
    apply({type: typeInput.value.trim(), error_class: classInput.value.trim()});
  });
  for (const inp of [typeInput, classInput]) {
    inp.addEventListener('change', () => apply({type: typeInput.value.trim(), error_class: classInput.value.trim()}));
  }

  function apply(change) { app.navigate('/dlq', {...filter, ...change}); }

  const bulkRequeue = h('button', {class: 'btn', type: 'button', id: 'dlq-requeue-all', dataset: {admin: ''}}, 'Requeue all matching…');
  const bulkPurge = h('button', {class: 'btn btn-danger', type: 'button', id: 'dlq-purge-all', dataset: {admin: ''}}, 'Purge all matching…');
  bulkRequeue.addEventListener('click', () => bulk('requeue'));
  bulkPurge.addEventListener('click', () => bulk('purge'));

  const list = h('div', {class: 'dlq-list', id: 'dlq-list'});
  const more = h('button', {class: 'btn', type: 'button', id: 'dlq-more', hidden: true}, 'Load more');
  more.addEventListener('click', () => loadMore());
  const count = h('span', {class: 'muted', id: 'dlq-count'});
  const status = h('div', {class: 'page-status'});

  add(root,
    pageHeader('Dead letters', admin ? [bulkRequeue, bulkPurge] : null),
    admin ? null : readOnlyNote(),
    filters,
    status,
    list,
    h('div', {class: 'list-foot'}, count, more));

  const entries = new Map(); // task_id -> element

  function entryView(e) {
    const ex = e.execution || {};
    const acts = admin ? h('div', {class: 'dlq-actions'},
      h('button', {class: 'btn btn-small btn-primary', type: 'button', dataset: {admin: '', action: 'requeue', taskId: e.task_id},
        disabled: busy.has(e.task_id), 'aria-label': `Requeue task ${e.task_id}`, onclick: () => requeueOne(e)}, 'Requeue'),
      h('button', {class: 'btn btn-small', type: 'button', dataset: {admin: '', action: 'discard', taskId: e.task_id},
        disabled: busy.has(e.task_id), 'aria-label': `Discard task ${e.task_id}`, onclick: () => discardOne(e)}, 'Discard')) : null;
    return h('article', {class: 'dlq-entry card', dataset: {taskId: e.task_id, failedAt: e.failed_at}},
      h('div', {class: 'dlq-head'},
        h('div', {class: 'dlq-title'},
          h('span', {class: 'badge ev-bad'}, ex.error_class || 'Error'),
          h('strong', {class: 'cell-type'}, e.task_type),
          h('span', {class: 'muted'}, 'in ', e.queue),
          dedupKey(e) ? h('span', {class: 'muted dlq-dedup', title: 'Dedup key'}, 'dedup ', h('code', {}, dedupKey(e))) : null,
          taskLink(e.task_id)),
        acts),
      h('p', {class: 'dlq-error'}, ex.error_message || 'No error message was recorded.'),
      h('p', {class: 'dlq-meta muted'},
        `Dead-lettered ${fmtTime(e.failed_at)} · attempt ${e.attempt} of ${e.max_attempts}`,
        e.previous_attempts ? ` · ${e.previous_attempts} earlier attempts` : '',
        ex.worker_id ? ' · worker ' : '', ex.worker_id ? h('code', {}, ex.worker_id) : ''),
      h('details', {class: 'dlq-payload'}, h('summary', {}, 'Payload'), h('pre', {class: 'json'}, prettyJSON(e.payload))));
  }

  // render shows items; append adds them below, otherwise they replace the
  // list, reusing the elements of entries already shown so that an open
  // payload or a focused button survives a refresh.
  function render(items, append) {
    const keep = new Set(items.map(e => e.task_id));
    if (!append) {
      for (const [id, el] of entries) if (!keep.has(id)) { el.remove(); entries.delete(id); }
    }
    list.querySelector('.empty-card')?.remove();
    let i = append ? list.children.length : 0;
    for (const e of items) {
      if (e.execution?.error_class) classes.add(e.execution.error_class);
      types.add(e.task_type);
      let el = entries.get(e.task_id);
      if (el && el.dataset.failedAt !== e.failed_at) {
        el.remove(); // dead-lettered again since it was shown
        el = null;
      }
      if (!el) {
        el = entryView(e);
        entries.set(e.task_id, el);
      }
      if (list.children[i] !== el) list.insertBefore(el, list.children[i] || null);
      i++;
    }
    if (!entries.size) list.replaceChildren(h('p', {class: 'card empty-card'}, 'No dead letters match.'));
    setText(count, entries.size ? `${fmtInt(entries.size)} shown` : '');
    bulkRequeue.disabled = bulkPurge.disabled = bulkBusy || !entries.size;
    typeList.replaceChildren(...[...types].sort().map(v => h('option', {value: v})));
    classList.replaceChildren(...[...classes].sort().map(v => h('option', {value: v})));
  }

  async function load() {
    try {
      const page = await api('dlq', {query: {...filter, limit: PAGE}, signal: ctrl.signal});
      next = page.next_cursor;
      more.hidden = !next;
      render(page.items, false);
      status.replaceChildren();
    } catch (e) {
      if (e.name === 'AbortError') return;
      status.replaceChildren(errorBox(e, () => refresh.now()));
    }
    markReady(root);
  }

  const loadMore = moreLoader({more, status, render,
    fetchPage: cursor => api('dlq', {query: {...filter, limit: PAGE, cursor}, signal: ctrl.signal}),
    cursor: {get: () => next, set: c => { next = c; }}});

  async function loadQueues() {
    try {
      const qs = await api('queues', {query: {limit: 1000}, signal: ctrl.signal});
      fillQueueSelect(queueSel, qs.items.map(q => q.queue));
    } catch { /* typed names still work */ }
  }

  function setBusy(id, on) {
    if (on) busy.add(id); else busy.delete(id);
    for (const b of entries.get(id)?.querySelectorAll('button') || []) b.disabled = on;
  }

  async function requeueOne(e) {
    setBusy(e.task_id, true);
    try {
      await api(`dlq/${e.task_id}/requeue`, {method: 'POST'});
      toast(`Requeued ${e.task_type} task ${e.task_id.slice(16, 28)}`, 'ok');
      removeEntry(e.task_id);
    } catch (err) {
      errorToast(err, 'Requeue failed');
      setBusy(e.task_id, false);
    }
    refresh.soon();
  }

  async function discardOne(e) {
    const yes = await confirmAction({
      title: 'Discard this dead letter?',
      body: 'The entry leaves the dead-letter queue for good. The task stays dead-lettered, marked discarded, until its retention ends.',
      confirm: 'Discard', danger: true,
    });
    if (!yes) return;
    setBusy(e.task_id, true);
    try {
      await api(`dlq/${e.task_id}/discard`, {method: 'POST'});
      toast('Discarded', 'ok');
      removeEntry(e.task_id);
    } catch (err) {
      errorToast(err, 'Discard failed');
      setBusy(e.task_id, false);
    }
    refresh.soon();
  }

  function removeEntry(id) {
    entries.get(id)?.remove();
    entries.delete(id);
    if (!entries.size) render([], true);
  }

  function describeFilter() {
    const parts = [];
    if (filter.queue) parts.push(`queue ${filter.queue}`);
    if (filter.type) parts.push(`type ${filter.type}`);
    if (filter.error_class) parts.push(`error class ${filter.error_class}`);
    return parts.length ? parts.join(', ') : 'every queue, type and error class';
  }

  async function bulk(kind) {
    bulkBusy = true;
    bulkRequeue.disabled = bulkPurge.disabled = true;
    try {
      let counted;
      try {
        counted = await listAll('dlq', filter, {max: COUNT_MAX, signal: ctrl.signal});
      } catch (e) {
        if (e.name !== 'AbortError') errorToast(e, 'Could not count the matching dead letters');
        return;
      }
      const n = counted.items.length;
      const nText = counted.more ? `more than ${fmtInt(n)}` : fmtInt(n);
      if (!n) { toast('Nothing matches the filter.', 'info'); return; }
      const requeue = kind === 'requeue';
      const yes = await confirmAction({
        title: requeue ? `Requeue ${nText} dead letters?` : `Purge ${nText} dead letters?`,
        body: [
          h('p', {}, 'Matching: ', h('strong', {}, describeFilter()), '.'),
          h('p', {id: 'bulk-count', dataset: {count: String(n)}},
            requeue ? `${nText} tasks go back to their queues at attempt 1.`
              : `${nText} entries leave the dead-letter queue for good; their tasks stay dead-lettered until retention ends.`),
        ],
        confirm: requeue ? `Requeue ${nText}` : `Purge ${nText}`,
        danger: !requeue,
      });
      if (!yes) return;
      let processed = 0, cursor = '';
      try {
        for (;;) {
          const body = {...filter};
          if (cursor) body.cursor = cursor;
          const res = await api(`dlq/${requeue ? 'requeue' : 'purge'}`, {method: 'POST', body});
          processed += res.processed;
          if (!res.next_cursor) break;
          cursor = res.next_cursor;
        }
        toast(`${requeue ? 'Requeued' : 'Purged'} ${fmtInt(processed)} dead letters`, 'ok');
      } catch (e) {
        errorToast(e, `${requeue ? 'Requeue' : 'Purge'} stopped after ${fmtInt(processed)}`);
      }
    } finally {
      bulkBusy = false;
      bulkRequeue.disabled = bulkPurge.disabled = !entries.size;
      await refresh.now();
    }
  }

  const refresh = refresher(load, {wait: 600, maxWait: 2500});
  refresh.now();
  loadQueues();

  return {
    setParams(p) {
      filter = readFilter(p, FILTERS);
      showFilter(filter, {queue: queueSel, type: typeInput, error_class: classInput});
      ctrl.abort();
      ctrl = new AbortController();
      entries.clear();
      list.replaceChildren();
      refresh.now();
    },
    onEvent(ev) {
      if (ev.type === 'TASK_DEAD_LETTERED' || (ev.type === 'TASK_QUEUED' && ev.metadata?.reason === 'requeue')) {
        if (!filter.queue || ev.queue === filter.queue) refresh.soon();
      }
    },
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      refresh.stop();
    },
  };
}
