// The HTTP worker: claims tasks with a long-poll, runs the registered
// handlers, renews their leases, reports progress and log lines, and
// finishes each attempt (complete or fail). See docs/http-workers.md.

import { hostname } from "node:os";

import { APIError, InvalidAnswer, LeaseLost, Permanent, RetryAfter, TaskAborted } from "./errors.js";
import { HTTP, IDEMPOTENT, sleep } from "./http.js";

/** The largest progress object, as JSON. */
export const MAX_PROGRESS_BYTES = 4096;
/** The longest log line, in UTF-8 bytes; longer lines are cut. */
export const MAX_LOG_LINE_BYTES = 1024;
/** The most lines one report carries, and buffered between reports (the oldest dropped). */
export const MAX_LOG_LINES = 1000;

const UNSET = Symbol("unset");

// The members of a claimed task (the API's LeasedTask) a worker relies on,
// by type; the optional ones may also be absent or null.
const LEASED_REQUIRED = [
  ["task_id", "string"],
  ["lease_token", "string"],
  ["queue", "string"],
  ["task_type", "string"],
  ["attempt", "integer"],
  ["max_attempts", "integer"],
];
const LEASED_OPTIONAL = [
  ["timeout_ms", "integer"],
  ["idempotency_key", "string"],
  ["workflow_id", "string"],
  ["ref", "string"],
  ["deps", "object"],
  ["cancel_requested", "boolean"],
  ["priority", "integer"],
];

function isKind(v, kind) {
  if (kind === "integer") return Number.isInteger(v);
  if (kind === "object") return v !== null && typeof v === "object" && !Array.isArray(v);
  return typeof v === kind;
}

/**
 * Why raw is not a claimed task a worker can run, or null.
 * @param {unknown} raw
 */
export function leasedProblem(raw) {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return `the claimed task is ${Array.isArray(raw) ? "an array" : raw === null ? "null" : `a ${typeof raw}`}, not an object`;
  }
  for (const [name, kind] of LEASED_REQUIRED) {
    if (!isKind(raw[name], kind)) return `its ${name} is missing or not a${kind === "integer" ? "n" : ""} ${kind}`;
  }
  for (const [name, kind] of LEASED_OPTIONAL) {
    const v = raw[name];
    if (v !== undefined && v !== null && !isKind(v, kind)) return `its ${name} is not a${kind === "integer" || kind === "object" ? "n" : ""} ${kind}`;
  }
  return null;
}
const encoder = new TextEncoder();

// What a report and a finish know of a task, kept off its public face.
const internals = new WeakMap();

/**
 * A claimed task, as its handler sees it. Read payload and metadata; watch
 * signal (or cancelled and lost); report with progress() and log(); a
 * workflow node may add nodes with addNodes().
 */
export class Task {
  /**
   * @param {any} raw the claimed task (LeasedTask)
   * @param {(nodes: unknown[]) => Promise<any>} addNodes sends the nodes to the API
   */
  constructor(raw, addNodes) {
    this.id = raw.task_id;
    this.queue = raw.queue;
    this.type = raw.task_type;
    this.payload = raw.payload;
    this.metadata = raw.metadata;
    this.attempt = raw.attempt;
    this.maxAttempts = raw.max_attempts;
    this.timeoutMs = raw.timeout_ms;
    this.idempotencyKey = raw.idempotency_key ?? null;
    this.priority = raw.priority;
    this.leaseToken = raw.lease_token;
    this.leaseExpiresAt = raw.lease_expires_at;
    this.workflowId = raw.workflow_id;
    this.ref = raw.ref;
    this.deps = raw.deps ?? {};
    this.raw = raw;
    this.droppedLines = 0;
    const ctl = new AbortController();
    this.signal = ctl.signal;
    internals.set(this, {
      ctl,
      addNodes,
      progress: UNSET,
      lines: [],
      seq: 0,
      pending: null, // a report whose answer is unknown: sent again as it was, before anything newer
      inflight: null, // the report being sent
      cancelled: false,
      lost: false,
      timedOut: false,
      handedBack: false,
      beating: false, // a heartbeat is in flight
      timer: undefined,
    });
  }

  /** A cancel was requested: stop and throw; the task then ends cancelled. */
  get cancelled() {
    return internals.get(this).cancelled;
  }

  /** The lease is gone: whatever the handler returns is discarded. */
  get lost() {
    return internals.get(this).lost;
  }

  /**
   * Reports progress: a number 0..100 or a plain object (at most 4 KiB as
   * JSON). The last value reported within a second wins.
   * @param {number | Record<string, unknown>} value
   */
  progress(value) {
    if (typeof value === "number") {
      if (!Number.isFinite(value) || value < 0 || value > 100) {
        throw new RangeError(`progress ${value} is outside 0..100`);
      }
    } else if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      const n = encoder.encode(JSON.stringify(value)).length;
      if (n > MAX_PROGRESS_BYTES) {
        throw new RangeError(`a progress object is at most ${MAX_PROGRESS_BYTES} bytes as JSON, not ${n}`);
      }
    } else {
      throw new TypeError("progress is a number 0..100 or an object");
    }
    internals.get(this).progress = value;
  }

  /**
   * Appends a line to the attempt's log with the time of this call, cut to
   * 1 KiB (a trailing newline dropped). Lines are sent at most once a
   * second, and before the task's outcome.
   * @param {unknown} line
   */
  log(line) {
    const st = internals.get(this);
    // Sent with the time it was logged, not the time of the report (docs/progress.md).
    st.lines.push({ ts: new Date().toISOString(), line: cut(String(line).replace(/\n$/, ""), MAX_LOG_LINE_BYTES) });
    if (st.lines.length > MAX_LOG_LINES) {
      const over = st.lines.length - MAX_LOG_LINES;
      st.lines.splice(0, over);
      this.droppedLines += over;
    }
  }

  /**
   * Adds nodes to this task's workflow (fan-out from a running node);
   * resolves with the nodes' refs, task ids and statuses. The same nodes
   * again are no change, so a handler run again may add them again.
   * @param {unknown[]} nodes
   */
  async addNodes(nodes) {
    if (!Array.isArray(nodes) || nodes.length === 0) throw new TypeError("addNodes: nodes must be a non-empty array");
    if (this.workflowId === undefined) throw new TypeError(`addNodes: task ${this.id} is not a workflow node`);
    return internals.get(this).addNodes(nodes);
  }
}

/** s cut to at most n UTF-8 bytes, at a character boundary. */
function cut(s, n) {
  const b = encoder.encode(s);
  if (b.length <= n) return s;
  let end = n;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--;
  return new TextDecoder().decode(b.subarray(0, end));
}

/**
 * Claims tasks over HTTP and runs the registered handlers, up to
 * `concurrency` at once.
 */
export class Worker {
  #http;
  #handlers = new Map();
  #running = new Map(); // task id -> {task, done: Promise}
  #stopping = false;
  #force = false;
  #wake = []; // resolvers of whoever waits for a free slot or the drain's end
  #stopCtl = new AbortController(); // aborted at stop(): ends a backoff sleep
  #run = null; // the promise of run() while it runs
  #log;

  /**
   * @param {{url: string, token: string, queues: string[], concurrency?: number, lease?: number,
   *   wait?: number, workerId?: string, drainTimeout?: number, retries?: number,
   *   log?: (msg: string) => void, signals?: boolean}} opts
   */
  constructor({
    url,
    token,
    queues,
    concurrency = 10,
    lease = 30,
    wait = 10,
    workerId,
    drainTimeout = 30,
    retries = 6,
    log,
    signals = true,
  }) {
    if (!Array.isArray(queues) || queues.length === 0 || queues.length > 16) {
      throw new TypeError("queues must be an array of 1..16 queue names");
    }
    checkNumber("concurrency", concurrency, 1, 1000, true);
    checkNumber("lease", lease, 5, 3600);
    checkNumber("wait", wait, 0, 30);
    checkNumber("drainTimeout", drainTimeout, 0, 86400);
    this.#http = new HTTP({ url, token, retries, timeout: Math.max(10, wait + 10), maxSockets: concurrency + 8 });
    this.queues = [...queues];
    this.concurrency = concurrency;
    this.lease = lease;
    this.wait = wait;
    this.drainTimeout = drainTimeout;
    this.signals = signals;
    this.workerId = workerId ?? defaultWorkerId();
    this.#log = log ?? (() => {});
    /** Tasks whose outcome (complete or fail) the API accepted. */
    this.processed = 0;
  }

  /**
   * Registers handler for tasks of taskType: `async (task, signal) => result`.
   * Returning completes the task with the result (any JSON; undefined is
   * null); throwing fails it: Permanent dead-letters it, RetryAfter retries
   * it after that delay, anything else retries it with the server's backoff
   * while attempts remain. Returns the worker, so calls chain.
   * @param {string} taskType
   * @param {(task: Task, signal: AbortSignal) => unknown} handler
   */
  handle(taskType, handler) {
    if (typeof taskType !== "string" || taskType === "") throw new TypeError("handle: taskType must be a string");
    if (typeof handler !== "function") throw new TypeError("handle: handler must be a function");
    this.#handlers.set(taskType, handler);
    return this;
  }

  /** The tasks running now. */
  get running() {
    return [...this.#running.values()].map((r) => r.task);
  }

  /**
   * Claims and runs tasks until stop() or SIGTERM/SIGINT; then stops
   * claiming, waits up to drainTimeout seconds for running handlers and
   * hands back the tasks still running (a second signal hands them back at
   * once). Resolves once stopped.
   */
  run() {
    if (this.#run) throw new Error("run() is already running");
    this.#stopping = false;
    this.#force = false;
    this.#stopCtl = new AbortController();
    this.#run = this.#loop().finally(() => {
      this.#run = null;
    });
    return this.#run;
  }

  /**
   * Stops claiming; resolves when run() has returned (running handlers
   * finished or were handed back). Without a run(), resolves at once.
   */
  stop() {
    this.#stopping = true;
    this.#stopCtl.abort();
    this.#notify();
    return this.#run ?? Promise.resolve();
  }

  /** Closes idle connections (run() may be called again after). */
  close() {
    this.#http.close();
  }

  async #loop() {
    const onSignal = (sig) => {
      if (this.#stopping) {
        this.#log(`${sig} again: handing back running tasks now`);
        this.#force = true;
        this.#notify();
        return;
      }
      this.#log(`${sig}: stopping; running tasks get ${this.drainTimeout} s to finish`);
      this.stop();
    };
    if (this.signals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    const beats = setInterval(() => this.#heartbeats(), (this.lease / 3) * 1000);
    const reports = setInterval(() => {
      for (const { task } of this.#running.values()) {
        if (!internals.get(task).inflight) void this.#report(task);
      }
    }, 1000);
    try {
      let delay = 0.1;
      while (!this.#stopping) {
        while (!this.#stopping && this.#running.size >= this.concurrency) await this.#waitChange();
        if (this.#stopping) break;
        const free = Math.min(this.concurrency - this.#running.size, 100);
        let got;
        try {
          const res = await this.#http.call("POST", "/api/v1/claims", {
            body: { worker_id: this.workerId, queues: this.queues, max: free, wait: this.wait, lease: this.lease },
          });
          got = res.body?.tasks;
          if (!Array.isArray(got)) throw new InvalidAnswer("claim: the answer's tasks is missing or not an array", res.status);
          delay = 0.1;
        } catch (err) {
          // The API is away, refused or answered nonsense: keep trying with backoff.
          this.#log(`claim failed: ${err}`);
          await sleep(delay, this.#stopCtl.signal).catch(() => {});
          delay = Math.min(delay * 2, 5);
          continue;
        }
        for (const raw of got) {
          const problem = leasedProblem(raw);
          if (problem === null) this.#start(raw);
          else await this.#refuse(raw, problem);
        }
      }
      await this.#drain();
    } finally {
      clearInterval(beats);
      clearInterval(reports);
      if (this.signals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
  }

  // Fails a claimed task this worker cannot decode, at once and for good
  // (class UndecodableTask: retries would meet the same answer), rather than
  // let its lease run out into WorkerLost. Without a task id and lease token
  // to name it by, it can only be logged.
  async #refuse(raw, problem) {
    const id = raw?.task_id;
    const token = raw?.lease_token;
    if (typeof id !== "string" || typeof token !== "string") {
      this.#log(`claim: a task that cannot be decoded, without an id and lease token to fail it by (its lease will run out): ${problem}`);
      return;
    }
    const message = `this worker could not decode the claimed task, and did not run it: ${problem}`;
    this.#log(`task ${id}: ${message}; failing it`);
    try {
      await this.#http.call("POST", `/api/v1/tasks/${encodeURIComponent(id)}/fail`, {
        body: { lease_token: token, error: { class: "UndecodableTask", message: message.slice(0, 500) }, retryable: false },
      });
    } catch (err) {
      this.#log(`task ${id}: fail failed: ${err}; its lease will run out and it will be retried`);
    }
  }

  #notify() {
    const w = this.#wake;
    this.#wake = [];
    for (const resolve of w) resolve();
  }

  // Resolves at the next change: a task ended, stop() or a forced stop.
  #waitChange() {
    return new Promise((resolve) => this.#wake.push(resolve));
  }

  #start(raw) {
    const task = new Task(raw, (nodes) => this.#addNodes(task, nodes));
    const st = internals.get(task);
    if (raw.cancel_requested) this.#cancel(task);
    if (Number.isFinite(task.timeoutMs) && task.timeoutMs > 0) {
      st.timer = setTimeout(() => {
        st.timedOut = true;
        st.ctl.abort(new TaskAborted("timeout", `the attempt ran past its timeout of ${task.timeoutMs} ms`));
      }, task.timeoutMs);
      st.timer.unref?.();
    }
    const entry = { task, done: null };
    this.#running.set(task.id, entry);
    entry.done = this.#execute(task)
      .catch((err) => this.#log(`task ${task.id}: ${err}`))
      .finally(() => {
        clearTimeout(st.timer);
        this.#running.delete(task.id);
        this.#notify();
      });
  }

  async #execute(task) {
    const handler = this.#handlers.get(task.type);
    let what;
    let body;
    try {
      if (!handler) throw new Permanent(`no handler for task type ${JSON.stringify(task.type)}`);
      const result = await handler(task, task.signal);
      const value = result === undefined ? null : result;
      try {
        JSON.stringify(value);
      } catch (err) {
        throw new Permanent(`the handler's result is not JSON: ${err?.message ?? err}`, { cause: err });
      }
      what = "complete";
      body = { result: value };
    } catch (err) {
      what = "fail";
      body = failure(task, err);
    }
    await this.#finish(task, what, body);
  }

  async #finish(task, what, body) {
    const st = internals.get(task);
    // What the handler reported lands before its outcome does.
    await this.#flush(task);
    if (st.handedBack) return;
    if (st.lost) {
      this.#log(`task ${task.id}: lease lost; its ${what === "complete" ? "result" : "failure"} is discarded`);
      return;
    }
    try {
      // Complete and fail are idempotent: resending after a lost reply is safe.
      await this.#http.call("POST", `/api/v1/tasks/${encodeURIComponent(task.id)}/${what}`, {
        body: { lease_token: task.leaseToken, ...body },
      });
      this.processed++;
    } catch (err) {
      if (err instanceof LeaseLost) {
        st.lost = true;
        this.#log(`task ${task.id}: lease lost before ${what}; nothing written`);
      } else {
        this.#log(`task ${task.id}: ${what} failed: ${err}; its lease will run out and it will be retried`);
      }
    }
  }

  #cancel(task) {
    const st = internals.get(task);
    if (st.cancelled) return;
    st.cancelled = true;
    st.ctl.abort(new TaskAborted("cancelled", `task ${task.id}: a cancel was requested`));
  }

  #lose(task) {
    const st = internals.get(task);
    if (st.lost) return;
    st.lost = true;
    st.ctl.abort(new TaskAborted("lease_lost", `task ${task.id}: the lease was lost; the result would be discarded`));
  }

  #heartbeats() {
    for (const { task } of this.#running.values()) {
      const st = internals.get(task);
      if (st.lost || st.handedBack || st.beating) continue;
      st.beating = true;
      this.#http
        .call("POST", `/api/v1/tasks/${encodeURIComponent(task.id)}/heartbeat`, {
          body: { lease_token: task.leaseToken, lease: this.lease },
        })
        .then(
          (res) => {
            task.leaseExpiresAt = res.body.lease_expires_at;
            if (res.body.cancel_requested) this.#cancel(task);
          },
          (err) => {
            if (err instanceof LeaseLost) this.#lose(task);
            else this.#log(`heartbeat of ${task.id} failed: ${err}`);
          },
        )
        .finally(() => {
          st.beating = false;
        });
    }
  }

  // Sends what is buffered once more after any report in flight.
  async #flush(task) {
    const st = internals.get(task);
    while (st.inflight) await st.inflight;
    await this.#report(task);
  }

  // Sends the task's buffered progress and lines (the pending report first);
  // resolves true when nothing is left to send.
  #report(task) {
    const st = internals.get(task);
    const p = this.#send(task, st).finally(() => {
      if (st.inflight === p) st.inflight = null;
    });
    st.inflight = p;
    return p;
  }

  async #send(task, st) {
    for (;;) {
      if (st.lost || st.handedBack) return true;
      if (st.pending === null) {
        if (st.progress === UNSET && st.lines.length === 0) return true;
        st.seq++;
        const body = { lease_token: task.leaseToken, seq: st.seq };
        if (st.progress !== UNSET) body.progress = st.progress;
        if (st.lines.length > 0) body.logs = st.lines;
        st.progress = UNSET;
        st.lines = [];
        st.pending = body;
      }
      try {
        // A 429 (within a second of the last write) is waited out and sent
        // again by HTTP; so is a lost reply: the seq makes a resend land once.
        await this.#http.call("POST", `/api/v1/tasks/${encodeURIComponent(task.id)}/progress`, {
          body: st.pending,
        });
      } catch (err) {
        if (err instanceof LeaseLost) {
          st.pending = null;
          this.#lose(task);
          return true;
        }
        if (err instanceof APIError) {
          if (err.status === 429) return false; // still too soon: nothing was written; next time
          this.#log(`task ${task.id}: progress report refused: ${err}`);
          st.pending = null; // a bad report is not sent again
          continue;
        }
        this.#log(`task ${task.id}: progress report failed: ${err}`);
        return false;
      }
      st.pending = null;
    }
  }

  async #addNodes(task, nodes) {
    try {
      const res = await this.#http.call("POST", `/api/v1/tasks/${encodeURIComponent(task.id)}/nodes`, {
        body: { lease_token: task.leaseToken, nodes },
        timeout: 60,
        retry: IDEMPOTENT,
      });
      return res.body.nodes;
    } catch (err) {
      if (err instanceof LeaseLost) this.#lose(task);
      throw err;
    }
  }

  async #drain() {
    const deadline = performance.now() + this.drainTimeout * 1000;
    let timer;
    const timeUp = new Promise((resolve) => {
      timer = setTimeout(resolve, this.drainTimeout * 1000);
    });
    try {
      while (this.#running.size > 0 && !this.#force && performance.now() < deadline) {
        await Promise.race([this.#waitChange(), timeUp]);
      }
    } finally {
      clearTimeout(timer);
    }
    if (this.#running.size === 0) return;
    // The API has no route that returns a task to its queue with the same
    // attempt: a retryable failure due at once is the nearest, so the task
    // runs again elsewhere now rather than after its lease runs out.
    this.#log(`drain timeout: handing back ${this.#running.size} running tasks`);
    await Promise.all(this.running.map((task) => this.#handBack(task)));
  }

  async #handBack(task) {
    const st = internals.get(task);
    if (st.lost) return;
    st.handedBack = true;
    st.ctl.abort(new TaskAborted("shutdown", `task ${task.id}: the worker stopped before the handler finished`));
    try {
      await this.#http.call("POST", `/api/v1/tasks/${encodeURIComponent(task.id)}/fail`, {
        body: {
          lease_token: task.leaseToken,
          error: { class: "Shutdown", message: "the worker stopped before the handler finished" },
          retryable: true,
          retry_after: 0,
        },
      });
    } catch (err) {
      this.#log(`task ${task.id}: hand-back failed: ${err}; its lease will run out and it will be retried`);
    }
  }
}

/** The fail body for a handler's error err. */
function failure(task, err) {
  const st = internals.get(task);
  let cls = "Error";
  if ((err instanceof Permanent || err instanceof RetryAfter) && err.cause instanceof Error) cls = err.cause.name;
  else if (err instanceof Error) cls = err.name;
  if (st.cancelled) cls = "Cancelled";
  else if (st.timedOut) cls = "Timeout";
  cls = String(cls).replace(/[^A-Za-z0-9_.:@-]/g, "_").slice(0, 128) || "Error";
  const message = err instanceof Error ? err.message : String(err);
  const body = { error: { class: cls, message: message.slice(0, 500) }, retryable: !(err instanceof Permanent) };
  if (err instanceof RetryAfter) body.retry_after = err.seconds;
  return body;
}

function checkNumber(name, v, min, max, integer = false) {
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new RangeError(`${name} must be ${integer ? "an integer" : "a number"} in ${min}..${max}, not ${v}`);
  }
}

function defaultWorkerId() {
  const host = hostname().replace(/[^A-Za-z0-9_.:@-]/g, "_").slice(0, 64) || "host";
  const rand = Math.floor(Math.random() * 0x10000)
    .toString(16)
    .padStart(4, "0");
  return `ts-${host}-${process.pid}-${rand}`;
}
