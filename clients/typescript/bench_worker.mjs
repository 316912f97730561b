#!/usr/bin/env node
// Throughput of the TypeScript HTTP worker: submits N no-op tasks, then times
// one Worker (claims of up to --max tasks) until all are done.
//
//   DTQ_URL=http://127.0.0.1:8080 node clients/typescript/bench_worker.mjs -n 5000 --max 10

import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";

import { Producer, Worker } from "./src/index.js";

const { values } = parseArgs({
  options: {
    n: { type: "string", short: "n", default: "5000" },
    max: { type: "string", default: "10" },
  },
});
const n = Number(values.n);
const max = Number(values.max);
if (!(Number.isInteger(n) && n > 0) || !(Number.isInteger(max) && max > 0)) {
  console.error("usage: bench_worker.mjs [-n tasks] [--max concurrency]");
  process.exit(2);
}
const url = process.env.DTQ_URL ?? "http://127.0.0.1:8080";
const producer = new Producer({ url, token: process.env.DTQ_PRODUCER_TOKEN });
const q = `bench-${randomBytes(4).toString("hex")}`;
for (let start = 0; start < n; start += 1000) {
  const tasks = [];
  for (let i = start; i < Math.min(start + 1000, n); i++) tasks.push({ task_type: "noop", queue: q, payload: { i } });
  await producer.submitBatch(tasks);
}
const worker = new Worker({ url, token: process.env.DTQ_WORKER_TOKEN, queues: [q], concurrency: max, wait: 1 });
worker.handle("noop", () => null);
const began = performance.now();
const run = worker.run().then(() => {
  // SIGTERM or SIGINT stopped the worker before it was done.
  if (worker.processed < n) {
    console.error(`stopped: ${worker.processed} of ${n} tasks done`);
    process.exit(1);
  }
});
// The worker waits out an API that is away; the bench gives up after 5 minutes.
const deadline = began + 300_000;
while (worker.processed < n) {
  if (performance.now() > deadline) {
    console.error(`gave up: ${worker.processed} of ${n} tasks done after 300 s`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 10));
}
const took = (performance.now() - began) / 1000;
await worker.stop();
await run;
worker.close();
producer.close();
console.log(`typescript HTTP worker, max ${max}: ${n} tasks in ${took.toFixed(2)} s = ${Math.round(n / took)} tasks/s`);
