// Shared by the tests that run against a live `dtq api`: its URL and keys
// come from the environment, as for the Python client's tests.

import { randomBytes } from "node:crypto";

export const URL = process.env.DTQ_URL ?? "";
export const WORKER = process.env.DTQ_WORKER_TOKEN ?? "";
export const PRODUCER = process.env.DTQ_PRODUCER_TOKEN ?? "";
export const ADMIN = process.env.DTQ_ADMIN_TOKEN ?? "";

/** Throws unless the live API's URL and keys are set: a test without them fails, it is not skipped. */
export function requireEnv() {
  if (!(URL && WORKER && PRODUCER && ADMIN)) {
    throw new Error(
      "set DTQ_URL, DTQ_WORKER_TOKEN, DTQ_PRODUCER_TOKEN and DTQ_ADMIN_TOKEN to a live dtq api and its keys (see README.md)",
    );
  }
}

/** A queue name of its own for one test. */
export function freshQueue(name) {
  return `${name}-${randomBytes(4).toString("hex")}`;
}

/** Polls cond every 20 ms until it is true; rejects after timeout seconds. */
export async function waitUntil(cond, { timeout = 30, what = "condition" } = {}) {
  const deadline = performance.now() + timeout * 1000;
  while (performance.now() < deadline) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A promise with its resolve function, for a handler to signal a test. */
export function latch() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * Runs worker for the length of fn, then stops it (and fails when run()
 * rejected).
 */
export async function withWorker(worker, fn) {
  const run = worker.run();
  try {
    return await fn(worker);
  } finally {
    await worker.stop();
    await run;
    worker.close();
  }
}
