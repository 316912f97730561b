#!/usr/bin/env node
// Submits a "resize" task to the queue "images" (DTQ_QUEUE overrides it)
// and waits for its result; see examples/worker.mjs.
//
//   DTQ_URL=http://127.0.0.1:8080 DTQ_TOKEN=p-secret node examples/producer.mjs

import { randomUUID } from "node:crypto";

import { Producer } from "../src/index.js";

const producer = new Producer({ url: process.env.DTQ_URL ?? "http://127.0.0.1:8080", token: process.env.DTQ_TOKEN });

// With an idempotency key, a submission sent again (after a lost reply, or a
// crash and restart) maps to the same task.
const task = await producer.submit(
  { task_type: "resize", queue: process.env.DTQ_QUEUE ?? "images", payload: { width: 640, height: 480 } },
  { idempotencyKey: `resize-${randomUUID()}` },
);
console.log("submitted", task.task_id);
const done = await producer.wait(task.task_id, { timeout: 60 });
console.log(done.status, JSON.stringify(done.result));
producer.close();
