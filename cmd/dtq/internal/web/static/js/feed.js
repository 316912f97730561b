// The event feed (GET api/v1/events, Server-Sent Events) read with fetch()
// streaming rather than EventSource, because EventSource cannot send the
// Authorization header. The parser follows the SSE rules: "id:" lines move
// the resume cursor (also when a frame carries no data), "event:" names the
// type, "data:" lines are joined, a blank line dispatches.
//
// A Feed reconnects by itself with exponential backoff and jitter, resuming
// with Last-Event-ID so that nothing is lost or repeated while the server
// retains the events. A "reset" event means the cursor fell behind the
// retained events: listeners are told so that they reload their state.

import {authHeaders} from './api.js';

const MAX_BACKOFF_MS = 30000;
// The server sends a keep-alive every 15 s; silence for this long means the
// connection is dead even if the socket has not noticed.
const STALL_MS = 45000;

export class Feed {
  // filter: {queue, task_id, type, since} (comma lists allowed; since is
  // where a first connection starts, RFC 3339); cursor: where to
  // start ("" = from now).
  constructor({filter = {}, cursor = ''} = {}) {
    this.filter = filter;
    this.cursor = cursor;
    this.firstCursor = '';   // the position the feed first started from
    this.baseDelay = 1000;   // the server's "retry:" hint replaces this
    this.failures = 0;
    this.state = 'idle';
    this.retryAt = 0;
    this.stopped = true;
    this.handlers = {event: new Set(), reset: new Set(), state: new Set(), unauthorized: new Set()};
  }

  // on subscribes to 'event' (envelope), 'reset' ({cursor, queue, reason}),
  // 'state' (feed) or 'unauthorized'; it returns the unsubscribe function.
  on(kind, fn) {
    this.handlers[kind].add(fn);
    return () => this.handlers[kind].delete(fn);
  }

  emit(kind, v) {
    for (const fn of [...this.handlers[kind]]) {
      try { fn(v); } catch (e) { console.error(e); }
    }
  }

  setState(state) {
    this.state = state;
    this.emit('state', this);
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop();
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
    if (this.wake) this.wake();
    this.setState('idle');
  }

  // reconnectNow skips the remaining backoff delay.
  reconnectNow() {
    this.failures = 0;
    if (this.wake) this.wake();
  }

  url() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(this.filter)) if (v) q.set(k, v);
    const qs = q.toString();
    return 'api/v1/events' + (qs ? '?' + qs : '');
  }

  async loop() {
    while (!this.stopped) {
      this.setState(this.failures ? 'reconnecting' : 'connecting');
      const ctrl = new AbortController();
      this.ctrl = ctrl;
      let fatal = false;
      try {
        const headers = {Accept: 'text/event-stream', ...authHeaders()};
        if (this.cursor) headers['Last-Event-ID'] = this.cursor;
        const res = await fetch(this.url(), {headers, signal: ctrl.signal, cache: 'no-store', credentials: 'omit'});
        if (res.status === 401) {
          fatal = true;
          this.emit('unauthorized', res);
        } else if (res.status === 400 && this.cursor) {
          // The server does not know our cursor (e.g. another deployment):
          // start over from now and let listeners reload.
          await res.body?.cancel();
          this.cursor = '';
          this.emit('reset', {cursor: '', queue: '', reason: 'the server did not accept the saved position'});
          continue;
        } else if (!res.ok || !res.body) {
          await res.body?.cancel();
          throw new Error(`HTTP ${res.status}`);
        } else {
          await this.read(res.body, ctrl);
        }
      } catch (e) {
        if (this.stopped) return;
        // Network errors and aborts (stall watchdog) both lead to a retry.
      }
      if (fatal) {
        this.stopped = true;
        this.setState('unauthorized');
        return;
      }
      if (this.stopped) return;
      this.failures++;
      const exp = Math.min(MAX_BACKOFF_MS, this.baseDelay * 2 ** Math.min(this.failures - 1, 6));
      const delay = Math.round(exp * (0.5 + Math.random() / 2));
      this.retryAt = Date.now() + delay;
      this.setState('reconnecting');
      await new Promise(resolve => {
        const t = setTimeout(resolve, delay);
        this.wake = () => { clearTimeout(t); resolve(); };
      });
      this.wake = null;
    }
  }

  // read parses one response body until it ends or ctrl aborts.
  async read(body, ctrl) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let stall = setTimeout(() => ctrl.abort(), STALL_MS);
    const frame = {data: [], type: '', id: null};
    let buf = '';
    let first = true;
    try {
      for (;;) {
        const {value, done} = await reader.read();
        if (done) {
          this.lines(buf, frame, true);
          return;
        }
        clearTimeout(stall);
        stall = setTimeout(() => ctrl.abort(), STALL_MS);
        if (first) {
          first = false;
          this.failures = 0;
          this.setState('live');
        }
        buf = this.lines(buf + value, frame, false);
      }
    } finally {
      clearTimeout(stall);
      reader.cancel().catch(() => {});
    }
  }

  // lines handles the complete lines of text and returns the rest. A lone
  // "\r" at the end may be the first half of "\r\n", so it waits for more
  // text unless the stream ended.
  lines(text, frame, final) {
    let nl;
    while ((nl = text.search(/\r\n|\r|\n/)) >= 0) {
      if (!final && text[nl] === '\r' && nl === text.length - 1) break;
      const line = text.slice(0, nl);
      text = text.slice(nl + (text.startsWith('\r\n', nl) ? 2 : 1));
      this.line(line, frame);
    }
    return text;
  }

  line(line, frame) {
    if (line === '') {
      if (frame.id !== null) {
        this.cursor = frame.id;
        if (!this.firstCursor) this.firstCursor = frame.id;
      }
      if (frame.data.length) this.dispatch(frame.type || 'message', frame.data.join('\n'));
      frame.data = [];
      frame.type = '';
      frame.id = null;
      return;
    }
    if (line.startsWith(':')) return; // a comment: keep-alive
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let val = colon < 0 ? '' : line.slice(colon + 1);
    if (val.startsWith(' ')) val = val.slice(1);
    switch (field) {
      case 'data': frame.data.push(val); break;
      case 'event': frame.type = val; break;
      case 'id': if (!val.includes('\0')) frame.id = val; break;
      case 'retry': if (/^\d+$/.test(val)) this.baseDelay = Math.max(250, Number(val)); break;
    }
  }

  dispatch(type, data) {
    let v;
    try { v = JSON.parse(data); } catch { return; }
    if (type === 'reset') {
      if (v.cursor) this.cursor = v.cursor;
      this.emit('reset', v);
      return;
    }
    this.emit('event', v);
  }
}

// Event types grouped by what they change, for pages deciding what to
// reload.
export const TASK_STATUS_BY_EVENT = {
  TASK_PENDING: 'pending',
  TASK_QUEUED: 'queued',
  TASK_RETRIED: 'queued',
  TASK_STARTED: 'running',
  TASK_LEASE_LOST: 'running',
  TASK_SUCCEEDED: 'succeeded',
  TASK_RETRY_SCHEDULED: 'retrying',
  TASK_FAILED: 'failed',
  TASK_DEAD_LETTERED: 'dead_lettered',
  TASK_CANCELLED: 'cancelled',
  TASK_EXPIRED: 'expired',
};

export const EVENT_TYPES = [
  'TASK_PENDING', 'TASK_QUEUED', 'TASK_RETRIED', 'TASK_STARTED', 'TASK_LEASE_LOST',
  'TASK_SUCCEEDED', 'TASK_RETRY_SCHEDULED', 'TASK_FAILED', 'TASK_DEAD_LETTERED',
  'TASK_CANCELLED', 'TASK_CANCEL_REQUESTED', 'TASK_EXPIRED', 'TASK_DUPLICATE_ABSORBED', 'TASK_DEDUPLICATED', 'TASK_PROGRESS',
  'QUEUE_PAUSED', 'QUEUE_RESUMED', 'WORKER_STARTED', 'WORKER_STOPPED',
  'WORKFLOW_STARTED', 'WORKFLOW_SUCCEEDED', 'WORKFLOW_FAILED', 'WORKFLOW_CANCELLED',
];

// WORKFLOW_EVENTS start or end a workflow (on _sys; metadata names it:
// {workflow_id, name, status}).
export const WORKFLOW_EVENTS = new Set(['WORKFLOW_STARTED', 'WORKFLOW_SUCCEEDED', 'WORKFLOW_FAILED', 'WORKFLOW_CANCELLED']);

// eventTone classifies an event type for its badge colour.
export function eventTone(type) {
  if (/SUCCEEDED/.test(type)) return 'ok';
  if (/FAILED|DEAD_LETTERED|LEASE_LOST|EXPIRED/.test(type)) return 'bad';
  if (/RETRY|RETRIED|CANCEL|PAUSED|DUPLICATE/.test(type)) return 'warn';
  if (/STARTED|RESUMED/.test(type)) return 'run';
  return 'neutral';
}
