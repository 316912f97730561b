// The client against hostile or misconfigured servers: local servers that
// answer what a broken proxy or a hostile API might (an HTML page for a 2xx,
// a redirect elsewhere, a huge or dripping answer, wrong-typed claimed
// tasks). No dtq API is needed.

import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";

import { APIError, HTTP, InvalidAnswer, Producer, RequestTimeout, Worker } from "../src/index.js";
import { waitUntil } from "./helpers.mjs";

/**
 * Starts a server answering every request with respond(req, res, body);
 * resolves with its URL, the requests seen and a close function.
 */
async function serve(respond) {
  const seen = [];
  const srv = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      respond(req, res, body);
    });
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    seen,
    close: () => {
      srv.closeAllConnections();
      srv.close();
    },
  };
}

function send(res, status, body, headers = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(text);
}

test("a 2xx answer that is not JSON rejects with InvalidAnswer", async () => {
  const s = await serve((req, res) => send(res, 200, "<!doctype html><p>Welcome to nginx!</p>", { "Content-Type": "text/html" }));
  const p = new Producer({ url: s.url, token: "t" });
  try {
    await assert.rejects(p.get("t"), (err) => {
      assert.ok(err instanceof InvalidAnswer, String(err));
      assert.ok(err instanceof APIError);
      assert.equal(err.code, "INVALID_ANSWER");
      assert.equal(err.status, 200);
      assert.match(err.message, /not JSON.*nginx/);
      return true;
    });
    assert.equal(s.seen.length, 1, "not sent again: the server would answer the same");
  } finally {
    p.close();
    s.close();
  }
});

test("redirects are not followed and the token stays home", async () => {
  const elsewhere = await serve((req, res) => send(res, 200, { task_id: "t", status: "succeeded" }));
  const home = await serve((req, res) => send(res, 302, "", { Location: `${elsewhere.url}/api/v1/tasks/t` }));
  const p = new Producer({ url: home.url, token: "secret" });
  try {
    await assert.rejects(p.get("t"), (err) => {
      assert.equal(err.code, "HTTP_302");
      assert.match(err.message, /redirected to .*127\.0\.0\.1.*not followed/);
      return true;
    });
    assert.equal(home.seen.length, 1);
    assert.equal(home.seen[0].headers.authorization, "Bearer secret");
    assert.equal(elsewhere.seen.length, 0);
  } finally {
    p.close();
    home.close();
    elsewhere.close();
  }
});

test("an answer announcing more than the cap is refused unread, and not sent again", async () => {
  let sent = 0;
  let done = false;
  const s = await serve((req, res) => {
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": String(300 << 20) });
    const chunk = Buffer.alloc(1 << 20, 0x20);
    const more = () => {
      while (sent < 300 << 20) {
        sent += chunk.length;
        if (!res.write(chunk)) {
          res.once("drain", more);
          return;
        }
      }
    };
    res.on("close", () => {
      done = true;
    });
    more();
  });
  const http = new HTTP({ url: s.url });
  try {
    await assert.rejects(http.call("GET", "/x"), (err) => {
      assert.ok(err instanceof InvalidAnswer, String(err));
      assert.match(err.message, /314572800 bytes/);
      return true;
    });
    await waitUntil(() => done, { what: "the server to see the client hang up" });
    assert.ok(sent < 64 << 20, `the server sent ${sent} bytes`);
    assert.equal(s.seen.length, 1);
  } finally {
    http.close();
    s.close();
  }
});

test("a dripping answer ends at the timeout", async () => {
  const timers = new Set();
  const s = await serve((req, res) => {
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "1000" });
    const t = setInterval(() => res.write(" "), 20);
    timers.add(t);
    res.on("close", () => clearInterval(t));
  });
  const http = new HTTP({ url: s.url, timeout: 0.3 });
  try {
    await assert.rejects(http.call("GET", "/x", { retry: null }), RequestTimeout);
  } finally {
    for (const t of timers) clearInterval(t);
    http.close();
    s.close();
  }
});

const leased = (id, over = {}) => ({
  task_id: id,
  queue: "q",
  task_type: "echo",
  attempt: 1,
  max_attempts: 3,
  priority: 5,
  timeout_ms: 30000,
  metadata: null,
  idempotency_key: null,
  cancel_requested: false,
  lease_token: `lease-${id}`,
  lease_expires_at: "2026-12-07T00:00:00.000Z",
  payload: { n: 1 },
  ...over,
});

test("a worker survives wrong-typed claim answers and fails only the tasks it cannot decode", async () => {
  const claims = [
    [200, "<html>502 Bad Gateway</html>"],
    [200, { tasks: 5 }],
    [200, [1, 2]],
    [200, "null"],
    [
      200,
      {
        tasks: [
          leased("t-1"),
          leased("t-typed", { attempt: "1" }),
          "junk",
          { task_id: 7 },
          leased("t-deps", { deps: [] }),
          leased("t-2"),
        ],
      },
    ],
  ];
  const pending = new Set();
  const s = await serve((req, res, body) => {
    if (req.url === "/api/v1/claims") {
      const next = claims.shift();
      if (next) {
        send(res, next[0], next[1]);
        return;
      }
      // An empty long-poll, answered once the test ends or soon.
      const t = setTimeout(() => send(res, 200, { tasks: [] }), 200);
      pending.add(t);
      return;
    }
    send(res, 200, { task_id: req.url.split("/")[4], status: "succeeded", lease_expires_at: "2026-12-07T00:00:30.000Z" });
  });
  const logs = [];
  const worker = new Worker({ url: s.url, token: "w", queues: ["q"], wait: 0, signals: false, log: (m) => logs.push(m) });
  worker.handle("echo", async (task) => ({ echo: task.payload }));
  const outcomes = () => {
    const out = {};
    for (const r of s.seen) {
      const m = /^\/api\/v1\/tasks\/([^/]+)\/(complete|fail)$/.exec(r.url);
      if (m) out[m[1]] = { route: m[2], body: JSON.parse(r.body) };
    }
    return out;
  };
  const run = worker.run();
  let runEnded = false;
  run.then(
    () => {
      runEnded = true;
    },
    () => {
      runEnded = true;
    },
  );
  try {
    await waitUntil(() => runEnded || ["t-1", "t-2", "t-typed", "t-deps"].every((id) => id in outcomes()), {
      what: "the worker to handle the claims",
    });
    assert.equal(runEnded, false, `run() is still running: ${logs.join("\n")}`);
    const got = outcomes();
    assert.equal(got["t-1"].route, "complete");
    assert.deepEqual(got["t-2"].body.result, { echo: { n: 1 } });
    for (const [id, field] of [
      ["t-typed", "attempt"],
      ["t-deps", "deps"],
    ]) {
      assert.equal(got[id].route, "fail", id);
      assert.equal(got[id].body.error.class, "UndecodableTask");
      assert.equal(got[id].body.retryable, false);
      assert.equal(got[id].body.lease_token, `lease-${id}`);
      assert.match(got[id].body.error.message, new RegExp(field));
    }
    assert.ok(logs.filter((m) => m.startsWith("claim failed")).length >= 4, logs.join("\n"));
    assert.equal(logs.filter((m) => m.includes("without an id and lease token")).length, 2, logs.join("\n"));
  } finally {
    await worker.stop();
    await run.catch(() => {});
    worker.close();
    for (const t of pending) clearTimeout(t);
    s.close();
  }
});

test("log lines are sent with the time they were logged", async () => {
  let claimed = false;
  const s = await serve((req, res) => {
    if (req.url === "/api/v1/claims") {
      const tasks = claimed ? [] : [leased("t-log", { task_type: "chatty" })];
      claimed = true;
      setTimeout(() => send(res, 200, { tasks }), claimed && tasks.length === 0 ? 100 : 0);
      return;
    }
    if (req.url.endsWith("/progress")) {
      send(res, 200, { written: true });
      return;
    }
    send(res, 200, { task_id: "t-log", status: "succeeded", lease_expires_at: "2026-12-07T00:00:30.000Z" });
  });
  const window = {};
  const worker = new Worker({ url: s.url, token: "w", queues: ["q"], wait: 0, signals: false });
  worker.handle("chatty", (task) => {
    window.before = Date.now();
    task.log("first\n");
    task.log(2);
    window.after = Date.now();
    return "ok";
  });
  const run = worker.run();
  try {
    await waitUntil(() => s.seen.some((r) => r.url === "/api/v1/tasks/t-log/complete"), { what: "the task's complete" });
    const reports = s.seen.filter((r) => r.url === "/api/v1/tasks/t-log/progress").map((r) => JSON.parse(r.body));
    const lines = reports.flatMap((b) => b.logs ?? []);
    assert.deepEqual(
      lines.map((l) => l.line),
      ["first", "2"],
    );
    for (const l of lines) {
      assert.match(l.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const ts = Date.parse(l.ts);
      assert.ok(ts >= window.before && ts <= window.after, `${l.ts} is within the log calls`);
    }
  } finally {
    await worker.stop();
    await run.catch(() => {});
    worker.close();
    s.close();
  }
});
