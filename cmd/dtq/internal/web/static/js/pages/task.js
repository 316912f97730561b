// One task: its fields, payload, result and metadata, the attempts
// timeline, its events, and the admin actions (cancel, run now).

import {api, APIError} from '../api.js';
import {Feed, eventTone, TASK_STATUS_BY_EVENT} from '../feed.js';
import {h, add, setText, fmtInt, fmtMS, fmtTime, prettyJSON, compactJSON, statusBadge, progressView, dedupKey, TERMINAL} from '../dom.js';
import {pageHeader, section, confirmAction, toast, errorToast, readOnlyNote} from '../ui.js';
import {refresher, errorBox, markReady} from './common.js';

const CANCELLABLE = new Set(['waiting', 'pending', 'queued', 'running', 'retrying']);
const RUNNABLE_NOW = new Set(['pending', 'retrying']);

function dl(pairs) {
  return h('dl', {class: 'facts'}, pairs.filter(Boolean).map(([k, v, id]) => [h('dt', {}, k), h('dd', {id: id || null}, v)]));
}

function jsonBlock(id, value, emptyText) {
  if (value === null || value === undefined) return h('p', {class: 'muted', id}, emptyText);
  return h('pre', {class: 'json', id, tabindex: '0'}, prettyJSON(value));
}

// NOT_KEPT stands in for the payload of a succeeded task that did not keep
// it (payload_dropped: it is null in the answer; metadata is kept).
const NOT_KEPT = 'Not kept (succeeded; submit with keep_payload to keep it)';

function droppedBlock(id) {
  return h('p', {class: 'muted', id, dataset: {dropped: ''}}, NOT_KEPT);
}

// retentionText describes what the submission chose about keeping the
// task once finished; null when it chose nothing (the workers' settings).
function retentionText(t) {
  const own = t.retention_seconds !== undefined && t.retention_seconds !== null;
  if (!own && !t.keep_payload) return null;
  const parts = [!own ? "the workers' setting"
    : t.retention_seconds === 0 ? 'none (deleted as it finishes)' : `${fmtMS(t.retention_seconds * 1000)} once finished`];
  if (t.keep_payload) parts.push('payload kept');
  return parts.join(' · ');
}

export function mount(root, {app, arg: id, setTitle}) {
  const ctrl = new AbortController();
  let task = null;
  let busy = false;
  const admin = app.session.canAdmin;
  setTitle(`Task ${id}`);

  const head = h('div', {class: 'task-head'});
  const actions = h('div', {class: 'page-actions'});
  const status = h('div', {class: 'page-status'});
  const body = h('div', {class: 'task-body'});
  const eventsBody = h('tbody', {});
  // The log panel: one attempt's lines, followed while the task runs.
  const logAttempt = h('select', {id: 'task-log-attempt', name: 'attempt'});
  const logPanel = h('pre', {class: 'json log-panel', id: 'task-logs', tabindex: '0'});
  const logNote = h('p', {class: 'card-sub', id: 'task-logs-note'}, 'No lines logged.');
  const logs = {attempt: 0, cursor: '', busy: false, lines: 0, picked: false};
  logAttempt.addEventListener('change', () => {
    logs.attempt = Number(logAttempt.value);
    logs.picked = true;
    resetLogs();
    loadLogs();
  });
  const eventsNote = h('p', {class: 'card-sub'}, 'Events of this task while they are retained, live.');
  // A workflow node's deps, read from its workflow's graph.
  const wfSection = h('section', {class: 'card', id: 'task-wf'});
  const wfWrap = h('div', {class: 'task-wf-wrap'});
  const wfRead = {gen: 0, status: ''};

  add(root,
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/tasks'}, 'Tasks'), ' / ', h('span', {class: 'mono'}, id)),
    h('div', {class: 'page-head'}, head, actions),
    admin ? null : readOnlyNote(),
    status,
    body,
    wfWrap,
    section('Logs', h('div', {class: 'log-controls'}, h('label', {for: 'task-log-attempt'}, 'Attempt '), logAttempt), logNote, logPanel),
    section('Events', eventsNote, h('div', {class: 'table-wrap'}, h('table', {class: 'table', id: 'task-events'},
      h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Time'), h('th', {scope: 'col'}, 'Event'),
        h('th', {class: 'num', scope: 'col'}, 'Attempt'), h('th', {scope: 'col'}, 'Worker'), h('th', {scope: 'col'}, 'Details'))),
      eventsBody))));
  eventsBody.append(h('tr', {class: 'empty'}, h('td', {colspan: 5}, 'No events seen yet.')));

  function actionButton(label, cls, idAttr, onClick) {
    return h('button', {class: `btn ${cls}`, type: 'button', id: idAttr, dataset: {admin: ''}, disabled: busy, onclick: onClick}, label);
  }

  function renderActions(t) {
    if (!admin) { actions.replaceChildren(); return; }
    const list = [];
    if (RUNNABLE_NOW.has(t.status)) list.push(actionButton('Run now', '', 'task-run-now', runNow));
    if (CANCELLABLE.has(t.status)) {
      const label = t.status === 'running' ? (t.cancel_requested ? 'Cancel requested' : 'Request cancel') : 'Cancel task';
      const b = actionButton(label, 'btn-danger', 'task-cancel', cancel);
      if (t.cancel_requested) b.disabled = true;
      list.push(b);
    }
    // Keep focus on the same button across re-renders.
    const focused = document.activeElement?.id;
    actions.replaceChildren(...list);
    if (focused) document.getElementById(focused)?.focus();
  }

  function render(t) {
    task = t;
    head.replaceChildren(
      h('h1', {class: 'task-title'}, h('span', {class: 'task-type'}, t.task_type), ' ', statusBadge(t.status),
        t.cancel_requested && !TERMINAL.has(t.status) ? h('span', {class: 'badge st-retrying'}, 'cancel requested') : null),
      h('p', {class: 'task-id mono'}, t.task_id));
    head.querySelector('.badge').id = 'task-status';
    renderActions(t);

    const ex = t.execution || {};
    const errText = ex.error_class || ex.error_message ? [h('strong', {}, ex.error_class || 'Error'), ex.error_message ? ': ' + ex.error_message : ''] : '—';
    const result = t.result_truncated
      ? h('p', {class: 'muted', id: 'task-result'}, 'The result was larger than the result size limit and was not stored.')
      : t.result_expired
        ? h('p', {class: 'muted', id: 'task-result'}, 'The result expired (result retention passed).')
        : jsonBlock('task-result', t.result, TERMINAL.has(t.status) ? 'No result.' : 'No result yet.');

    body.replaceChildren(
      h('div', {class: 'grid-2'},
        section('Task', dl([
          ['Queue', h('a', {href: `#/tasks?queue=${encodeURIComponent(t.queue)}`}, t.queue)],
          ['Priority', String(t.priority)],
          ['Attempt', `${t.attempt} of ${t.max_attempts}`, 'task-attempt'],
          t.previous_attempts ? ['Earlier attempts', `${fmtInt(t.previous_attempts)} (before a dead-letter requeue)`] : null,
          ['Timeout', fmtMS(t.timeout_ms)],
          ['Created', fmtTime(t.created_at, true)],
          ['Available at', fmtTime(t.available_at, true)],
          ['Expires at', t.expires_at ? fmtTime(t.expires_at, true) : 'never'],
          ['Idempotency key', t.idempotency_key ? h('code', {}, t.idempotency_key) : 'none'],
          dedupKey(t) ? ['Dedup key', h('code', {}, dedupKey(t)), 'task-dedup-key'] : null,
          t.workflow_id ? ['Workflow', h('a', {href: `#/workflows/${t.workflow_id}`, class: 'mono', id: 'task-workflow'}, t.workflow_id)] : null,
          t.workflow_id ? ['Node', h('code', {}, t.ref || '—'), 'task-ref'] : null,
          retentionText(t) ? ['Retention', retentionText(t), 'task-retention'] : null,
        ])),
        section('Current or last attempt', dl([
          ['Worker', ex.worker_id ? h('code', {}, ex.worker_id) : '—'],
          ['Started', fmtTime(ex.started_at, true)],
          ['Finished', fmtTime(ex.finished_at, true)],
          ['Duration', ex.duration_ms !== null && ex.duration_ms !== undefined ? fmtMS(ex.duration_ms)
            : t.status === 'running' && ex.started_at ? `running for ${fmtMS(Date.now() - new Date(ex.started_at).getTime())}` : '—'],
          t.progress !== undefined ? ['Progress', progressView(t.progress), 'task-progress'] : null,
          t.progress_at ? ['Progress at', fmtTime(t.progress_at, true)] : null,
          ['Error', errText, 'task-error'],
          ex.retryable !== null && ex.retryable !== undefined ? ['Retryable', ex.retryable ? 'yes' : 'no'] : null,
          ex.retry_delay_ms !== null && ex.retry_delay_ms !== undefined ? ['Retry delay', fmtMS(ex.retry_delay_ms)] : null,
        ]))),
      h('div', {class: 'grid-3'},
        section('Payload', t.payload_dropped ? droppedBlock('task-payload') : jsonBlock('task-payload', t.payload, 'Empty.')),
        section('Result', result),
        section('Metadata', jsonBlock('task-metadata', t.metadata, 'None.'))),
      section('Attempts', timeline(t)));
  }

  function timeline(t) {
    const items = (t.attempts || []).map(a => ({...a, done: true}));
    const ex = t.execution || {};
    if (t.status === 'running' && ex.started_at && !items.some(a => a.attempt === t.attempt && a.started_at === ex.started_at)) {
      items.push({attempt: t.attempt, worker_id: ex.worker_id, started_at: ex.started_at, outcome: 'running', done: false});
    }
    if (!items.length) return h('p', {class: 'muted', id: 'task-attempts'}, 'No attempt has started yet.');
    return h('ol', {class: 'timeline', id: 'task-attempts'}, items.map(a => h('li', {class: `tl-item tl-${a.outcome || 'unknown'}`},
      h('div', {class: 'tl-head'},
        h('strong', {}, `Attempt ${a.attempt}`),
        h('span', {class: `badge ev-${a.outcome === 'succeeded' ? 'ok' : a.outcome === 'running' ? 'run' : 'bad'}`}, a.outcome || 'unknown'),
        h('span', {class: 'muted'}, fmtTime(a.started_at, true)),
        a.done ? h('span', {class: 'num'}, fmtMS(a.duration_ms)) : h('span', {class: 'muted'}, 'running')),
      h('div', {class: 'tl-meta'}, 'Worker ', h('code', {}, a.worker_id || '—')),
      a.error_class || a.error_message ? h('div', {class: 'tl-error'}, h('strong', {}, a.error_class || 'Error'), a.error_message ? ': ' + a.error_message : '') : null)));
  }

  // resetLogs empties the panel for another attempt.
  function resetLogs() {
    logs.gen = (logs.gen || 0) + 1; // a read in flight for the old attempt is dropped
    logs.busy = false;
    logs.cursor = '';
    logs.lines = 0;
    logPanel.replaceChildren();
    setText(logNote, 'No lines logged.');
  }

  // fillAttempts lists the attempts that may have lines, the latest chosen
  // until the user picks one.
  function fillAttempts(t) {
    const n = Math.max(t.log_attempts || 0, t.attempt || 1);
    if (logAttempt.options.length === n) return;
    logAttempt.replaceChildren(...Array.from({length: n}, (_, i) => h('option', {value: String(i + 1)}, `Attempt ${i + 1}`)));
    if (!logs.picked) { logs.attempt = n; resetLogs(); }
    logAttempt.value = String(logs.attempt);
  }

  // loadLogs appends the attempt's lines logged since the last look.
  async function loadLogs() {
    if (logs.busy || !logs.attempt) return;
    logs.busy = true;
    const gen = logs.gen;
    try {
      for (let pages = 0; pages < 20; pages++) {
        const query = {attempt: String(logs.attempt), limit: '1000'};
        if (logs.cursor) query.cursor = logs.cursor;
        const page = await api(`tasks/${id}/logs`, {query, signal: ctrl.signal});
        if (gen !== logs.gen) return;
        logs.cursor = page.next_cursor;
        for (const it of page.items) {
          logPanel.append(h('span', {class: 'log-line'}, h('span', {class: 'log-ts'}, fmtTime(it.ts, true)), it.line));
          logs.lines++;
        }
        if (page.items.length < 1000) break;
      }
      setText(logNote, logs.lines ? `${fmtInt(logs.lines)} line${logs.lines === 1 ? '' : 's'}${task && !TERMINAL.has(task.status) ? ', following' : ''}.` : 'No lines logged.');
    } catch (e) {
      if (e.name !== 'AbortError') setText(logNote, `Could not read the logs: ${e.message}`);
    } finally {
      if (gen === logs.gen) logs.busy = false;
    }
  }

  async function load() {
    try {
      const t = await api(`tasks/${id}`, {signal: ctrl.signal});
      render(t);
      fillAttempts(t);
      loadLogs();
      if (t.workflow_id && wfRead.status !== t.status) {
        wfRead.status = t.status;
        loadWorkflow(t);
      }
      status.replaceChildren();
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e instanceof APIError && e.status === 404) {
        head.replaceChildren(h('h1', {}, 'Task not found'));
        actions.replaceChildren();
        body.replaceChildren(h('div', {class: 'card', id: 'task-missing'},
          h('p', {}, 'No task has this id, or its retention has passed.'),
          h('p', {}, h('a', {href: '#/tasks'}, 'Back to the task list'))));
      } else {
        status.replaceChildren(errorBox(e, () => refresh.now()));
      }
    }
    markReady(root);
  }

  // loadWorkflow shows the node's place in its workflow: the workflow's
  // status and each dep with its status, linked to its task. It is read
  // again when this task's status changes (its deps have moved on by then).
  async function loadWorkflow(t) {
    const gen = ++wfRead.gen;
    let wf;
    try {
      wf = await api(`workflows/${t.workflow_id}`, {signal: ctrl.signal});
    } catch (e) {
      if (e.name === 'AbortError' || gen !== wfRead.gen) return;
      wfWrap.replaceChildren(wfSection);
      wfSection.replaceChildren(h('h2', {class: 'card-title'}, 'Workflow'),
        h('p', {class: 'muted', id: 'task-deps'}, e instanceof APIError && e.status === 404
          ? 'The workflow is gone (its retention passed).' : `Could not read the workflow: ${e.describe ? e.describe() : e.message}`));
      return;
    }
    if (gen !== wfRead.gen) return;
    const byRef = new Map(wf.nodes.map(n => [n.ref, n]));
    const self = byRef.get(t.ref);
    const deps = (self?.deps || []).map(r => byRef.get(r) || {ref: r});
    const dependants = wf.nodes.filter(n => (n.deps || []).includes(t.ref)).length;
    wfWrap.replaceChildren(wfSection);
    wfSection.replaceChildren(
      h('h2', {class: 'card-title'}, 'Workflow'),
      dl([
        ['Workflow', [h('a', {href: `#/workflows/${wf.workflow_id}`}, wf.name || wf.workflow_id), ' ', statusBadge(wf.status)]],
        ['Depends on', deps.length ? h('ul', {class: 'dep-list', id: 'task-deps'}, deps.map(d => h('li', {dataset: {ref: d.ref}},
          d.task_id ? h('a', {href: `#/tasks/${d.task_id}`, class: 'mono', title: d.task_id}, d.ref) : h('code', {}, d.ref),
          d.status ? statusBadge(d.status) : null))) : h('span', {class: 'muted', id: 'task-deps'}, 'nothing: a first node')],
        ['Dependants', `${fmtInt(dependants)} node${dependants === 1 ? '' : 's'} wait for this one`],
      ]));
  }

  async function act(fn, okText) {
    busy = true;
    renderActions(task);
    try {
      await fn();
      toast(okText, 'ok');
    } catch (e) {
      errorToast(e);
    } finally {
      busy = false;
      await refresh.now();
    }
  }

  async function cancel() {
    const running = task.status === 'running';
    const yes = await confirmAction({
      title: running ? 'Request cancel of a running task?' : 'Cancel this task?',
      body: running
        ? 'The worker running it is told to stop. If the handler returns an error the task ends cancelled; if it finishes anyway, it ends succeeded.'
        : 'The task will not run. This cannot be undone; an idempotency key it carries will replay the cancelled task.',
      confirm: running ? 'Request cancel' : 'Cancel task',
      danger: true,
    });
    if (!yes) return;
    await act(() => api(`tasks/${id}/cancel`, {method: 'POST'}), running ? 'Cancel requested' : 'Task cancelled');
  }

  async function runNow() {
    await act(() => api(`tasks/${id}/run-now`, {method: 'POST'}), 'The task is due now');
  }

  const refresh = refresher(load, {wait: 250, maxWait: 1000});
  refresh.now();

  // Events: replay this task's events from its creation (the id is a
  // UUIDv7: its first 48 bits are the creation time in ms; a second earlier
  // allows for clocks that differ), then follow them live.
  const seenEvents = new Set();
  const createdMs = parseInt(id.slice(0, 12), 16);
  const filter = {task_id: id};
  if (Number.isFinite(createdMs)) filter.since = new Date(Math.max(0, createdMs - 1000)).toISOString();
  const feed = new Feed({filter, cursor: filter.since ? '' : (app.feed?.firstCursor || app.feed?.cursor || '')});
  feed.on('event', ev => {
    if (seenEvents.has(ev.event_id)) return;
    if (ev.type === 'TASK_PROGRESS') {
      // Not a change of state: update the progress and look for new lines.
      seenEvents.add(ev.event_id);
      if (task && ev.metadata && 'progress' in ev.metadata && ev.attempt === task.attempt) {
        task = {...task, progress: ev.metadata.progress, progress_at: ev.ts};
        const cell = body.querySelector('#task-progress');
        if (cell) cell.replaceChildren(progressView(task.progress));
        else render(task);
      }
      loadLogs();
      return;
    }
    seenEvents.add(ev.event_id);
    eventsBody.querySelector('tr.empty')?.remove();
    const reload = !shownBy(ev);
    eventsBody.prepend(h('tr', {dataset: {eventId: ev.event_id}},
      h('td', {class: 'cell-time'}, fmtTime(ev.ts, true)),
      h('td', {}, h('span', {class: `badge ev-${eventTone(ev.type)}`}, ev.type)),
      h('td', {class: 'num'}, ev.attempt ?? '—'),
      h('td', {}, ev.worker_id ? h('code', {}, ev.worker_id) : '—'),
      h('td', {class: 'cell-meta'}, Object.keys(ev.metadata || {}).length ? h('code', {}, compactJSON(ev.metadata)) : '')));
    if (reload) refresh.soon();
  });

  // shownBy reports whether the loaded task already reflects ev: the replay
  // of its history when the page opens must not re-render the page (and the
  // buttons under the user's pointer) for nothing. An event older than the
  // task's latest recorded change is reflected; one at that same
  // millisecond is when it implies the status shown.
  function shownBy(ev) {
    if (!task) return false;
    const times = [task.created_at, task.execution?.started_at, task.execution?.finished_at,
      ...(task.attempts || []).map(a => a.finished_at)].filter(Boolean).map(Date.parse);
    const latest = Math.max(...times);
    const at = Date.parse(ev.ts);
    if (!Number.isFinite(at) || !Number.isFinite(latest)) return false;
    return at < latest || (at === latest && TASK_STATUS_BY_EVENT[ev.type] === task.status);
  }
  feed.on('reset', () => refresh.now());
  feed.start();

  const ticker = setInterval(() => {
    if (task?.status === 'running') {
      const cell = body.querySelector('#task-attempts');
      if (cell) cell.replaceWith(timeline(task));
    }
  }, 5000);
  // Lines alone emit no event: a running task's are looked for each second.
  const logTicker = setInterval(() => { if (task && !TERMINAL.has(task.status)) loadLogs(); }, 1000);

  return {
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      feed.stop();
      refresh.stop();
      clearInterval(ticker);
      clearInterval(logTicker);
    },
  };
}
