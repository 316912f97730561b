// The errors of the client: the API's error answers (APIError and its
// subclasses for the codes a caller acts on) and the two a handler throws to
// steer retries (Permanent, RetryAfter).

/**
 * An error answer of the API: the HTTP status and the body's code, message
 * and details (`{}` when the answer had none), and the request id the server
 * logged it under.
 */
export class APIError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {Record<string, unknown>} [details]
   * @param {string} [requestId]
   */
  constructor(status, code, message, details, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.apiMessage = message;
    this.details = details && typeof details === "object" ? details : {};
    this.requestId = requestId ?? "";
    /** Seconds the server asked to wait (the Retry-After header), or undefined. */
    this.retryAfter = undefined;
    // The stack's first line says what a log reader needs: status and code.
    if (typeof this.stack === "string") {
      const nl = this.stack.indexOf("\n");
      this.stack = `${this.name}: ${status} ${code}: ${message}` + (nl < 0 ? "" : this.stack.slice(nl));
    }
  }

  toString() {
    return `${this.name}: ${this.status} ${this.code}: ${this.message}`;
  }
}
APIError.prototype.name = "APIError";

/**
 * An answer the client cannot use (code INVALID_ANSWER): a 2xx body that is
 * not JSON, an answer larger than the client reads, or one not of the shape
 * the API documents. `status` is the answer's HTTP status (0 when its shape
 * was checked after the call). It is not sent again: the same server would
 * answer the same.
 */
export class InvalidAnswer extends APIError {
  /**
   * @param {string} message
   * @param {number} [status]
   */
  constructor(message, status = 0) {
    super(status, "INVALID_ANSWER", message);
  }
}
InvalidAnswer.prototype.name = "InvalidAnswer";

/** 409 LEASE_LOST: the lease token no longer owns the task; nothing was written. */
export class LeaseLost extends APIError {}
LeaseLost.prototype.name = "LeaseLost";

/**
 * 409 IDEMPOTENCY_IN_PROGRESS: the idempotency key belongs to a task (or
 * workflow) that has not finished; `taskId` (or `workflowId`) names it.
 * Ask again later for its outcome.
 */
export class IdempotencyInProgress extends APIError {
  /** The task the key belongs to, when the API named it. */
  get taskId() {
    return typeof this.details.task_id === "string" ? this.details.task_id : undefined;
  }

  /** The workflow the key belongs to, when the API named it. */
  get workflowId() {
    return typeof this.details.workflow_id === "string" ? this.details.workflow_id : undefined;
  }
}
IdempotencyInProgress.prototype.name = "IdempotencyInProgress";

/** 422 IDEMPOTENCY_KEY_MISMATCH: the key was used with a different request. */
export class IdempotencyKeyMismatch extends APIError {
  /** The task the key belongs to, when the API named it. */
  get taskId() {
    return typeof this.details.task_id === "string" ? this.details.task_id : undefined;
  }
}
IdempotencyKeyMismatch.prototype.name = "IdempotencyKeyMismatch";

/** 429 QUEUE_FULL: the queue holds its most live tasks; `retryAfter` says when to try again. */
export class QueueFull extends APIError {}
QueueFull.prototype.name = "QueueFull";

const classes = {
  LEASE_LOST: LeaseLost,
  IDEMPOTENCY_IN_PROGRESS: IdempotencyInProgress,
  IDEMPOTENCY_KEY_MISMATCH: IdempotencyKeyMismatch,
  QUEUE_FULL: QueueFull,
};

/**
 * The APIError for an error answer: its status, parsed body (an error
 * envelope, or anything else) and Retry-After seconds.
 * @param {number} status
 * @param {unknown} body
 * @param {string} raw the body's text, shown when it is not an envelope
 * @param {number | undefined} retryAfter
 */
export function errorFor(status, body, raw, retryAfter) {
  let code = `HTTP_${status}`;
  let message = raw.slice(0, 200);
  let details = {};
  let requestId = "";
  if (body && typeof body === "object" && typeof body.code === "string") {
    code = body.code;
    message = typeof body.message === "string" ? body.message : "";
    details = body.details;
    requestId = typeof body.request_id === "string" ? body.request_id : "";
  }
  const Cls = classes[code] ?? APIError;
  const err = new Cls(status, code, message, details, requestId);
  err.retryAfter = retryAfter;
  return err;
}

/**
 * Thrown by a handler: the task is dead-lettered (failed when the DLQ is
 * off) without a retry. Its error class is the cause's name when it has an
 * Error cause, else "Permanent".
 */
export class Permanent extends Error {
  /**
   * @param {string} [message]
   * @param {{cause?: unknown}} [options]
   */
  constructor(message, options) {
    super(message ?? "", options);
  }
}
Permanent.prototype.name = "Permanent";

/**
 * Thrown by a handler: the task is retried after `seconds` (while attempts
 * remain), in place of the server's backoff.
 */
export class RetryAfter extends Error {
  /**
   * @param {number} seconds
   * @param {string} [message]
   * @param {{cause?: unknown}} [options]
   */
  constructor(seconds, message, options) {
    super(message ?? "", options);
    if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) {
      throw new RangeError(`RetryAfter: seconds must be a number >= 0, not ${seconds}`);
    }
    this.seconds = seconds;
  }
}
RetryAfter.prototype.name = "RetryAfter";

/** wait() or waitWorkflow() gave up: the task or workflow had not ended within the timeout. */
export class WaitTimeout extends Error {
  /**
   * @param {string} message
   * @param {unknown} last what the last poll answered
   */
  constructor(message, last) {
    super(message);
    this.last = last;
  }
}
WaitTimeout.prototype.name = "WaitTimeout";

/**
 * The reason a task's AbortSignal aborted: `why` is "cancelled" (a cancel
 * was requested), "lease_lost" (the lease is gone: the result would be
 * discarded), "timeout" (the attempt ran past timeout_ms) or "shutdown"
 * (the worker stopped before the handler finished; the task was handed
 * back).
 */
export class TaskAborted extends Error {
  /**
   * @param {"cancelled" | "lease_lost" | "timeout" | "shutdown"} why
   * @param {string} message
   */
  constructor(why, message) {
    super(message);
    this.why = why;
  }
}
TaskAborted.prototype.name = "TaskAborted";
