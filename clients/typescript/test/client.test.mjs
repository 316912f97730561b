// Tests of the client against a live `dtq api`. The Go test
// cmd/dtq/internal/cli TestTypeScriptClient starts Redis and `dtq api` and
// runs these with DTQ_URL and the DTQ_*_TOKEN keys set; run them by hand
// the same way against your own API (README.md).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { before, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  APIError,
  HTTP,
  IdempotencyInProgress,
  IdempotencyKeyMismatch,
  LeaseLost,
  Permanent,
  Producer,
  RetryAfter,
  TaskAborted,
  WaitTimeout,
  Worker,
} from "../src/index.js";
import { ADMIN, PRODUCER, URL, WORKER, freshQueue, latch, requireEnv, waitUntil, withWorker } from "./helpers.mjs";

const here = dirname(fileURLToPath(import.meta.url));

before(requireEnv);

const producer = () => new Producer({ url: URL, token: PRODUCER });
const admin = () => new Producer({ url: URL, token: ADMIN });
const worker = (queues, opts = {}) => new Worker({ url: URL, token: WORKER, queues, wait: 1, signals: false, ...opts });

test("a thousand tasks: none lost, none run twice", async () => {
  const q = freshQueue("bulk");
  const n = 1000;
  const p = producer();
  const sent = new Map();
  for (let start = 0; start < n; start += 500) {
    const items = await p.submitBatch(
      Array.from({ length: 500 }, (_, i) => ({ task_type: "double", queue: q, payload: { n: start + i } })),
    );
    assert.equal(items.length, 500);
    for (const it of items) {
      assert.equal(it.http_status, 202, JSON.stringify(it));
      sent.set(it.task.task_id, it.task.payload.n);
    }
  }
  assert.equal(sent.size, n);
  const seen = new Map();
  const w = worker([q], { concurrency: 10 });
  w.handle("double", (task) => {
    seen.set(task.id, (seen.get(task.id) ?? 0) + 1);
    return { n: task.payload.n * 2 };
  });
  const began = performance.now();
  await withWorker(w, () => waitUntil(() => w.processed >= n, { timeout: 120, what: "1000 tasks" }));
  const took = (performance.now() - began) / 1000;
  console.log(`HTTP worker (typescript, max 10): ${n} tasks in ${took.toFixed(2)}s = ${Math.round(n / took)} tasks/s`);
  assert.deepEqual([...seen.keys()].sort(), [...sent.keys()].sort(), "every task ran");
  assert.deepEqual(
    [...seen].filter(([, c]) => c !== 1),
    [],
    "no task ran twice",
  );
  const ids = [...sent.keys()];
  for (let i = 0; i < n; i += n / 50) {
    const t = await p.get(ids[i]);
    assert.equal(t.status, "succeeded");
    assert.equal(t.attempt, 1);
    assert.deepEqual(t.result, { n: sent.get(ids[i]) * 2 });
  }
  p.close();
});

test("submit: Idempotency-Key while running, after success and with another body", async () => {
  const q = freshQueue("idem");
  const p = producer();
  const key = freshQueue("key");
  const req = { task_type: "job", queue: q, payload: { x: 1 }, priority: 7, metadata: { who: "test" } };
  const first = await p.submit(req, { idempotencyKey: key });
  assert.equal(first.duplicate, false);
  assert.equal(first.status, "queued");
  assert.equal(first.priority, 7);
  assert.equal(first.idempotency_key, key);
  await assert.rejects(p.submit(req, { idempotencyKey: key }), (err) => {
    assert.ok(err instanceof IdempotencyInProgress, String(err));
    assert.equal(err.status, 409);
    assert.equal(err.code, "IDEMPOTENCY_IN_PROGRESS");
    assert.equal(err.taskId, first.task_id);
    return true;
  });
  await withWorker(
    worker([q]).handle("job", () => "done"),
    () => p.wait(first.task_id, { timeout: 30 }),
  );
  const replay = await p.submit(req, { idempotencyKey: key });
  assert.equal(replay.duplicate, true);
  assert.equal(replay.task_id, first.task_id);
  assert.equal(replay.result, "done");
  await assert.rejects(p.submit({ ...req, payload: { x: 2 } }, { idempotencyKey: key }), (err) => {
    assert.ok(err instanceof IdempotencyKeyMismatch, String(err));
    assert.equal(err.status, 422);
    assert.equal(err.taskId, first.task_id);
    return true;
  });
  // The body's idempotency_key works the same way.
  const again = await p.submit({ ...req, idempotency_key: key });
  assert.equal(again.task_id, first.task_id);
  p.close();
});

test("submit: every field reaches the task; a delayed task is pending", async () => {
  const q = freshQueue("fields");
  const p = producer();
  const t = await p.submit({
    task_type: "later",
    queue: q,
    payload: { a: [1, 2] },
    priority: 2,
    max_attempts: 3,
    timeout_ms: 5000,
    delay_ms: 3_600_000,
    metadata: { source: "test" },
    concurrency_key: "tenant-1",
    retention_seconds: 600,
    keep_payload: true,
  });
  assert.equal(t.status, "pending");
  const got = await p.get(t.task_id);
  assert.deepEqual(
    [got.priority, got.max_attempts, got.timeout_ms, got.concurrency_key, got.retention_seconds, got.keep_payload],
    [2, 3, 5000, "tenant-1", 600, true],
  );
  assert.deepEqual(got.payload, { a: [1, 2] });
  assert.equal(got.metadata.source, "test");
  await assert.rejects(p.wait(t.task_id, { timeout: 0 }), (err) => {
    assert.ok(err instanceof WaitTimeout);
    assert.equal(err.last.status, "pending");
    return true;
  });
  const cancelled = await admin().cancel(t.task_id, { reason: "test over" });
  assert.equal(cancelled.task.status, "cancelled");
  assert.equal(cancelled.cancel_requested, false);
  p.close();
});

test("submit: a bad submission is a 400 APIError naming the field", async () => {
  const p = producer();
  await assert.rejects(p.submit({ task_type: "x", queue: freshQueue("bad"), priority: 12 }), (err) => {
    assert.ok(err instanceof APIError);
    assert.equal(err.status, 400);
    assert.equal(err.code, "INVALID_TASK");
    assert.equal(err.details.field, "priority");
    assert.match(err.requestId, /./);
    return true;
  });
  await assert.rejects(p.get("0".repeat(32)), (err) => err instanceof APIError && err.code === "TASK_NOT_FOUND");
  await assert.rejects(p.submit({ queue: "q" }), TypeError);
  await assert.rejects(p.submitBatch([]), RangeError);
  p.close();
});

test("a stale lease token gets LeaseLost and writes nothing", async () => {
  const q = freshQueue("stale");
  const p = producer();
  const t = await p.submit({ task_type: "job", queue: q, payload: { x: 1 } });
  const http = new HTTP({ url: URL, token: WORKER });
  const claim = async (id, wait) =>
    (
      await http.call("POST", "/api/v1/claims", {
        body: { worker_id: id, queues: [q], lease: 5, wait },
        timeout: 20,
      })
    ).body.tasks;
  const first = await claim("ts-stale-1", 0);
  assert.equal(first.length, 1);
  // No heartbeat: the lease runs out, the API reclaims the task and a
  // second claim gets attempt 2.
  let again = [];
  await waitUntil(
    async () => {
      again = await claim("ts-stale-2", 5);
      return again.length > 0;
    },
    { timeout: 40, what: "the reclaimed task" },
  );
  assert.equal(again[0].attempt, 2);
  const before = await p.get(t.task_id);
  for (const [route, body] of [
    ["heartbeat", {}],
    ["complete", { result: "stale" }],
    ["fail", { error: { class: "Stale", message: "x" }, retryable: false }],
  ]) {
    await assert.rejects(
      http.call("POST", `/api/v1/tasks/${t.task_id}/${route}`, {
        body: { ...body, lease_token: first[0].lease_token },
      }),
      (err) => err instanceof LeaseLost && err.status === 409 && err.code === "LEASE_LOST",
    );
  }
  assert.deepEqual(await p.get(t.task_id), before, "a stale token wrote nothing");
  const done = await http.call("POST", `/api/v1/tasks/${t.task_id}/complete`, {
    body: { lease_token: again[0].lease_token, result: "fresh" },
  });
  assert.equal(done.body.status, "succeeded");
  http.close();
  p.close();
});

test("a cancel is seen at the next heartbeat: the signal aborts and the task ends cancelled", async () => {
  const q = freshQueue("cancel");
  const p = producer();
  const started = latch();
  let reason;
  const w = worker([q], { lease: 6 }).handle("slow", async (task, signal) => {
    started.resolve();
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    reason = signal.reason;
    assert.equal(task.cancelled, true);
    throw new Error("stopped on request");
  });
  const t = await p.submit({ task_type: "slow", queue: q });
  const final = await withWorker(w, async () => {
    await started.promise;
    const c = await admin().cancel(t.task_id, { reason: "test" });
    assert.equal(c.cancel_requested, true);
    return p.wait(t.task_id, { timeout: 30 });
  });
  assert.equal(final.status, "cancelled");
  assert.ok(reason instanceof TaskAborted);
  assert.equal(reason.why, "cancelled");
  p.close();
});

test("RetryAfter retries; the next attempt succeeds", async () => {
  const q = freshQueue("retry");
  const p = producer();
  const calls = [];
  const w = worker([q]).handle("flaky", (task) => {
    calls.push(task.attempt);
    if (task.attempt === 1) throw new RetryAfter(0.05, "try again");
    return "ok";
  });
  const t = await p.submit({ task_type: "flaky", queue: q, max_attempts: 3 });
  const final = await withWorker(w, () => p.wait(t.task_id, { timeout: 30 }));
  assert.equal(final.status, "succeeded");
  assert.equal(final.attempt, 2);
  assert.deepEqual(calls, [1, 2]);
  assert.equal(final.attempts[0].error_class, "RetryAfter");
  p.close();
});

test("Permanent dead-letters at once; an Error cause names the class", async () => {
  const q = freshQueue("perm");
  const p = producer();
  const w = worker([q])
    .handle("bad", () => {
      throw new Permanent("cannot do this");
    })
    .handle("worse", () => {
      throw new Permanent("wrapped", { cause: new TypeError("no width") });
    });
  const a = await p.submit({ task_type: "bad", queue: q, max_attempts: 5 });
  const b = await p.submit({ task_type: "worse", queue: q, max_attempts: 5 });
  const [fa, fb] = await withWorker(w, () =>
    Promise.all([p.wait(a.task_id, { timeout: 30 }), p.wait(b.task_id, { timeout: 30 })]),
  );
  assert.deepEqual([fa.status, fa.attempt, fa.execution.error_class], ["dead_lettered", 1, "Permanent"]);
  assert.deepEqual([fb.status, fb.attempt, fb.execution.error_class], ["dead_lettered", 1, "TypeError"]);
  assert.equal(fb.execution.error_message, "wrapped");
  p.close();
});

test("a task without a handler is dead-lettered; a result that is not JSON is a permanent failure", async () => {
  const q = freshQueue("nohandler");
  const p = producer();
  const w = worker([q]).handle("bigint", () => ({ n: 1n }));
  const a = await p.submit({ task_type: "unknown", queue: q });
  const b = await p.submit({ task_type: "bigint", queue: q });
  const [fa, fb] = await withWorker(w, () =>
    Promise.all([p.wait(a.task_id, { timeout: 30 }), p.wait(b.task_id, { timeout: 30 })]),
  );
  assert.equal(fa.status, "dead_lettered");
  assert.match(fa.execution.error_message, /no handler for task type "unknown"/);
  assert.equal(fb.status, "dead_lettered");
  assert.equal(fb.execution.error_class, "TypeError");
  p.close();
});

test("a handler past timeout_ms is aborted and fails with class Timeout", async () => {
  const q = freshQueue("timeout");
  const p = producer();
  const w = worker([q]).handle("hang", async (task, signal) => {
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    assert.equal(signal.reason.why, "timeout");
    throw signal.reason;
  });
  const t = await p.submit({ task_type: "hang", queue: q, timeout_ms: 100, max_attempts: 1 });
  const final = await withWorker(w, () => p.wait(t.task_id, { timeout: 30 }));
  assert.equal(final.status, "dead_lettered");
  assert.equal(final.execution.error_class, "Timeout");
  p.close();
});

test("a two-node workflow: the second node reads the first's result", async () => {
  const q = freshQueue("wf");
  const p = producer();
  const seen = {};
  const w = worker([q])
    .handle("fetch", (task) => ({ bytes: task.payload.size }))
    .handle("resize", (task) => {
      Object.assign(seen, { deps: task.deps, ref: task.ref, workflowId: task.workflowId });
      return { half: task.deps.fetch.result.bytes / 2 };
    });
  const wf = await p.submitWorkflow(
    {
      name: "ts-pair",
      nodes: [
        { ref: "fetch", queue: q, task_type: "fetch", payload: { size: 84 } },
        { ref: "resize", queue: q, task_type: "resize", deps: ["fetch"] },
      ],
    },
    { idempotencyKey: freshQueue("ts-pair") },
  );
  assert.equal(wf.status, "running");
  assert.deepEqual(
    wf.nodes.map((n) => n.status),
    ["queued", "waiting"],
  );
  const final = await withWorker(w, () => p.waitWorkflow(wf.workflow_id, { timeout: 60 }));
  assert.equal(final.status, "succeeded");
  assert.deepEqual(final.counts, { succeeded: 2 });
  assert.equal(seen.ref, "resize");
  assert.equal(seen.workflowId, wf.workflow_id);
  assert.deepEqual(seen.deps, { fetch: { status: "succeeded", result: { bytes: 84 } } });
  assert.deepEqual((await p.get(final.nodes[1].task_id)).result, { half: 42 });
  p.close();
});

test("a running node adds nodes; they run and the workflow succeeds", async () => {
  const q = freshQueue("fanout");
  const p = producer();
  let added;
  const w = worker([q])
    .handle("split", async (task) => {
      const nodes = [1, 2].map((i) => ({ ref: `part-${i}`, queue: q, task_type: "part", payload: { i } }));
      added = await task.addNodes(nodes);
      // Added again (a handler runs at least once): no change.
      assert.deepEqual(await task.addNodes(nodes), added);
      return "split";
    })
    .handle("part", (task) => task.payload.i * 10);
  const wf = await p.submitWorkflow({ nodes: [{ ref: "split", queue: q, task_type: "split" }] });
  const final = await withWorker(w, () => p.waitWorkflow(wf.workflow_id, { timeout: 60 }));
  assert.equal(final.status, "succeeded");
  assert.deepEqual(
    added.map((n) => n.ref),
    ["part-1", "part-2"],
  );
  assert.deepEqual(final.counts, { succeeded: 3 });
  const parts = final.nodes.filter((n) => n.ref.startsWith("part-"));
  assert.deepEqual((await Promise.all(parts.map((n) => p.get(n.task_id)))).map((t) => t.result).sort(), [10, 20]);
  p.close();
});

test("cancelWorkflow cancels its nodes", async () => {
  const q = freshQueue("wfcancel");
  const p = producer();
  const wf = await p.submitWorkflow({
    nodes: [
      { ref: "a", queue: q, task_type: "a" },
      { ref: "b", queue: q, task_type: "b", deps: ["a"] },
    ],
  });
  const c = await p.cancelWorkflow(wf.workflow_id);
  assert.equal(c.workflow.workflow_id, wf.workflow_id);
  const final = await p.waitWorkflow(wf.workflow_id, { timeout: 30 });
  assert.equal(final.status, "cancelled");
  assert.deepEqual(
    (await p.getWorkflow(wf.workflow_id)).nodes.map((n) => n.status),
    ["cancelled", "cancelled"],
  );
  p.close();
});

test("progress and log lines land before the outcome, each line once, in order", async () => {
  const q = freshQueue("progress");
  const p = producer();
  const w = worker([q]).handle("report", (task) => {
    task.progress(10);
    for (let i = 0; i < 3; i++) task.log(`step ${i}`);
    task.log("é".repeat(1000)); // 2000 bytes: cut to 1 KiB
    assert.throws(() => task.progress(101), RangeError);
    assert.throws(() => task.progress("half"), TypeError);
    assert.throws(() => task.progress({ big: "x".repeat(5000) }), RangeError);
    task.progress({ done: 2, of: 2 });
    return "ok";
  });
  const t = await p.submit({ task_type: "report", queue: q });
  const final = await withWorker(w, () => p.wait(t.task_id, { timeout: 30 }));
  assert.equal(final.status, "succeeded");
  assert.deepEqual(final.progress, { done: 2, of: 2 }, "the last value wins; sent before complete");
  assert.equal(final.log_attempts, 1);
  const page = await p.logs(t.task_id);
  const lines = page.items.map((it) => it.line);
  assert.deepEqual(lines, ["step 0", "step 1", "step 2", "é".repeat(512)]);
  assert.ok(page.next_cursor);
  assert.deepEqual((await p.logs(t.task_id, { cursor: page.next_cursor })).items, []);
  p.close();
});

test("a worker key cannot submit; a producer key cannot claim", async () => {
  const q = freshQueue("roles");
  await assert.rejects(
    new Producer({ url: URL, token: WORKER }).submit({ task_type: "x", queue: q }),
    (err) => err instanceof APIError && err.status === 403 && err.code === "FORBIDDEN",
  );
  const http = new HTTP({ url: URL, token: PRODUCER });
  await assert.rejects(
    http.call("POST", "/api/v1/claims", { body: { worker_id: "p", queues: [q] } }),
    (err) => err instanceof APIError && err.status === 403 && err.code === "FORBIDDEN",
  );
  http.close();
});

test("the worker is listed with kind http and its task in flight", async () => {
  const q = freshQueue("listed");
  const p = producer();
  const started = latch();
  const release = latch();
  const w = worker([q], { workerId: `ts-listed-${q}` }).handle("hold", async () => {
    started.resolve();
    await release.promise;
  });
  const t = await p.submit({ task_type: "hold", queue: q });
  const rec = await withWorker(w, async () => {
    await started.promise;
    try {
      return (await new HTTP({ url: URL, token: WORKER }).call("GET", `/api/v1/workers/${w.workerId}`)).body;
    } finally {
      release.resolve();
    }
  });
  assert.equal(rec.kind, "http");
  assert.deepEqual(rec.in_flight, [t.task_id]);
  assert.equal(rec.live, true);
  p.close();
});

test("stop() past the drain timeout hands the running task back; it runs again", async () => {
  const q = freshQueue("handback");
  const p = producer();
  const started = latch();
  let reason;
  const w = worker([q], { drainTimeout: 0.2 }).handle("stuck", async (task, signal) => {
    started.resolve();
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    reason = signal.reason;
    return "too late";
  });
  const t = await p.submit({ task_type: "stuck", queue: q, max_attempts: 3 });
  const run = w.run();
  await started.promise;
  await w.stop();
  await run;
  w.close();
  assert.equal(reason.why, "shutdown");
  assert.equal(w.processed, 0, "the handler's late result is not sent");
  const back = await p.get(t.task_id);
  assert.ok(["retrying", "queued"].includes(back.status), back.status);
  assert.equal(back.execution.error_class, "Shutdown");
  const next = worker([q]).handle("stuck", (task) => task.attempt);
  const final = await withWorker(next, () => p.wait(t.task_id, { timeout: 30 }));
  assert.equal(final.status, "succeeded");
  assert.equal(final.result, 2);
  p.close();
});

test("the example worker serves resize and stops gracefully on SIGTERM", async () => {
  const p = producer();
  const q = freshQueue("example");
  const proc = spawn(process.execPath, [join(here, "..", "examples", "worker.mjs")], {
    env: { ...process.env, DTQ_URL: URL, DTQ_TOKEN: WORKER, DTQ_QUEUE: q },
    stdio: ["ignore", "inherit", "pipe"],
  });
  let err = "";
  proc.stderr.on("data", (c) => {
    err += c;
  });
  try {
    const t = await p.submit({ task_type: "resize", queue: q, payload: { width: 640, height: 480 } });
    assert.deepEqual((await p.wait(t.task_id, { timeout: 30 })).result, { width: 320, height: 240 });
    // A task in flight when SIGTERM comes is finished, not dropped.
    const u = await p.submit({ task_type: "resize", queue: q, payload: { width: 10, height: 10 } });
    await waitUntil(async () => (await p.get(u.task_id)).status === "running", { what: "running" });
    proc.kill("SIGTERM");
    const [code] = await once(proc, "exit");
    assert.equal(code, 0, err);
    assert.match(err, /stopped after 2 tasks/);
    assert.equal((await p.get(u.task_id)).status, "succeeded");
  } finally {
    if (proc.exitCode === null) proc.kill("SIGKILL");
    p.close();
  }
});
