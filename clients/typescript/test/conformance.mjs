#!/usr/bin/env node
// The client conformance suite (clients/conformance.md) driven through the
// TypeScript client: one line per scenario on stdout, exit 1 if any failed.
//
//   DTQ_URL=... DTQ_WORKER_TOKEN=... DTQ_PRODUCER_TOKEN=... DTQ_ADMIN_TOKEN=... \
//     node clients/typescript/test/conformance.mjs

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import {
  HTTP,
  IdempotencyInProgress,
  IdempotencyKeyMismatch,
  LeaseLost,
  Permanent,
  Producer,
  TaskAborted,
  Worker,
} from "../src/index.js";

const env = {
  url: process.env.DTQ_URL ?? "",
  worker: process.env.DTQ_WORKER_TOKEN ?? "",
  producer: process.env.DTQ_PRODUCER_TOKEN ?? "",
  admin: process.env.DTQ_ADMIN_TOKEN ?? "",
  client: process.env.DTQ_CONFORMANCE_CLIENT || "typescript",
};
// Keys of this run, so that running the suite again against the same API
// does not replay the last run's tasks.
const run = randomBytes(4).toString("hex");
const SCENARIO_TIMEOUT_S = 90;

const producer = new Producer({ url: env.url || "http://127.0.0.1:1", token: env.producer });
const admin = new Producer({ url: env.url || "http://127.0.0.1:1", token: env.admin });

const queueOf = (scenario) => `conf-${env.client}-${scenario.replaceAll("_", "-")}`;
const keyOf = (scenario, n = 0) => `conf-${env.client}-${run}-${scenario}-${n}`;

function newWorker(scenario, opts = {}) {
  return new Worker({
    url: env.url,
    token: env.worker,
    queues: [queueOf(scenario)],
    wait: 1,
    signals: false,
    workerId: `conf-${env.client}-${run}-${scenario.replaceAll("_", "-")}`,
    log: (m) => console.error(`[${scenario}] ${m}`),
    ...opts,
  });
}

/** Runs worker while fn runs. */
async function serving(worker, fn) {
  const running = worker.run();
  try {
    return await fn();
  } finally {
    await worker.stop();
    await running;
    worker.close();
  }
}

async function waitUntil(cond, what, timeout = 30) {
  const deadline = performance.now() + timeout * 1000;
  while (performance.now() < deadline) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function latch() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const untilAborted = (signal) => new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));

/** Submits one task of type "job" with a key and waits until a worker completed it with result. */
async function succeeded(scenario, body, key, result) {
  const t = await producer.submit(body, { idempotencyKey: key });
  await serving(newWorker(scenario).handle(body.task_type, () => result), () =>
    producer.wait(t.task_id, { timeout: 30 }),
  );
  return t;
}

const scenarios = {
  async submit_created(s) {
    const t = await producer.submit({ task_type: "job", queue: queueOf(s), payload: { n: 1 } });
    assert.equal(t.duplicate, false, "a new task is not a replay (202)");
    assert.match(t.task_id, /^[0-9a-f]{32}$/);
    const got = await producer.get(t.task_id);
    assert.equal(got.status, "queued");
    assert.equal(got.task_id, t.task_id);
  },

  async submit_in_progress(s) {
    const body = { task_type: "job", queue: queueOf(s), payload: { n: 1 } };
    const key = keyOf(s);
    const first = await producer.submit(body, { idempotencyKey: key });
    await assert.rejects(producer.submit(body, { idempotencyKey: key }), (err) => {
      assert.ok(err instanceof IdempotencyInProgress, `want IdempotencyInProgress, got ${err}`);
      assert.equal(err.status, 409);
      assert.equal(err.code, "IDEMPOTENCY_IN_PROGRESS");
      assert.equal(err.taskId, first.task_id);
      return true;
    });
  },

  async submit_replay(s) {
    const body = { task_type: "job", queue: queueOf(s), payload: { n: 1 } };
    const key = keyOf(s);
    const first = await succeeded(s, body, key, { done: true });
    const again = await producer.submit(body, { idempotencyKey: key });
    assert.equal(again.duplicate, true, "a replay (200)");
    assert.equal(again.task_id, first.task_id);
    assert.equal(again.status, "succeeded");
    assert.deepEqual(again.result, { done: true });
  },

  async submit_mismatch(s) {
    const key = keyOf(s);
    await producer.submit({ task_type: "job", queue: queueOf(s), payload: { n: 1 } }, { idempotencyKey: key });
    await assert.rejects(
      producer.submit({ task_type: "job", queue: queueOf(s), payload: { n: 2 } }, { idempotencyKey: key }),
      (err) => {
        assert.ok(err instanceof IdempotencyKeyMismatch, `want IdempotencyKeyMismatch, got ${err}`);
        assert.equal(err.status, 422);
        assert.equal(err.code, "IDEMPOTENCY_KEY_MISMATCH");
        return true;
      },
    );
  },

  async batch_submit(s) {
    const q = queueOf(s);
    const replayed = { task_type: "job", queue: q, payload: { n: 0 }, idempotency_key: keyOf(s) };
    const first = await succeeded(s, replayed, undefined, "first");
    const items = await producer.submitBatch([
      { task_type: "job", queue: q, payload: { n: 1 } },
      replayed,
      { task_type: "job", queue: q, payload: { n: 2 } },
    ]);
    assert.equal(items.length, 3, "one result per item");
    assert.deepEqual(
      items.map((it) => [it.index, it.http_status, it.duplicate]),
      [
        [0, 202, false],
        [1, 200, true],
        [2, 202, false],
      ],
    );
    assert.equal(items[1].task.task_id, first.task_id);
    assert.deepEqual(items[0].task.payload, { n: 1 });
    assert.deepEqual(items[2].task.payload, { n: 2 });
  },

  async claim_heartbeat_complete(s) {
    const t = await producer.submit({ task_type: "job", queue: queueOf(s), payload: { n: 21 } });
    let renewed = false;
    const w = newWorker(s, { lease: 5 }).handle("job", async (task) => {
      const first = task.leaseExpiresAt;
      // Heartbeats run every lease/3: the lease's end moves on.
      await waitUntil(() => task.leaseExpiresAt !== first, "a heartbeat", 20);
      renewed = true;
      return { n: task.payload.n * 2 };
    });
    const final = await serving(w, () => producer.wait(t.task_id, { timeout: 40 }));
    assert.ok(renewed, "the handler saw a heartbeat renew the lease");
    assert.equal(final.status, "succeeded");
    assert.deepEqual(final.result, { n: 42 });
  },

  async fail_retry(s) {
    const t = await producer.submit({ task_type: "job", queue: queueOf(s), max_attempts: 3 });
    const attempts = [];
    const w = newWorker(s).handle("job", (task) => {
      attempts.push(task.attempt);
      if (task.attempt === 1) throw new Error("flaky");
      return "second time";
    });
    const final = await serving(w, () => producer.wait(t.task_id, { timeout: 40 }));
    assert.equal(final.status, "succeeded");
    assert.equal(final.attempt, 2);
    assert.equal(final.result, "second time");
    assert.deepEqual(attempts, [1, 2]);
  },

  async fail_permanent(s) {
    const t = await producer.submit({ task_type: "job", queue: queueOf(s), max_attempts: 3 });
    const w = newWorker(s).handle("job", () => {
      throw new Permanent("cannot be done");
    });
    const final = await serving(w, () => producer.wait(t.task_id, { timeout: 30 }));
    assert.equal(final.status, "dead_lettered");
    assert.equal(final.attempt, 1, "no retry");
    assert.equal(final.execution.error_class, "Permanent");
  },

  async cancel_on_heartbeat(s) {
    const t = await producer.submit({ task_type: "job", queue: queueOf(s) });
    const started = latch();
    let reason;
    const w = newWorker(s, { lease: 5 }).handle("job", async (task, signal) => {
      started.resolve();
      await untilAborted(signal);
      reason = signal.reason;
      throw signal.reason;
    });
    const final = await serving(w, async () => {
      await started.promise;
      const c = await admin.cancel(t.task_id, { reason: "conformance" });
      assert.equal(c.cancel_requested, true, "the task was running");
      return producer.wait(t.task_id, { timeout: 30 });
    });
    assert.ok(reason instanceof TaskAborted, `the signal's reason: ${reason}`);
    assert.equal(reason.why, "cancelled");
    assert.equal(final.status, "cancelled");
  },

  async lease_lost(s) {
    const q = queueOf(s);
    const t = await producer.submit({ task_type: "job", queue: q });
    const http = new HTTP({ url: env.url, token: env.worker });
    // This scenario's task among what a claim got (a queue used by an
    // earlier run against the same API may hold others).
    const claim = async (n, wait) =>
      (
        await http.call("POST", "/api/v1/claims", {
          body: { worker_id: `conf-${env.client}-${run}-lease-${n}`, queues: [q], wait, lease: 5, max: 100 },
          timeout: wait + 10,
        })
      ).body.tasks.filter((c) => c.task_id === t.task_id);
    const complete = (token, result) =>
      http.call("POST", `/api/v1/tasks/${t.task_id}/complete`, { body: { lease_token: token, result } });
    const isLeaseLost = (err) => {
      assert.ok(err instanceof LeaseLost, `want LeaseLost, got ${err}`);
      assert.equal(err.status, 409);
      assert.equal(err.code, "LEASE_LOST");
      return true;
    };
    try {
      let first = [];
      await waitUntil(
        async () => {
          first = await claim(1, 5);
          return first.length > 0;
        },
        "the first claim",
        30,
      );
      // No heartbeat: the 5 s lease runs out, the API reclaims the task and
      // a second claim gets attempt 2; the first token is stale.
      let second = [];
      await waitUntil(
        async () => {
          second = await claim(2, 5);
          return second.length > 0;
        },
        "the reclaimed task",
        40,
      );
      assert.equal(second[0].attempt, 2);
      const before = await producer.get(t.task_id);
      await assert.rejects(complete(first[0].lease_token, "stale"), isLeaseLost);
      // A token with its MAC (after the ".") altered is refused the same way.
      await assert.rejects(complete(alterMAC(second[0].lease_token), "forged"), isLeaseLost);
      assert.deepEqual(await producer.get(t.task_id), before, "nothing was written");
      const done = await complete(second[0].lease_token, "fresh");
      assert.equal(done.body.status, "succeeded");
      assert.equal(done.body.result, "fresh");
    } finally {
      http.close();
    }
  },

  async workflow_deps(s) {
    const q = queueOf(s);
    let deps;
    const w = newWorker(s)
      .handle("a", () => ({ from: "a" }))
      .handle("b", (task) => {
        deps = task.deps;
        return "b";
      });
    const wf = await producer.submitWorkflow(
      {
        nodes: [
          { ref: "a", queue: q, task_type: "a" },
          { ref: "b", queue: q, task_type: "b", deps: ["a"] },
        ],
      },
      { idempotencyKey: keyOf(s) },
    );
    const final = await serving(w, () => producer.waitWorkflow(wf.workflow_id, { timeout: 60 }));
    assert.equal(final.status, "succeeded");
    assert.deepEqual(deps, { a: { status: "succeeded", result: { from: "a" } } });
  },

  async add_nodes(s) {
    const q = queueOf(s);
    const ran = [];
    const w = newWorker(s)
      .handle("root", async (task) => {
        const added = await task.addNodes([
          { ref: "child-1", queue: q, task_type: "child", payload: { i: 1 } },
          { ref: "child-2", queue: q, task_type: "child", payload: { i: 2 } },
        ]);
        assert.deepEqual(
          added.map((n) => n.ref),
          ["child-1", "child-2"],
        );
        return "root";
      })
      .handle("child", (task) => {
        ran.push(task.payload.i);
        return task.payload.i;
      });
    const wf = await producer.submitWorkflow({ nodes: [{ ref: "root", queue: q, task_type: "root" }] });
    const final = await serving(w, () => producer.waitWorkflow(wf.workflow_id, { timeout: 60 }));
    assert.equal(final.status, "succeeded");
    assert.deepEqual(final.counts, { succeeded: 3 });
    assert.deepEqual(ran.sort(), [1, 2], "both added nodes ran");
  },

  async progress_logs(s) {
    const t = await producer.submit({ task_type: "job", queue: queueOf(s) });
    const release = latch();
    const w = newWorker(s).handle("job", async (task) => {
      task.progress(50);
      task.log("first line");
      task.log("second line");
      await release.promise;
      return "reported";
    });
    await serving(w, async () => {
      try {
        // Reports go out at most once a second, while the task runs.
        await waitUntil(async () => (await producer.get(t.task_id)).progress === 50, "progress 50", 20);
        let lines = [];
        await waitUntil(
          async () => {
            lines = (await producer.logs(t.task_id)).items.map((it) => it.line);
            return lines.length >= 2;
          },
          "two log lines",
          20,
        );
        assert.deepEqual(lines, ["first line", "second line"]);
        assert.equal((await producer.get(t.task_id)).status, "running");
      } finally {
        release.resolve();
      }
      return producer.wait(t.task_id, { timeout: 30 });
    });
  },

  async dedup(s) {
    const q = queueOf(s);
    const k = keyOf(s);
    const first = await producer.submit({ task_type: "job", queue: q, payload: { n: 1 }, dedup: { key: k, mode: "drop" } });
    assert.equal(first.dedup_key, k);
    assert.equal(first.deduplicated, undefined);
    const second = await producer.submit({ task_type: "job", queue: q, payload: { n: 2 }, dedup: { key: k, mode: "drop" } });
    assert.equal(second.deduplicated, "drop");
    assert.equal(second.task_id, first.task_id, "the second answer names the key's task");
    const r1 = await producer.submit({ task_type: "job", queue: q, payload: { n: 3 }, dedup: { key: `${k}-r`, mode: "replace" } });
    const r2 = await producer.submit({ task_type: "job", queue: q, payload: { n: 4 }, dedup: { key: `${k}-r`, mode: "replace" } });
    assert.equal(r2.replaced_task_id, r1.task_id);
    assert.equal((await producer.get(r1.task_id)).status, "cancelled");
    await assert.rejects(producer.submit({ task_type: "job", queue: q, dedup: { key: `${k}-t`, mode: "throttle" } }), (err) => {
      assert.equal(err.status, 400);
      assert.equal(err.code, "INVALID_TASK");
      assert.equal(err.details.field, "dedup.ttl");
      return true;
    });
    await admin.cancel(first.task_id);
    await admin.cancel(r2.task_id);
  },
};

/** token with one character of its MAC changed (to another of the base64url alphabet). */
function alterMAC(token) {
  const dot = token.lastIndexOf(".");
  assert.ok(dot > 0, "a lease token is body.mac");
  const i = dot + 1 + Math.floor((token.length - dot - 1) / 2);
  return token.slice(0, i) + (token[i] === "A" ? "B" : "A") + token.slice(i + 1);
}

async function main() {
  let failed = 0;
  for (const [name, fn] of Object.entries(scenarios)) {
    let reason = "";
    if (!(env.url && env.worker && env.producer && env.admin)) {
      reason = "set DTQ_URL, DTQ_WORKER_TOKEN, DTQ_PRODUCER_TOKEN and DTQ_ADMIN_TOKEN";
    } else {
      let timer;
      const began = performance.now();
      try {
        await Promise.race([
          fn(name),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`did not finish within ${SCENARIO_TIMEOUT_S} s`)), SCENARIO_TIMEOUT_S * 1000);
          }),
        ]);
      } catch (err) {
        reason = `${err?.stack ? String(err.message || err) : String(err)}`;
        console.error(`[${name}]`, err);
      } finally {
        clearTimeout(timer);
        console.error(`[${name}] ${((performance.now() - began) / 1000).toFixed(1)} s`);
      }
    }
    if (reason) {
      failed++;
      console.log(`CONFORMANCE ${name} FAIL ${reason.replace(/\s+/g, " ").trim().slice(0, 300) || "failed"}`);
    } else {
      console.log(`CONFORMANCE ${name} ok`);
    }
  }
  producer.close();
  admin.close();
  process.exit(failed > 0 ? 1 : 0);
}

await main();
