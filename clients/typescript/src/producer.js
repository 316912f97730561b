// The producer side: submit tasks and workflows, read them back, wait for
// their end, cancel them.

import { WaitTimeout } from "./errors.js";
import { HTTP, IDEMPOTENT, safeOnly } from "./http.js";

/** The statuses a task ends in. */
export const TERMINAL = Object.freeze(new Set(["succeeded", "failed", "dead_lettered", "cancelled", "expired"]));

/** The statuses a workflow ends in. */
export const WORKFLOW_TERMINAL = Object.freeze(new Set(["succeeded", "failed", "cancelled"]));

// A submission without an idempotency key is sent again only after answers
// that say it wrote nothing (openapi.json: 503 REDIS_UNAVAILABLE and
// SERVER_BUSY, 429 QUEUE_FULL); OUTCOME_UNKNOWN is not among them.
const SUBMIT_UNKEYED = safeOnly("REDIS_UNAVAILABLE", "SERVER_BUSY", "QUEUE_FULL");
// A batch's 503 REDIS_UNAVAILABLE may have written some items: only
// SERVER_BUSY (refused before the body was read) is safe.
const BATCH_UNKEYED = safeOnly("SERVER_BUSY");

/** The longest one long-poll asks the server to wait, in seconds. */
const POLL_S = 30;

/**
 * Submits tasks and workflows and reads them back. Needs a producer key
 * (reads also work with a reader or worker key; cancel of a task needs an
 * admin key).
 */
export class Producer {
  #http;

  /**
   * @param {{url: string, token?: string, retries?: number, timeout?: number}} opts
   */
  constructor({ url, token, retries = 6, timeout = 10 }) {
    this.#http = new HTTP({ url, token, retries, timeout });
  }

  /** Closes idle connections; the producer stays usable. */
  close() {
    this.#http.close();
  }

  /**
   * Submits one task. With an idempotency key (options.idempotencyKey, sent
   * as the Idempotency-Key header, or the request's idempotency_key) a lost
   * reply is sent again safely.
   */
  async submit(request, { idempotencyKey, signal } = {}) {
    checkObject(request, "submit: the request");
    if (typeof request.task_type !== "string" || request.task_type === "") {
      throw new TypeError("submit: request.task_type is required");
    }
    const headers = {};
    if (idempotencyKey !== undefined) headers["Idempotency-Key"] = checkKey(idempotencyKey);
    const keyed = idempotencyKey !== undefined || typeof request.idempotency_key === "string";
    const res = await this.#http.call("POST", "/api/v1/tasks", {
      body: request,
      headers,
      retry: keyed ? IDEMPOTENT : SUBMIT_UNKEYED,
      signal,
    });
    return res.body;
  }

  /**
   * Submits up to 1000 tasks in one request; resolves with one item per
   * task, in order ({index, http_status, duplicate, task} or {..., error}).
   */
  async submitBatch(tasks, { signal } = {}) {
    if (!Array.isArray(tasks) || tasks.length === 0 || tasks.length > 1000) {
      throw new RangeError("submitBatch: tasks must be an array of 1..1000 submissions");
    }
    tasks.forEach((t, i) => checkObject(t, `submitBatch: tasks[${i}]`));
    const keyed = tasks.every((t) => typeof t.idempotency_key === "string");
    const res = await this.#http.call("POST", "/api/v1/tasks/batch", {
      body: { tasks },
      timeout: 60,
      retry: keyed ? IDEMPOTENT : BATCH_UNKEYED,
      signal,
    });
    return res.body.items;
  }

  /** Reads one task with its result and attempts. */
  async get(taskId, { signal } = {}) {
    return (await this.#http.call("GET", `/api/v1/tasks/${pathID(taskId, "taskId")}`, { signal })).body;
  }

  /**
   * Waits until the task ended (long-polls, at most 30 s a request);
   * resolves with it, or rejects with WaitTimeout after timeout seconds
   * (default 60).
   */
  async wait(taskId, { timeout = 60, signal } = {}) {
    return this.#longPoll(`/api/v1/tasks/${pathID(taskId, "taskId")}`, "task", TERMINAL, timeout, signal);
  }

  /**
   * Cancels a task (needs an admin key): a task not yet running is
   * cancelled at once; a running one gets a cancel request
   * (cancel_requested: true) that its worker sees at its next heartbeat.
   */
  async cancel(taskId, { reason, signal } = {}) {
    const body = reason === undefined ? {} : { reason };
    const path = `/api/v1/tasks/${pathID(taskId, "taskId")}/cancel`;
    return (await this.#http.call("POST", path, { body, signal })).body;
  }

  /** Reads a page of a task's log lines, oldest first. */
  async logs(taskId, { attempt, cursor, limit, signal } = {}) {
    const q = new URLSearchParams();
    if (attempt !== undefined) q.set("attempt", String(attempt));
    if (cursor !== undefined) q.set("cursor", cursor);
    if (limit !== undefined) q.set("limit", String(limit));
    const qs = q.size > 0 ? `?${q}` : "";
    return (await this.#http.call("GET", `/api/v1/tasks/${pathID(taskId, "taskId")}/logs${qs}`, { signal })).body;
  }

  /**
   * Submits a workflow: nodes with refs and deps, submitted as one unit.
   * With an idempotency key a lost reply is sent again safely.
   */
  async submitWorkflow(request, { idempotencyKey, signal } = {}) {
    checkObject(request, "submitWorkflow: the request");
    if (!Array.isArray(request.nodes) || request.nodes.length === 0) {
      throw new TypeError("submitWorkflow: request.nodes must be a non-empty array");
    }
    const headers = {};
    if (idempotencyKey !== undefined) headers["Idempotency-Key"] = checkKey(idempotencyKey);
    const keyed = idempotencyKey !== undefined || typeof request.idempotency_key === "string";
    const res = await this.#http.call("POST", "/api/v1/workflows", {
      body: request,
      headers,
      timeout: 60,
      retry: keyed ? IDEMPOTENT : SUBMIT_UNKEYED,
      signal,
    });
    return res.body;
  }

  /** Reads a workflow: status, counts and every node with its status. */
  async getWorkflow(workflowId, { signal } = {}) {
    return (await this.#http.call("GET", `/api/v1/workflows/${pathID(workflowId, "workflowId")}`, { signal })).body;
  }

  /** Waits until the workflow ended, like wait(). */
  async waitWorkflow(workflowId, { timeout = 60, signal } = {}) {
    const path = `/api/v1/workflows/${pathID(workflowId, "workflowId")}`;
    return this.#longPoll(path, "workflow", WORKFLOW_TERMINAL, timeout, signal);
  }

  /** Cancels a workflow: every node not ended is cancelled. */
  async cancelWorkflow(workflowId, { signal } = {}) {
    const path = `/api/v1/workflows/${pathID(workflowId, "workflowId")}/cancel`;
    return (await this.#http.call("POST", path, { body: {}, signal })).body;
  }

  async #longPoll(path, what, terminal, timeout, signal) {
    if (typeof timeout !== "number" || !(timeout >= 0)) throw new RangeError(`timeout must be seconds >= 0`);
    const deadline = performance.now() + timeout * 1000;
    for (;;) {
      const left = (deadline - performance.now()) / 1000;
      const w = Math.max(0, Math.min(left, POLL_S));
      const res = await this.#http.call("GET", `${path}?wait=${w.toFixed(3)}`, { timeout: w + 15, signal });
      if (terminal.has(res.body.status)) return res.body;
      if (left <= 0) throw new WaitTimeout(`${what} is still ${res.body.status} after ${timeout} s`, res.body);
    }
  }
}

function checkObject(v, what) {
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new TypeError(`${what} must be an object`);
}

function checkKey(k) {
  if (typeof k !== "string" || k.length === 0 || k.length > 255 || !/^[\x20-\x7e]+$/.test(k)) {
    throw new TypeError("an idempotency key is 1..255 printable ASCII characters");
  }
  return k;
}

function pathID(id, what) {
  if (typeof id !== "string" || id === "") throw new TypeError(`${what} must be a non-empty string`);
  return encodeURIComponent(id);
}
