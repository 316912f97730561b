// Schedules: periodic tasks with their spec, next and last run, and pause,
// resume and trigger for admins. Schedules are created with the API or
// `dtq schedules put`.

import {api, listAll} from '../api.js';
import {h, add, fmtTime, fmtAgo, taskLink, emptyRow} from '../dom.js';
import {pageHeader, confirmAction, toast, errorToast, readOnlyNote} from '../ui.js';
import {refresher, errorBox, markReady} from './common.js';

export function mount(root, {app}) {
  const ctrl = new AbortController();
  const admin = app.session.canAdmin;
  const busy = new Set();
  const tbody = h('tbody', {});
  const status = h('div', {class: 'page-status'});

  const cols = ['Name', 'Spec', 'Queue', 'Task type', 'State', 'Next run', 'Last run', 'Last task'];
  if (admin) cols.push('');

  add(root,
    pageHeader('Schedules'),
    admin ? null : readOnlyNote(),
    status,
    h('div', {class: 'card card-flush'}, h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'schedules-table'},
      h('thead', {}, h('tr', {}, cols.map(c => h('th', {scope: 'col'}, c)))),
      tbody))),
    h('p', {class: 'muted small'},
      'Every worker and API process fires due schedules; each tick makes exactly one task. ',
      'After downtime only the latest missed tick runs. A paused schedule skips its ticks; Trigger submits its task now, paused or not. ',
      'Create schedules with PUT /api/v1/schedules/{name} or dtq schedules put.'));

  function stateCell(s) {
    const badge = s.paused ? h('span', {class: 'badge st-paused'}, 'paused') : h('span', {class: 'badge st-active'}, 'active');
    return h('td', {}, badge, s.last_error ? h('div', {class: 'muted small', title: s.last_error}, 'last tick: ' + s.last_error) : null);
  }

  function actions(s) {
    const b = (label, action, onclick, primary) => h('button', {
      class: primary ? 'btn btn-small btn-primary' : 'btn btn-small', type: 'button',
      dataset: {admin: '', action, schedule: s.name}, disabled: busy.has(s.name),
      'aria-label': `${label} schedule ${s.name}`, onclick,
    }, label);
    return h('td', {class: 'cell-action'},
      s.paused ? b('Resume', 'resume', () => setPaused(s, false), true) : b('Pause', 'pause', () => setPaused(s, true)),
      ' ', b('Trigger', 'trigger', () => trigger(s)));
  }

  function row(s) {
    return h('tr', {dataset: {schedule: s.name, paused: String(s.paused)}},
      h('th', {scope: 'row', class: 'mono'}, s.name),
      h('td', {class: 'mono', title: s.timezone}, s.spec, s.timezone !== 'UTC' ? h('span', {class: 'muted small'}, ' ' + s.timezone) : null),
      h('td', {}, h('a', {href: `#/tasks?queue=${encodeURIComponent(s.queue)}`}, s.queue)),
      h('td', {class: 'mono'}, s.task_type),
      stateCell(s),
      h('td', {title: s.next_run_at || ''}, s.next_run_at ? fmtTime(s.next_run_at) : '—'),
      h('td', {title: s.last_run_at || ''}, s.last_run_at ? fmtAgo(s.last_run_at) : '—'),
      h('td', {class: 'cell-last-task'}, taskLink(s.last_task_id)),
      admin ? actions(s) : null);
  }

  function render(items) {
    if (!items.length) {
      tbody.replaceChildren(emptyRow(cols.length, 'No schedules yet: create one with dtq schedules put or PUT /api/v1/schedules/{name}.'));
      return;
    }
    const focused = document.activeElement?.dataset?.schedule;
    const action = document.activeElement?.dataset?.action;
    tbody.replaceChildren(...items.map(row));
    if (focused) {
      tbody.querySelector(`button[data-schedule="${CSS.escape(focused)}"][data-action="${action}"]`)?.focus();
    }
  }

  async function load() {
    try {
      render((await listAll('schedules', {}, {signal: ctrl.signal})).items);
      status.replaceChildren();
    } catch (e) {
      if (e.name === 'AbortError') return;
      status.replaceChildren(errorBox(e, () => refresh.now()));
    }
    markReady(root);
  }

  async function act(s, path, done, what) {
    busy.add(s.name);
    try {
      const res = await api(`schedules/${encodeURIComponent(s.name)}/${path}`, {method: 'POST'});
      toast(done(res), 'ok');
    } catch (e) {
      errorToast(e, `Could not ${what} ${s.name}`);
    } finally {
      busy.delete(s.name);
      await refresh.now();
    }
  }

  async function setPaused(s, pause) {
    const yes = await confirmAction({
      title: pause ? `Pause schedule ${s.name}?` : `Resume schedule ${s.name}?`,
      body: pause
        ? `No scheduler fires ${s.name} until it is resumed; the ticks in between are skipped, not made up later.`
        : `${s.name} fires again from its next tick.`,
      confirm: pause ? 'Pause schedule' : 'Resume schedule',
      danger: pause,
    });
    if (!yes) return;
    await act(s, pause ? 'pause' : 'resume', () => `Schedule ${s.name} ${pause ? 'paused' : 'resumed'}`, pause ? 'pause' : 'resume');
  }

  async function trigger(s) {
    const yes = await confirmAction({
      title: `Trigger schedule ${s.name} now?`,
      body: `One ${s.task_type} task is submitted to ${s.queue} now, outside the schedule's ticks.`,
      confirm: 'Trigger now',
    });
    if (!yes) return;
    await act(s, 'trigger', res => `Schedule ${s.name} triggered: task ${res.task_id}`, 'trigger');
  }

  const refresh = refresher(load, {wait: 800, maxWait: 3000, idleMS: 15000});
  refresh.now();

  return {
    onEvent(ev) {
      if (ev.type === 'SCHEDULE_FIRED') refresh.soon();
    },
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      refresh.stop();
    },
  };
}
