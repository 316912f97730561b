// Type declarations of @dtq/client. The wire shapes (wire.Task,
// wire.SubmitRequest, ...) are generated from the API description into
// src/openapi.d.ts by scripts/gen-types.mjs.

import type { IncomingHttpHeaders } from "node:http";

import type * as wire from "./src/openapi.js";

export * as wire from "./src/openapi.js";

/** The client's version, sent in User-Agent. */
export const VERSION: string;

// ---- errors ----

/**
 * An error code of the API, HTTP_<status> for an answer without an error
 * body, or INVALID_ANSWER for an answer the client cannot use.
 */
export type ErrorCode = wire.ErrorCode | `HTTP_${number}` | "INVALID_ANSWER";

/**
 * An error answer of the API. `message` is the server's message (for
 * people; do not parse it); `details` is `{}` when the answer had none.
 */
export class APIError extends Error {
  constructor(status: number, code: string, message: string, details?: Record<string, unknown>, requestId?: string);
  /** The HTTP status. */
  readonly status: number;
  /** The error code, e.g. "INVALID_TASK". */
  readonly code: ErrorCode;
  /** field, task_id, queue, depth, limit, ... depending on the code. */
  readonly details: Record<string, unknown>;
  /** The id the server logged the request under ("" when unknown). */
  readonly requestId: string;
  /** Seconds the server asked to wait (Retry-After), when it did. */
  retryAfter: number | undefined;
}

/**
 * An answer the client cannot use (code INVALID_ANSWER): a 2xx body that is
 * not JSON, an answer over MAX_BODY_BYTES, or one not of the shape the API
 * documents. `status` is the answer's status (0 when its shape was checked
 * after the call). Not sent again.
 */
export class InvalidAnswer extends APIError {
  constructor(message: string, status?: number);
  readonly code: "INVALID_ANSWER";
}

/** 409 LEASE_LOST: the lease token no longer owns the task; nothing was written. */
export class LeaseLost extends APIError {}

/** 409 IDEMPOTENCY_IN_PROGRESS: the idempotency key belongs to a task or workflow that has not finished. */
export class IdempotencyInProgress extends APIError {
  /** The task the key belongs to (details.task_id), when the API named it. */
  readonly taskId: string | undefined;
  /** The workflow the key belongs to (details.workflow_id), when the API named it. */
  readonly workflowId: string | undefined;
}

/** 422 IDEMPOTENCY_KEY_MISMATCH: the key was used with a different request. */
export class IdempotencyKeyMismatch extends APIError {
  /** The task the key belongs to (details.task_id), when the API named it. */
  readonly taskId: string | undefined;
}

/** 429 QUEUE_FULL: the queue holds its most live tasks; retryAfter says when to try again. */
export class QueueFull extends APIError {}

/** Thrown by a handler: the task is dead-lettered without a retry. */
export class Permanent extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}

/** Thrown by a handler: the task is retried after `seconds` (while attempts remain). */
export class RetryAfter extends Error {
  constructor(seconds: number, message?: string, options?: { cause?: unknown });
  readonly seconds: number;
}

/** wait() or waitWorkflow() gave up before the task or workflow ended. */
export class WaitTimeout extends Error {
  constructor(message: string, last: unknown);
  /** What the last poll answered. */
  readonly last: unknown;
}

/** Why a task's AbortSignal aborted. */
export type AbortReason = "cancelled" | "lease_lost" | "timeout" | "shutdown";

/** The reason (signal.reason) of an aborted task signal. */
export class TaskAborted extends Error {
  constructor(why: AbortReason, message: string);
  readonly why: AbortReason;
}

/** The largest answer the client reads, in bytes (128 MiB); a larger one is an InvalidAnswer. */
export const MAX_BODY_BYTES: number;

/** The longest Retry-After the client waits, in seconds (60). */
export const MAX_RETRY_AFTER_S: number;

/** A request (its answer's body included) did not end within its timeout. */
export class RequestTimeout extends Error {
  constructor(ms: number);
  readonly code: "DTQ_REQUEST_TIMEOUT";
}

// ---- low-level HTTP ----

/** What may be sent again after a failure: anything, or only what certainly wrote nothing. */
export type RetryPolicy =
  | { readonly mode: "idempotent" }
  | { readonly mode: "safe"; readonly codes: ReadonlySet<string> };

/** Retries transport errors and 429/502/503/504: for calls that may land twice harmlessly. */
export const IDEMPOTENT: RetryPolicy;

/** Retries only failures that wrote nothing: a refused connection, a stale socket, answers with these codes. */
export function safeOnly(...codes: string[]): RetryPolicy;

export interface HTTPOptions {
  /** The API's base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  /** An API key, sent as a bearer token; none in open mode. */
  token?: string;
  /** How many times a failed call is sent again (default 6). */
  retries?: number;
  /** Seconds one request may take (default 10). */
  timeout?: number;
  /** Connections kept to the API at most (default 64). */
  maxSockets?: number;
}

export interface CallOptions {
  body?: unknown;
  headers?: Record<string, string>;
  /** Seconds for each try. */
  timeout?: number;
  /** Default IDEMPOTENT; null sends once. */
  retry?: RetryPolicy | null;
  signal?: AbortSignal;
}

export interface Answer<T = any> {
  status: number;
  headers: IncomingHttpHeaders;
  body: T;
}

/** JSON requests to one API with a bearer token and retries; the Producer and Worker use it. */
export class HTTP {
  constructor(options: HTTPOptions);
  readonly base: string;
  /** Resolves with a 2xx answer; rejects with an APIError (or a transport error). */
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<Answer<T>>;
  /** Closes idle connections. */
  close(): void;
}

// ---- producer ----

/** The statuses a task ends in. */
export const TERMINAL: ReadonlySet<wire.Status>;
/** The statuses a workflow ends in. */
export const WORKFLOW_TERMINAL: ReadonlySet<wire.WorkflowStatus>;

/**
 * Deduplication of submissions of the same work (docs/deduplication.md):
 * `key` or `by`, `mode`, and the durations its mode takes.
 */
export type Dedup = wire.Dedup;

/** A task submission: the API's SubmitRequest. */
export type SubmitRequest = wire.SubmitRequest;

export interface ClientOptions {
  /** The API's base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  /** An API key: producer for submissions, admin for cancel of a task. */
  token?: string;
  /** How many times a failed call that is safe to resend is sent again (default 6). */
  retries?: number;
  /** Seconds one request may take (default 10). */
  timeout?: number;
}

export interface RequestOptions {
  /** Aborts the call (and its retries). */
  signal?: AbortSignal;
}

export interface SubmitOptions extends RequestOptions {
  /** Sent as the Idempotency-Key header (it wins over the body's idempotency_key). */
  idempotencyKey?: string;
}

export interface WaitOptions extends RequestOptions {
  /** Seconds to wait in all (default 60); then WaitTimeout. */
  timeout?: number;
}

export interface CancelOptions extends RequestOptions {
  /** Why; one line of at most 200 characters. */
  reason?: string;
}

export interface LogsOptions extends RequestOptions {
  /** Only this attempt's lines. */
  attempt?: number;
  /** next_cursor of an earlier page. */
  cursor?: string;
  /** Lines per page, 1..1000 (default 100). */
  limit?: number;
}

/** Submits tasks and workflows and reads them back. */
export class Producer {
  constructor(options: ClientOptions);
  /** Closes idle connections; the producer stays usable. */
  close(): void;
  /** Submits one task: 202 created (duplicate false) or a replay (duplicate true). */
  submit(request: SubmitRequest, options?: SubmitOptions): Promise<wire.SubmitResponse>;
  /** Submits up to 1000 tasks; one item per task, in order. */
  submitBatch(tasks: SubmitRequest[], options?: RequestOptions): Promise<wire.BatchItem[]>;
  /** Reads one task with its result and attempts. */
  get(taskId: string, options?: RequestOptions): Promise<wire.Task>;
  /** Long-polls until the task ended; rejects with WaitTimeout after options.timeout seconds. */
  wait(taskId: string, options?: WaitOptions): Promise<wire.Task>;
  /** Cancels a task (admin key); a running one gets a cancel request. */
  cancel(taskId: string, options?: CancelOptions): Promise<wire.CancelResponse>;
  /** Reads a page of the task's log lines, oldest first. */
  logs(taskId: string, options?: LogsOptions): Promise<wire.TaskLogPage>;
  /** Submits a workflow (a DAG of tasks) as one unit. */
  submitWorkflow(request: wire.WorkflowRequest, options?: SubmitOptions): Promise<wire.WorkflowSubmitResponse>;
  /** Reads a workflow: status, counts and every node. */
  getWorkflow(workflowId: string, options?: RequestOptions): Promise<wire.Workflow>;
  /** Long-polls until the workflow ended; rejects with WaitTimeout after options.timeout seconds. */
  waitWorkflow(workflowId: string, options?: WaitOptions): Promise<wire.Workflow>;
  /** Cancels a workflow: every node not ended is cancelled. */
  cancelWorkflow(workflowId: string, options?: RequestOptions): Promise<wire.WorkflowCancelResponse>;
}

// ---- worker ----

/** The largest progress object, as JSON bytes. */
export const MAX_PROGRESS_BYTES: number;
/** The longest log line in UTF-8 bytes; longer lines are cut. */
export const MAX_LOG_LINE_BYTES: number;
/** The most lines buffered between reports (the oldest dropped). */
export const MAX_LOG_LINES: number;

/** A payload as submitted: a JSON object. */
export type Payload = Record<string, any>;

/** A claimed task, as its handler sees it. */
export class Task<P extends object = Payload> {
  private constructor();
  readonly id: string;
  readonly queue: string;
  readonly type: string;
  readonly payload: P;
  readonly metadata: Record<string, unknown> | null;
  /** 1 for the first attempt. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** How long the attempt may run; the signal aborts (reason "timeout") after it. */
  readonly timeoutMs: number;
  readonly idempotencyKey: string | null;
  readonly priority: number;
  /** Fences this attempt's calls; keep it with the worker. */
  readonly leaseToken: string;
  /** When the lease runs out unless renewed (heartbeats renew it). */
  readonly leaseExpiresAt: wire.Time;
  /** A workflow node's workflow. */
  readonly workflowId: string | undefined;
  /** A workflow node's ref. */
  readonly ref: string | undefined;
  /** A workflow node's deps' outcomes by ref ({} for a plain task). */
  readonly deps: Record<string, wire.DepResult>;
  /** The claimed task as the API sent it. */
  readonly raw: wire.LeasedTask;
  /** Aborts on a cancel request, a lost lease, the attempt's timeout or the worker's hand-back; its reason is a TaskAborted. */
  readonly signal: AbortSignal;
  /** A cancel was requested: stop and throw; the task then ends cancelled. */
  readonly cancelled: boolean;
  /** The lease is gone: whatever the handler returns is discarded. */
  readonly lost: boolean;
  /** Log lines dropped because more than MAX_LOG_LINES waited to be sent. */
  readonly droppedLines: number;
  /** Reports progress: a number 0..100 or an object of at most 4 KiB as JSON; the last value within a second wins. */
  progress(value: number | Record<string, unknown>): void;
  /** Appends a line to the attempt's log (cut to 1 KiB), sent with the time of this call. */
  log(line: unknown): void;
  /** Adds nodes to this task's workflow; the same nodes again are no change. */
  addNodes(nodes: wire.WorkflowNode[]): Promise<wire.NodeRef[]>;
}

/**
 * Runs one task: resolve with its result (any JSON; undefined is null), or
 * throw: Permanent dead-letters it, RetryAfter retries it after a delay,
 * anything else retries it with the server's backoff.
 */
export type Handler<P extends object = Payload, R = unknown> = (task: Task<P>, signal: AbortSignal) => R | Promise<R>;

export interface WorkerOptions {
  /** The API's base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  /** A worker key. */
  token: string;
  /** The queues served, in this order (1..16). */
  queues: string[];
  /** Handlers at once, and the most one claim asks for (up to 100); default 10. */
  concurrency?: number;
  /** Seconds each claim and heartbeat lease lasts (5..3600, default 30); heartbeats run every lease/3. */
  lease?: number;
  /** Seconds one claim long-polls (0..30, default 10). */
  wait?: number;
  /** Default ts-<host>-<pid>-<random>; keep one per process across restarts. */
  workerId?: string;
  /** Seconds run() waits for running handlers after a stop before handing them back (default 30). */
  drainTimeout?: number;
  /** How many times a failed call is sent again (default 6). */
  retries?: number;
  /** Where the worker tells what went wrong (default: nowhere). */
  log?: (message: string) => void;
  /** Stop on SIGTERM and SIGINT while run() runs (default true). */
  signals?: boolean;
}

/** Claims tasks over HTTP and runs the registered handlers. */
export class Worker {
  constructor(options: WorkerOptions);
  readonly workerId: string;
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly lease: number;
  readonly wait: number;
  readonly drainTimeout: number;
  readonly signals: boolean;
  /** Tasks whose outcome (complete or fail) the API accepted. */
  readonly processed: number;
  /** The tasks running now. */
  readonly running: Task[];
  /** Registers the handler of taskType; returns the worker. */
  handle<P extends object = Payload>(taskType: string, handler: Handler<P>): this;
  /** Claims and runs tasks until stop() or SIGTERM/SIGINT; resolves once drained. */
  run(): Promise<void>;
  /** Stops claiming; resolves when run() has returned. */
  stop(): Promise<void>;
  /** Closes idle connections. */
  close(): void;
}
