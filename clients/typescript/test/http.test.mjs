// The HTTP layer's retries and errors, and the Task's buffers, against a
// local stand-in server that answers what each case needs.

import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";

import {
  APIError,
  HTTP,
  IDEMPOTENT,
  MAX_LOG_LINES,
  Producer,
  RequestTimeout,
  Task,
  safeOnly,
} from "../src/index.js";

/**
 * Starts a server answering each request with answers[i] (the last one
 * repeated): [status, body, headers]; resolves with its URL, the requests
 * seen and a close function.
 */
async function standIn(answers) {
  const seen = [];
  const srv = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body: body ? JSON.parse(body) : undefined });
      const a = answers[Math.min(seen.length - 1, answers.length - 1)];
      if (a === "hang") return;
      const [status, out, headers = {}] = a;
      const text = typeof out === "string" ? out : JSON.stringify(out);
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(text);
    });
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const url = `http://127.0.0.1:${srv.address().port}`;
  return {
    url,
    seen,
    close: () => {
      srv.closeAllConnections();
      srv.close();
    },
  };
}

const envelope = (code, message = "m", details = {}) => ({ code, message, details, request_id: "rid" });

test("which failures are sent again", async (t) => {
  const unavailable = [503, envelope("REDIS_UNAVAILABLE")];
  const unknown = [503, envelope("OUTCOME_UNKNOWN", "m", { task_id: "t" })];
  const ok = [200, { fine: true }];
  const cases = [
    { name: "idempotent: 503 twice, then 200", retry: IDEMPOTENT, answers: [unavailable, unavailable, ok], sent: 3 },
    { name: "idempotent: 429 and 502 and 504", retry: IDEMPOTENT, answers: [[429, envelope("TOO_MANY_WAITS")], [502, "bad gateway"], [504, "x"], ok], sent: 4 },
    { name: "idempotent: a 400 is not", retry: IDEMPOTENT, answers: [[400, envelope("INVALID_TASK")], ok], sent: 1, code: "INVALID_TASK" },
    { name: "safe: a code that wrote nothing", retry: safeOnly("REDIS_UNAVAILABLE"), answers: [unavailable, ok], sent: 2 },
    { name: "safe: OUTCOME_UNKNOWN is not", retry: safeOnly("REDIS_UNAVAILABLE"), answers: [unknown, ok], sent: 1, code: "OUTCOME_UNKNOWN" },
    { name: "null: sent once", retry: null, answers: [unavailable, ok], sent: 1, code: "REDIS_UNAVAILABLE" },
    { name: "retries run out", retry: IDEMPOTENT, retries: 2, answers: [unavailable], sent: 3, code: "REDIS_UNAVAILABLE" },
  ];
  for (const c of cases) {
    await t.test(c.name, async () => {
      const s = await standIn(c.answers);
      const http = new HTTP({ url: s.url, token: "tok", retries: c.retries ?? 6 });
      try {
        const p = http.call("POST", "/x", { body: { a: 1 }, retry: c.retry });
        if (c.code) {
          await assert.rejects(p, (err) => err instanceof APIError && err.code === c.code);
        } else {
          assert.deepEqual((await p).body, { fine: true });
        }
        assert.equal(s.seen.length, c.sent);
        for (const r of s.seen) {
          assert.equal(r.headers.authorization, "Bearer tok");
          assert.deepEqual(r.body, { a: 1 });
        }
      } finally {
        http.close();
        s.close();
      }
    });
  }
});

test("an answer without an error body is HTTP_<status> with its text", async () => {
  const s = await standIn([[418, "short and stout"]]);
  const http = new HTTP({ url: s.url });
  try {
    await assert.rejects(http.call("GET", "/"), (err) => {
      assert.ok(err instanceof APIError);
      assert.equal(err.code, "HTTP_418");
      assert.equal(err.message, "short and stout");
      assert.deepEqual(err.details, {});
      return true;
    });
  } finally {
    http.close();
    s.close();
  }
});

test("Retry-After is read into retryAfter; QUEUE_FULL is a QueueFull", async () => {
  const s = await standIn([[429, envelope("QUEUE_FULL", "full", { queue: "q" }), { "Retry-After": "7" }]]);
  const http = new HTTP({ url: s.url });
  try {
    await assert.rejects(http.call("POST", "/", { retry: null }), (err) => {
      assert.equal(err.name, "QueueFull");
      assert.equal(err.retryAfter, 7);
      assert.equal(err.details.queue, "q");
      assert.equal(err.requestId, "rid");
      return true;
    });
  } finally {
    http.close();
    s.close();
  }
});

test("a request without an answer times out; an aborted one stops at once", async () => {
  const s = await standIn(["hang"]);
  const http = new HTTP({ url: s.url, timeout: 0.1 });
  try {
    await assert.rejects(http.call("GET", "/", { retry: null }), RequestTimeout);
    const ctl = new AbortController();
    const p = http.call("GET", "/", { signal: ctl.signal, timeout: 30 });
    ctl.abort();
    await assert.rejects(p, (err) => err.name === "AbortError");
  } finally {
    http.close();
    s.close();
  }
});

test("a refused connection is an error after the retries", async () => {
  const s = await standIn([[200, {}]]);
  const url = s.url;
  s.close();
  const http = new HTTP({ url, retries: 1 });
  await assert.rejects(http.call("GET", "/"), (err) => err.code === "ECONNREFUSED");
  http.close();
});

test("submit: the key goes in Idempotency-Key; keyed submissions are sent again, unkeyed ones only when nothing was written", async () => {
  const unknown = [503, envelope("OUTCOME_UNKNOWN")];
  const created = [202, { task_id: "a".repeat(32), status: "queued", duplicate: false }];
  const s = await standIn([unknown, created, unknown, [503, envelope("SERVER_BUSY")], created]);
  const p = new Producer({ url: s.url, token: "p" });
  try {
    const t = await p.submit({ task_type: "x" }, { idempotencyKey: "k-1" });
    assert.equal(t.status, "queued");
    assert.equal(s.seen.length, 2);
    assert.equal(s.seen[0].headers["idempotency-key"], "k-1");
    await assert.rejects(p.submit({ task_type: "x" }), (err) => err.code === "OUTCOME_UNKNOWN");
    assert.equal(s.seen.length, 3);
    assert.equal(s.seen[2].headers["idempotency-key"], undefined);
    assert.equal((await p.submit({ task_type: "x" })).status, "queued", "SERVER_BUSY wrote nothing: sent again");
    assert.equal(s.seen.length, 5);
    await assert.rejects(p.submit({ task_type: "x" }, { idempotencyKey: "é" }), TypeError);
    assert.equal(s.seen.length, 5, "a bad key is refused before anything is sent");
  } finally {
    p.close();
    s.close();
  }
});

test("wait long-polls with ?wait= until the task ended", async () => {
  const running = [200, { task_id: "t", status: "running" }];
  const s = await standIn([running, running, [200, { task_id: "t", status: "succeeded", result: 1 }]]);
  const p = new Producer({ url: s.url });
  try {
    assert.equal((await p.wait("t", { timeout: 100 })).result, 1);
    assert.equal(s.seen.length, 3);
    for (const r of s.seen) {
      const w = Number(new URL(r.url, s.url).searchParams.get("wait"));
      assert.ok(w > 0 && w <= 30, r.url);
    }
  } finally {
    p.close();
    s.close();
  }
});

test("a task drops the oldest log lines past its buffer and checks progress values", async () => {
  const task = new Task({ task_id: "t", queue: "q", task_type: "x", attempt: 1, max_attempts: 1, lease_token: "l" }, null);
  task.log("é".repeat(1000));
  task.log("line\n");
  for (let i = 0; i < MAX_LOG_LINES; i++) task.log(i);
  assert.equal(task.droppedLines, 2);
  assert.equal(task.deps && Object.keys(task.deps).length, 0);
  assert.throws(() => task.progress(-1), RangeError);
  assert.throws(() => task.progress(Number.NaN), RangeError);
  assert.throws(() => task.progress([1]), TypeError);
  assert.throws(() => task.progress(null), TypeError);
  task.progress(0);
  task.progress({ ok: true });
  await assert.rejects(task.addNodes([{ ref: "a", task_type: "x" }]), /not a workflow node/);
});
