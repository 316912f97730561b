#!/usr/bin/env node
// An HTTP worker in TypeScript's runtime (Node >= 20): serves "resize" tasks
// of the queue "images" (DTQ_QUEUE overrides it).
//
// Start an API with a worker key and a producer key:
//
//   DTQ_API_KEYS=worker:ts:w-secret,producer:feed:p-secret dtq api
//
// Then run this worker and, in another shell, the producer example:
//
//   DTQ_URL=http://127.0.0.1:8080 DTQ_TOKEN=w-secret node examples/worker.mjs
//   DTQ_URL=http://127.0.0.1:8080 DTQ_TOKEN=p-secret node examples/producer.mjs
//
// SIGTERM or Ctrl-C stops claiming and waits for running tasks to finish.

import { setTimeout as sleep } from "node:timers/promises";

import { Permanent, Worker } from "../src/index.js";

const worker = new Worker({
  url: process.env.DTQ_URL ?? "http://127.0.0.1:8080",
  token: process.env.DTQ_TOKEN ?? "",
  queues: [process.env.DTQ_QUEUE ?? "images"],
  concurrency: 4,
  log: (msg) => console.error(msg),
});

worker.handle("resize", async (task, signal) => {
  const { width, height } = task.payload;
  if (!(width > 0 && height > 0)) throw new Permanent("width and height must be positive");
  for (let step = 1; step <= 20; step++) {
    // The work, in steps; a cancel request aborts the signal and the sleep.
    await sleep(50, undefined, { signal });
    task.progress(step * 5);
  }
  task.log(`resized ${width}x${height}`);
  return { width: Math.floor(width / 2), height: Math.floor(height / 2) };
});

console.error(`worker ${worker.workerId} serving ${worker.queues.join(", ")}; Ctrl-C stops`);
await worker.run();
console.error(`stopped after ${worker.processed} tasks`);
worker.close();
