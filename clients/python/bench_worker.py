#!/usr/bin/env python3
"""Throughput of the Python HTTP worker: submits N no-op tasks, then times one
Worker (claims of up to --max tasks) until all are done.

    DTQ_URL=http://127.0.0.1:8080 python3 clients/python/bench_worker.py -n 5000 --max 10
"""

import argparse
import os
import threading
import time
import uuid

import dtq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--max", type=int, default=10, help="concurrency, and the most one claim asks for")
    args = ap.parse_args()
    url = os.environ.get("DTQ_URL", "http://127.0.0.1:8080")
    producer = dtq.Producer(url, os.environ.get("DTQ_PRODUCER_TOKEN"))
    q = "bench-%s" % uuid.uuid4().hex[:8]
    for start in range(0, args.n, 1000):
        producer.submit_batch([{"task_type": "noop", "queue": q, "payload": {"i": i}}
                              for i in range(start, min(start + 1000, args.n))])
    w = dtq.Worker(url, os.environ.get("DTQ_WORKER_TOKEN"), [q], concurrency=args.max, wait=1)
    w.handle("noop", lambda task: None)
    th = threading.Thread(target=w.run, daemon=True)
    began = time.monotonic()
    th.start()
    while w.processed < args.n:
        time.sleep(0.01)
    took = time.monotonic() - began
    w.stop()
    th.join()
    print("python HTTP worker, max %d: %d tasks in %.2f s = %.0f tasks/s" % (args.max, args.n, took, args.n / took))


if __name__ == "__main__":
    main()
