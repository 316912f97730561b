// dtq's HTTP API client: a Producer (submit, read, wait, cancel tasks and
// workflows) and a Worker (claim and run tasks). Node >= 20, no dependencies.

export {
  APIError,
  IdempotencyInProgress,
  IdempotencyKeyMismatch,
  InvalidAnswer,
  LeaseLost,
  Permanent,
  QueueFull,
  RetryAfter,
  TaskAborted,
  WaitTimeout,
} from "./errors.js";
export { HTTP, IDEMPOTENT, MAX_BODY_BYTES, MAX_RETRY_AFTER_S, RequestTimeout, safeOnly, VERSION } from "./http.js";
export { Producer, TERMINAL, WORKFLOW_TERMINAL } from "./producer.js";
export { MAX_LOG_LINE_BYTES, MAX_LOG_LINES, MAX_PROGRESS_BYTES, Task, Worker } from "./worker.js";
