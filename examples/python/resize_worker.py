#!/usr/bin/env python3
"""An HTTP worker in Python: serves "resize" tasks of the queue "images".

Start an API with a worker key and a producer key:

    DTQ_API_KEYS=worker:py:w-secret,producer:feed:p-secret dtq api

Then run this worker and, in another shell, submit a task:

    DTQ_URL=http://127.0.0.1:8080 DTQ_TOKEN=w-secret python3 examples/python/resize_worker.py
    DTQ_URL=http://127.0.0.1:8080 DTQ_TOKEN=p-secret python3 examples/python/resize_worker.py submit

SIGTERM or Ctrl-C stops claiming and waits for running tasks to finish.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

import dtq  # noqa: E402

URL = os.environ.get("DTQ_URL", "http://127.0.0.1:8080")
TOKEN = os.environ.get("DTQ_TOKEN", "")


def resize(task):
    width, height = task.payload["width"], task.payload["height"]
    for _ in range(10):  # the work, in steps that honour a cancel request
        if task.cancelled.is_set():
            raise RuntimeError("cancelled while resizing")
        time.sleep(0.05)
    if width <= 0 or height <= 0:
        raise dtq.Permanent("width and height must be positive")
    return {"width": width // 2, "height": height // 2}


def main():
    if sys.argv[1:] == ["submit"]:
        p = dtq.Producer(URL, TOKEN)
        t = p.submit({"task_type": "resize", "payload": {"width": 640, "height": 480}, "queue": "images"})
        print("submitted", t["task_id"])
        print("result", p.wait(t["task_id"])["result"])
        return
    w = dtq.Worker(URL, TOKEN, ["images"], concurrency=4, log=lambda m: print(m, file=sys.stderr))
    w.handle("resize", resize)
    print("worker", w.worker_id, "serving images; Ctrl-C stops", file=sys.stderr)
    w.run()
    print("stopped after", w.processed, "tasks", file=sys.stderr)


if __name__ == "__main__":
    main()
