// Live events: the event feed as it arrives, newest first, filtered by
// queue, type and task. Pause freezes the list while events keep being
// collected; resume shows what arrived meanwhile.

import {api} from '../api.js';
import {EVENT_TYPES, eventTone} from '../feed.js';
import {h, add, setText, fmtInt, fmtTime, compactJSON, taskLink} from '../dom.js';
import {pageHeader} from '../ui.js';
import {queueSelect, fillQueueSelect, field, markReady} from './common.js';

const SHOW_MAX = 500;

export function mount(root, {app, params}) {
  const ctrl = new AbortController();
  let filter = readParams(params);
  let paused = false;
  let held = 0; // events that arrived while paused

  function readParams(p) {
    return {queue: p.get('queue') || '', type: p.get('type') || '', task_id: p.get('task_id') || ''};
  }

  const queueSel = queueSelect('events-queue', [], filter.queue, v => apply({queue: v}));
  const typeSel = h('select', {id: 'events-type'}, h('option', {value: ''}, 'Any event'),
    EVENT_TYPES.map(t => h('option', {value: t, selected: t === filter.type}, t)));
  typeSel.addEventListener('change', () => apply({type: typeSel.value}));
  const taskInput = h('input', {id: 'events-task', type: 'search', value: filter.task_id, placeholder: 'any task',
    class: 'mono', autocomplete: 'off', spellcheck: 'false'});
  taskInput.addEventListener('change', () => apply({task_id: taskInput.value.trim().toLowerCase()}));
  const pauseBtn = h('button', {class: 'btn', type: 'button', id: 'events-pause', 'aria-pressed': 'false'}, 'Pause');
  pauseBtn.addEventListener('click', () => setPaused(!paused));
  const clearBtn = h('button', {class: 'btn btn-ghost', type: 'button', id: 'events-clear'}, 'Clear');
  clearBtn.addEventListener('click', () => {
    app.recent.length = 0;
    held = 0;
    redraw();
  });
  const form = h('form', {class: 'filters', 'aria-label': 'Filter events'},
    field('Queue', queueSel), field('Event', typeSel), field('Task id', taskInput),
    h('div', {class: 'field field-actions'}, pauseBtn, clearBtn));
  form.addEventListener('submit', e => { e.preventDefault(); apply({task_id: taskInput.value.trim().toLowerCase()}); });

  function apply(change) { app.navigate('/events', {...filter, ...change}); }

  const info = h('p', {class: 'muted', id: 'events-info', 'aria-live': 'polite'});
  const tbody = h('tbody', {});
  add(root,
    pageHeader('Live events'),
    form,
    info,
    h('div', {class: 'card card-flush'}, h('div', {class: 'table-wrap'}, h('table', {class: 'table table-events', id: 'events-table'},
      h('thead', {}, h('tr', {},
        h('th', {scope: 'col'}, 'Time'), h('th', {scope: 'col'}, 'Event'), h('th', {scope: 'col'}, 'Queue'),
        h('th', {scope: 'col'}, 'Task'), h('th', {scope: 'col'}, 'Type'), h('th', {class: 'num', scope: 'col'}, 'Attempt'),
        h('th', {scope: 'col'}, 'Worker'), h('th', {scope: 'col'}, 'Details'))),
      tbody))));

  function matches(ev) {
    return (!filter.queue || ev.queue === filter.queue) && (!filter.type || ev.type === filter.type)
      && (!filter.task_id || ev.task_id === filter.task_id);
  }

  function row(ev) {
    const meta = ev.metadata && Object.keys(ev.metadata).length ? compactJSON(ev.metadata) : '';
    return h('tr', {dataset: {eventId: ev.event_id, type: ev.type}},
      h('td', {class: 'cell-time'}, fmtTime(ev.ts, true)),
      h('td', {}, h('span', {class: `badge ev-${eventTone(ev.type)}`}, ev.type)),
      h('td', {}, ev.queue || '—'),
      h('td', {}, ev.task_id ? taskLink(ev.task_id) : '—'),
      h('td', {class: 'cell-type'}, ev.task_type || ''),
      h('td', {class: 'num'}, ev.attempt ?? ''),
      h('td', {class: 'cell-worker'}, ev.worker_id ? h('code', {title: ev.worker_id}, ev.worker_id) : ''),
      h('td', {class: 'cell-meta'}, meta ? h('code', {title: meta}, meta) : ''));
  }

  function showInfo() {
    const shown = tbody.querySelectorAll('tr:not(.empty)').length;
    let text = `${fmtInt(shown)} shown`;
    if (paused) text += held ? ` · paused, ${fmtInt(held)} new events waiting` : ' · paused';
    else text += app.feed?.state === 'live' ? ' · following the feed' : ' · waiting for the feed';
    setText(info, text);
  }

  function redraw() {
    const list = app.recent.filter(matches).slice(-SHOW_MAX).reverse();
    tbody.replaceChildren(...(list.length ? list.map(row)
      : [h('tr', {class: 'empty'}, h('td', {colspan: 8}, 'No events yet. They appear here as tasks move.'))]));
    showInfo();
  }

  function setPaused(on) {
    paused = on;
    pauseBtn.setAttribute('aria-pressed', String(on));
    setText(pauseBtn, on ? 'Resume' : 'Pause');
    pauseBtn.classList.toggle('btn-primary', on);
    if (!on) {
      held = 0;
      redraw();
    } else showInfo();
  }

  redraw();
  markReady(root);
  api('queues', {query: {limit: 1000}, signal: ctrl.signal}).then(qs => fillQueueSelect(queueSel, qs.items.map(q => q.queue))).catch(() => {});
  const offState = app.feed?.on('state', showInfo);

  return {
    setParams(p) {
      filter = readParams(p);
      queueSel.value = filter.queue;
      typeSel.value = filter.type;
      taskInput.value = filter.task_id;
      redraw();
    },
    onEvent(ev) {
      if (!matches(ev)) return;
      if (paused) {
        held++;
        showInfo();
        return;
      }
      tbody.querySelector('tr.empty')?.remove();
      tbody.prepend(row(ev));
      while (tbody.children.length > SHOW_MAX) tbody.lastElementChild.remove();
      showInfo();
    },
    onReset() { /* the list shows what arrived; nothing to reload */ },
    destroy() {
      ctrl.abort();
      offState?.();
    },
  };
}
