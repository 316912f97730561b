"""Tests of the dtq Python client against a live `dtq api`.

The Go test cmd/dtq/internal/cli TestPythonClient starts Redis and `dtq api`
and runs these with DTQ_URL and the DTQ_*_TOKEN keys set; run them by hand the
same way against your own API:

    DTQ_URL=http://127.0.0.1:8080 DTQ_WORKER_TOKEN=... DTQ_PRODUCER_TOKEN=... \\
        DTQ_ADMIN_TOKEN=... python3 -m unittest -v test_dtq
"""

import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
import warnings

import dtq

URL = os.environ.get("DTQ_URL", "")
WORKER = os.environ.get("DTQ_WORKER_TOKEN", "")
PRODUCER = os.environ.get("DTQ_PRODUCER_TOKEN", "")
ADMIN = os.environ.get("DTQ_ADMIN_TOKEN", "")


def fresh_queue(name):
    return "%s-%s" % (name, uuid.uuid4().hex[:8])


def admin(method, path, body=None):
    return dtq._HTTP(URL, ADMIN).call(method, path, body)


def every_line(producer, task_id, attempt=None, limit=100):
    """Every log line of a task, oldest first, following next_cursor
    until a page shorter than limit (an attempt's truncation marker is not
    counted in limit, so a page may hold one more)."""
    lines, cursor = [], None
    while True:
        page = producer.logs(task_id, attempt=attempt, cursor=cursor, limit=limit)
        lines.extend(page["items"])
        if len(page["items"]) < limit:
            return lines
        cursor = page["next_cursor"]


def wait_until(cond, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class Running:
    """A Worker running in a thread for the duration of a with block."""

    def __init__(self, worker):
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self.worker

    def __exit__(self, *exc):
        self.worker.stop()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "worker did not stop"


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (URL and WORKER and PRODUCER and ADMIN):
            raise RuntimeError("set DTQ_URL, DTQ_WORKER_TOKEN, DTQ_PRODUCER_TOKEN and DTQ_ADMIN_TOKEN (see the module docstring)")

    def setUp(self):
        self.producer = dtq.Producer(URL, PRODUCER)

    def test_thousand_tasks_none_lost_none_twice(self):
        q = fresh_queue("bulk")
        n = 1000
        seen = {}
        lock = threading.Lock()

        def handle(task):
            with lock:
                seen[task.id] = seen.get(task.id, 0) + 1
            return {"n": task.payload["n"] * 2}

        ids, sent = [], {}
        for start in range(0, n, 500):
            items = self.producer.submit_batch(
                [{"task_type": "double", "queue": q, "payload": {"n": i}} for i in range(start, start + 500)])
            for it in items:
                self.assertIn(it["http_status"], (200, 202), it)
                ids.append(it["task"]["task_id"])
                sent[it["task"]["task_id"]] = it["task"]["payload"]["n"]
        self.assertEqual(len(set(ids)), n)
        w = dtq.Worker(URL, WORKER, [q], concurrency=10, wait=1).handle("double", handle)
        began = time.monotonic()
        with Running(w):
            wait_until(lambda: w.processed >= n, timeout=120, what="1000 tasks")
        took = time.monotonic() - began
        print("\nHTTP worker (python, max 10): %d tasks in %.2fs = %.0f tasks/s" % (n, took, n / took))
        self.assertEqual(set(seen), set(ids), "every task ran")
        self.assertEqual([i for i, c in seen.items() if c != 1], [], "no task ran twice")
        for i in ids[:: n // 50]:
            t = self.producer.get(i)
            self.assertEqual(t["status"], "succeeded")
            self.assertEqual(t["attempt"], 1)
            self.assertEqual(t["result"]["n"], sent[i] * 2)
            self.assertTrue(t["payload_dropped"], "a succeeded task keeps no payload by default")

    def test_stale_token_gets_lease_lost_and_writes_nothing(self):
        q = fresh_queue("stale")
        t = self.producer.submit({"task_type": "job", "payload": {"x": 1}, "queue": q})
        http = dtq._HTTP(URL, WORKER)
        first = http.call("POST", "/api/v1/claims", {"worker_id": "py-stale-1", "queues": [q], "lease": "5s"})["tasks"]
        self.assertEqual(len(first), 1)
        # No heartbeat: the lease runs out, the API reclaims the task and a
        # second claim gets attempt 2.
        again = []
        deadline = time.monotonic() + 30
        while not again and time.monotonic() < deadline:
            again = http.call("POST", "/api/v1/claims", {"worker_id": "py-stale-2", "queues": [q], "wait": "5s"},
                              timeout=20)["tasks"]
        self.assertEqual(len(again), 1)
        self.assertEqual(again[0]["attempt"], 2)
        before = self.producer.get(t["task_id"])
        for route, body in (("heartbeat", {}), ("complete", {"result": "stale"}),
                            ("fail", {"error": {"class": "Stale", "message": "x"}, "retryable": False})):
            body["lease_token"] = first[0]["lease_token"]
            with self.assertRaises(dtq.LeaseLost) as cm:
                http.call("POST", "/api/v1/tasks/%s/%s" % (t["task_id"], route), body)
            self.assertEqual(cm.exception.status, 409)
        self.assertEqual(self.producer.get(t["task_id"]), before, "a stale token wrote nothing")
        done = http.call("POST", "/api/v1/tasks/%s/complete" % t["task_id"],
                         {"lease_token": again[0]["lease_token"], "result": "fresh"})
        self.assertEqual(done["status"], "succeeded")
        # Sent again after success (a lost reply): 200 again.
        done = http.call("POST", "/api/v1/tasks/%s/complete" % t["task_id"],
                         {"lease_token": again[0]["lease_token"], "result": "fresh"})
        self.assertEqual(done["status"], "succeeded")
        self.assertEqual(done["result"], "fresh")

    def test_cancel_seen_on_next_heartbeat(self):
        q = fresh_queue("cancel")
        started = threading.Event()

        def slow(task):
            started.set()
            if not task.cancelled.wait(30):
                return "not cancelled"
            raise RuntimeError("stopped on request")

        t = self.producer.submit({"task_type": "slow", "queue": q})
        w = dtq.Worker(URL, WORKER, [q], lease=6, wait=1).handle("slow", slow)
        with Running(w):
            self.assertTrue(started.wait(20))
            admin("POST", "/api/v1/tasks/%s/cancel" % t["task_id"], {"reason": "test"})
            final = self.producer.wait(t["task_id"], timeout=30)
        self.assertEqual(final["status"], "cancelled")

    def test_retry_then_success(self):
        q = fresh_queue("retry")
        calls = []

        def flaky(task):
            calls.append(task.attempt)
            if task.attempt == 1:
                raise dtq.RetryAfter(0.05, "try again")
            return "ok"

        t = self.producer.submit({"task_type": "flaky", "queue": q, "max_attempts": 3})
        with Running(dtq.Worker(URL, WORKER, [q], wait=1).handle("flaky", flaky)):
            final = self.producer.wait(t["task_id"], timeout=30)
        self.assertEqual(final["status"], "succeeded")
        self.assertEqual(calls, [1, 2])

    def test_two_node_workflow(self):
        q = fresh_queue("wf")
        seen = {}

        def fetch(task):
            return {"bytes": task.payload["size"]}

        def resize(task):
            seen["deps"] = task.deps
            seen["ref"] = task.ref
            seen["workflow_id"] = task.workflow_id
            return {"half": task.deps["fetch"]["result"]["bytes"] // 2}

        w = self.producer.submit_workflow({"nodes": [
            {"ref": "fetch", "queue": q, "task_type": "fetch", "payload": {"size": 84}},
            {"ref": "resize", "queue": q, "task_type": "resize", "deps": ["fetch"]},
        ], "name": "py-pair"}, idempotency_key=fresh_queue("py-pair"))
        self.assertEqual(w["status"], "running")
        self.assertEqual([n["status"] for n in w["nodes"]], ["queued", "waiting"])
        worker = dtq.Worker(URL, WORKER, [q], wait=1).handle("fetch", fetch).handle("resize", resize)
        with Running(worker):
            final = self.producer.wait_workflow(w["workflow_id"], timeout=60)
        self.assertEqual(final["status"], "succeeded")
        self.assertEqual(final["counts"], {"succeeded": 2})
        self.assertEqual(seen["ref"], "resize")
        self.assertEqual(seen["workflow_id"], w["workflow_id"])
        self.assertEqual(seen["deps"], {"fetch": {"status": "succeeded", "result": {"bytes": 84}}})
        resized = self.producer.get(final["nodes"][1]["task_id"])
        self.assertEqual(resized["result"], {"half": 42})

    def test_progress_and_logs(self):
        q = fresh_queue("progress")

        def work(task):
            task.progress(10)
            for i in range(3):
                task.log("step %d" % i)
            task.log("é" * 1000)  # 2000 bytes: cut to 1 KiB
            with self.assertRaises(ValueError):
                task.progress(101)
            task.progress({"done": 2, "of": 2})
            return "ok"

        t = self.producer.submit({"task_type": "report", "queue": q})
        with Running(dtq.Worker(URL, WORKER, [q], wait=1).handle("report", work)):
            final = self.producer.wait(t["task_id"], timeout=30)
        self.assertEqual(final["status"], "succeeded")
        self.assertEqual(final["progress"], {"done": 2, "of": 2}, "the last value wins; sent before complete")
        self.assertEqual(final["log_attempts"], 1)
        page = dtq._HTTP(URL, PRODUCER).call("GET", "/api/v1/tasks/%s/logs" % t["task_id"])
        lines = [it["line"] for it in page["items"]]
        self.assertEqual(lines[:3], ["step 0", "step 1", "step 2"], "each line once, in order")
        self.assertEqual(len(lines), 4)
        self.assertEqual(lines[3], "é" * 512)
        self.assertTrue(page["next_cursor"])

    def test_add_nodes_from_a_running_node(self):
        q = fresh_queue("fanout")
        added, again, ran = {}, {}, []
        lock = threading.Lock()
        kids = [{"ref": "part-%d" % i, "queue": q, "task_type": "part", "payload": {"i": i}, "deps": ["split"]}
                for i in range(3)]
        kids.append({"ref": "join", "queue": q, "task_type": "join", "deps": ["part-0", "part-1", "part-2"]})

        def split(task):
            added["nodes"] = task.add_nodes(kids)
            # A handler run again (after a retry) adds them again: no change.
            again["nodes"] = task.add_nodes(kids)
            with self.assertRaises(dtq.APIError) as cm:
                task.add_nodes([dict(kids[0], payload={"i": 99})])
            again["mismatch"] = (cm.exception.status, cm.exception.code)
            return "split"

        def part(task):
            with lock:
                ran.append(task.ref)
            return task.payload["i"] * 10

        def join(task):
            with lock:
                ran.append(task.ref)
            return sum(d["result"] for d in task.deps.values())

        w = self.producer.submit_workflow({"nodes": [{"ref": "split", "queue": q, "task_type": "split"}], "name": "py-fanout"})
        worker = dtq.Worker(URL, WORKER, [q], wait=1).handle("split", split).handle("part", part).handle("join", join)
        with Running(worker):
            final = self.producer.wait_workflow(w["workflow_id"], timeout=60)
        self.assertEqual(final["status"], "succeeded")
        self.assertEqual(final["counts"], {"succeeded": 5})
        self.assertEqual([n["ref"] for n in added["nodes"]], ["part-0", "part-1", "part-2", "join"])
        self.assertEqual([n["status"] for n in added["nodes"]], ["waiting"] * 4, "the adding node still runs")
        self.assertEqual([n["task_id"] for n in again["nodes"]], [n["task_id"] for n in added["nodes"]])
        self.assertEqual(again["mismatch"], (422, "IDEMPOTENCY_KEY_MISMATCH"))
        self.assertEqual(sorted(ran[:3]), ["part-0", "part-1", "part-2"])
        self.assertEqual(ran[3:], ["join"], "the join runs after its deps")
        join_task = self.producer.get(added["nodes"][3]["task_id"])
        self.assertEqual(join_task["result"], 30)

    def test_add_nodes_refused(self):
        q = fresh_queue("fanout-refused")
        seen = {}

        def plain(task):
            # Not a workflow node: refused whatever its state.
            with self.assertRaises(dtq.APIError) as cm:
                task.add_nodes([{"ref": "x", "queue": q, "task_type": "plain"}])
            seen["plain"] = (cm.exception.status, cm.exception.code)
            # A lease that is not this attempt's: LeaseLost, and the task knows.
            task.lease_token = task.lease_token[:-4] + ("AAAA" if not task.lease_token.endswith("AAAA") else "BBBB")
            with self.assertRaises(dtq.LeaseLost):
                task.add_nodes([{"ref": "x", "queue": q, "task_type": "plain"}])
            seen["lost"] = task.lost.is_set() and task.cancelled.is_set()
            return "ok"

        t = self.producer.submit({"task_type": "plain", "queue": q})
        with Running(dtq.Worker(URL, WORKER, [q], wait=1).handle("plain", plain)):
            wait_until(lambda: "lost" in seen, what="the handler")
            with self.assertRaises(ValueError):
                dtq.Task({"task_id": "x", "queue": q, "task_type": "t", "attempt": 1, "max_attempts": 1,
                          "lease_token": "x"}, dtq._HTTP(URL, WORKER)).add_nodes([])
        self.assertEqual(seen["plain"], (400, "INVALID_WORKFLOW"))
        self.assertTrue(seen["lost"])
        # Its result was discarded (the lease was thought lost): the task is
        # still running until its real lease runs out; cancel it.
        self.assertEqual(self.producer.get(t["task_id"])["status"], "running")
        dtq.Producer(URL, ADMIN).cancel(t["task_id"])

    def test_cancel_queued_and_running(self):
        q = fresh_queue("cancel-api")
        ops = dtq.Producer(URL, ADMIN)
        queued = self.producer.submit({"task_type": "never", "queue": q})
        ans = ops.cancel(queued["task_id"], reason="not needed")
        self.assertEqual((ans["task"]["status"], ans["cancel_requested"]), ("cancelled", False))
        self.assertEqual(ops.cancel(queued["task_id"])["task"]["status"], "cancelled", "again: no error")
        with self.assertRaises(dtq.APIError) as cm:
            self.producer.cancel(queued["task_id"])
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "FORBIDDEN"), "a producer key may not")

        started = threading.Event()

        def hold(task):
            started.set()
            if not task.cancelled.wait(30):
                return "not cancelled"
            raise RuntimeError("stopped")

        running = self.producer.submit({"task_type": "hold", "queue": q})
        quick = self.producer.submit({"task_type": "quick", "queue": q})
        w = dtq.Worker(URL, WORKER, [q], lease=6, wait=1).handle("hold", hold).handle("quick", lambda task: "done")
        with Running(w):
            self.assertTrue(started.wait(20))
            ans = ops.cancel(running["task_id"])
            self.assertEqual((ans["task"]["status"], ans["cancel_requested"]), ("running", True))
            final = self.producer.wait(running["task_id"], timeout=30)
            self.assertEqual(self.producer.wait(quick["task_id"], timeout=30)["status"], "succeeded")
        self.assertEqual(final["status"], "cancelled")
        with self.assertRaises(dtq.APIError) as cm:
            ops.cancel(quick["task_id"])
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "TASK_TERMINAL"))

    def test_cancel_workflow(self):
        q = fresh_queue("cancel-wf")
        w = self.producer.submit_workflow({"nodes": [
            {"ref": "a", "queue": q, "task_type": "a"},
            {"ref": "b", "queue": q, "task_type": "b", "deps": ["a"]},
        ]})
        got = self.producer.cancel_workflow(w["workflow_id"])
        self.assertEqual(got["workflow_id"], w["workflow_id"])
        self.assertTrue(got["status"] == "cancelled" or got["cancel_requested"], got)
        final = self.producer.wait_workflow(w["workflow_id"], timeout=30)
        self.assertEqual(final["status"], "cancelled")
        self.assertEqual(self.producer.cancel_workflow(w["workflow_id"])["status"], "cancelled", "again: no error")

    def test_logs_paging(self):
        q = fresh_queue("logs")
        n = 25

        def work(task):
            for i in range(n):
                task.log("line %02d" % i)
            if task.attempt == 1:
                raise dtq.RetryAfter(0.05, "again")
            task.log("second attempt")
            return "ok"

        t = self.producer.submit({"task_type": "chatty", "queue": q, "max_attempts": 2})
        with Running(dtq.Worker(URL, WORKER, [q], wait=1).handle("chatty", work)):
            final = self.producer.wait(t["task_id"], timeout=30)
        self.assertEqual(final["status"], "succeeded")
        want = ["line %02d" % i for i in range(n)]
        for size in (1, 7, 25, 1000):
            items = every_line(self.producer, t["task_id"], limit=size)
            self.assertEqual([it["line"] for it in items], want + want + ["second attempt"], "page size %d" % size)
            self.assertEqual([it["attempt"] for it in items], [1] * n + [2] * (n + 1))
        self.assertEqual([it["line"] for it in every_line(self.producer, t["task_id"], attempt=2, limit=10)],
                         want + ["second attempt"])
        page = self.producer.logs(t["task_id"], limit=2)
        self.assertEqual([it["line"] for it in page["items"]], want[:2], "a page, as the TypeScript client's")
        self.assertTrue(page["next_cursor"])
        self.assertEqual(self.producer.logs(t["task_id"], attempt=3)["items"], [])
        with self.assertRaises(ValueError):
            self.producer.logs(t["task_id"], limit=0)

    def test_on_answer_sees_every_status(self):
        q = fresh_queue("answers")
        seen = []
        p = dtq.Producer(URL, PRODUCER)
        p._http.on_answer = lambda method, path, status, body: seen.append((method, path, status, body.get("code")))
        key = "answers-" + q
        t = p.submit({"task_type": "t", "queue": q}, idempotency_key=key)
        with self.assertRaises(dtq.APIError) as cm:
            p.submit({"task_type": "t", "queue": q}, idempotency_key=key)
        self.assertEqual(cm.exception.details["task_id"], t["task_id"])
        self.assertEqual(seen, [("POST", "/api/v1/tasks", 202, None),
                                ("POST", "/api/v1/tasks", 409, "IDEMPOTENCY_IN_PROGRESS")])
        dtq.Producer(URL, ADMIN).cancel(t["task_id"])

    def test_requests_are_sent_as_given(self):
        sent = []

        class Capture(dtq._HTTP):
            def call(self, method, path, body=None, timeout=None, retry=True, headers=None):
                sent.append(dict(method=method, path=path, body=body, retry=retry, headers=headers or {}))
                return {"task_id": "x", "status": "queued", "items": []}

        p = dtq.Producer(URL, PRODUCER)
        p._http = Capture(URL, PRODUCER)
        req = {"task_type": "t", "payload": {"u": 7}, "queue": "q", "delay_ms": 500,
               "dedup": {"key": "user-7", "mode": "drop", "ttl": "10m"}}
        p.submit(req)
        self.assertEqual(sent[-1]["body"], req)
        self.assertFalse(sent[-1]["retry"], "an unkeyed submission is not sent again")
        p.submit({"task_type": "t"}, idempotency_key="k-1")
        self.assertEqual((sent[-1]["body"], sent[-1]["headers"], sent[-1]["retry"]),
                         ({"task_type": "t"}, {"Idempotency-Key": "k-1"}, True))
        p.submit({"task_type": "t", "idempotency_key": "k-2"})
        self.assertTrue(sent[-1]["retry"], "a request's own key makes it safe to send again")
        for bad in ({}, {"task_type": ""}, ["t"], {"task_type": "t"}):
            with self.assertRaises(TypeError, msg=repr(bad)):
                if bad == {"task_type": "t"}:
                    p.submit(bad, "payload")  # the older spelling's arguments after a request
                else:
                    p.submit(bad)
        with self.assertRaises(TypeError):
            p.submit({"task_type": "t"}, idempotency_key="\n")
        wf = {"nodes": [{"ref": "a", "task_type": "a"}], "name": "n"}
        p.submit_workflow(wf, idempotency_key="w-1")
        self.assertEqual((sent[-1]["path"], sent[-1]["body"], sent[-1]["headers"]),
                         ("/api/v1/workflows", wf, {"Idempotency-Key": "w-1"}))
        p.submit_batch([{"task_type": "t"}])
        self.assertEqual((sent[-1]["path"], sent[-1]["body"]), ("/api/v1/tasks/batch", {"tasks": [{"task_type": "t"}]}))

    def test_older_spellings_warn_and_send_the_same(self):
        sent = []

        class Capture(dtq._HTTP):
            def call(self, method, path, body=None, timeout=None, retry=True, headers=None):
                sent.append((path, body))
                return {"task_id": "x", "status": "queued", "items": []}

        p = dtq.Producer(URL, PRODUCER)
        p._http = Capture(URL, PRODUCER)
        for old, new in [
            (lambda: p.submit("t", {"u": 7}, queue="q", priority=3, dedup={"key": "k", "mode": "drop"}),
             lambda: p.submit({"task_type": "t", "payload": {"u": 7}, "queue": "q", "priority": 3,
                               "dedup": {"key": "k", "mode": "drop"}})),
            (lambda: p.submit("t", None, "q", "key-1"),
             lambda: p.submit({"task_type": "t", "queue": "q", "idempotency_key": "key-1"})),
            (lambda: p.submit_workflow([{"ref": "a", "task_type": "a"}], name="n"),
             lambda: p.submit_workflow({"nodes": [{"ref": "a", "task_type": "a"}], "name": "n"})),
            (lambda: p.submit_many([{"task_type": "t"}]), lambda: p.submit_batch([{"task_type": "t"}])),
        ]:
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                old()
            self.assertEqual([w.category for w in got], [DeprecationWarning])
            self.assertEqual(got[0].filename, __file__, "the warning points at the caller")
            new()
            self.assertEqual(sent[-2], sent[-1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaises(TypeError):
                p.submit("t", dedup="user-7")

    def test_log_lines_carry_their_time(self):
        sent = []

        class Capture(dtq._HTTP):
            def call(self, method, path, body=None, timeout=None, retry=True, headers=None):
                sent.append(body)
                return {"written": True}

        w = dtq.Worker(URL, WORKER, ["q"])
        w._http = Capture(URL, WORKER)
        task = dtq.Task({"task_id": "t", "lease_token": "l", "queue": "q", "task_type": "x", "attempt": 1,
                         "max_attempts": 1}, w._http)
        before = time.time()
        task.log("first\n")
        task.log(2)
        after = time.time()
        self.assertTrue(w._report(task))
        self.assertEqual([e["line"] for e in sent[0]["logs"]], ["first", "2"])
        for e in sent[0]["logs"]:
            self.assertRegex(e["ts"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            ts = datetime.datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                tzinfo=datetime.timezone.utc).timestamp()
            self.assertTrue(int(before * 1000) / 1000 <= ts <= after, (before, e["ts"], after))

    def test_dedup_against_the_api(self):
        q = fresh_queue("dedup")
        first = self.producer.submit({"task_type": "doc", "payload": {"doc": 1}, "queue": q, "dedup": {"key": "doc-1", "mode": "drop"}})
        self.assertEqual(first["dedup_key"], "doc-1")
        self.assertNotIn("deduplicated", first)
        second = self.producer.submit({"task_type": "doc", "payload": {"doc": 1, "rev": 2}, "queue": q, "dedup": {"key": "doc-1", "mode": "drop"}})
        self.assertEqual(second["deduplicated"], "drop")
        self.assertEqual(second["task_id"], first["task_id"])
        r1 = self.producer.submit({"task_type": "doc", "payload": {"doc": 2}, "queue": q, "dedup": {"by": ["payload.doc"], "mode": "replace"}})
        r2 = self.producer.submit({"task_type": "doc", "payload": {"doc": 2}, "queue": q, "dedup": {"by": ["payload.doc"], "mode": "replace"}})
        self.assertEqual(r2["replaced_task_id"], r1["task_id"])
        self.assertEqual(self.producer.get(r1["task_id"])["status"], "cancelled")
        with self.assertRaises(dtq.APIError) as bad:
            self.producer.submit({"task_type": "doc", "queue": q, "dedup": {"key": "k", "mode": "throttle"}})
        self.assertEqual(bad.exception.status, 400)
        self.assertEqual(bad.exception.details.get("field"), "dedup.ttl")

    def test_permanent_failure_dead_letters(self):
        q = fresh_queue("perm")

        def bad(task):
            raise dtq.Permanent("cannot do this")

        t = self.producer.submit({"task_type": "bad", "queue": q, "max_attempts": 5})
        with Running(dtq.Worker(URL, WORKER, [q], wait=1).handle("bad", bad)):
            final = self.producer.wait(t["task_id"], timeout=30)
        self.assertEqual(final["status"], "dead_lettered")
        self.assertEqual(final["attempt"], 1)
        self.assertEqual(final["execution"]["error_class"], "Permanent")

    def test_roles(self):
        q = fresh_queue("roles")
        with self.assertRaises(dtq.APIError) as cm:
            dtq.Producer(URL, WORKER).submit({"task_type": "x", "queue": q})
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "FORBIDDEN"))
        with self.assertRaises(dtq.APIError) as cm:
            dtq._HTTP(URL, PRODUCER).call("POST", "/api/v1/claims", {"worker_id": "p", "queues": [q]})
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "FORBIDDEN"))

    def test_http_worker_listed(self):
        q = fresh_queue("listed")
        started, release = threading.Event(), threading.Event()

        def hold(task):
            started.set()
            release.wait(30)

        t = self.producer.submit({"task_type": "hold", "queue": q})
        w = dtq.Worker(URL, WORKER, [q], worker_id="py-listed-" + q, wait=1).handle("hold", hold)
        with Running(w):
            self.assertTrue(started.wait(20))
            rec = dtq._HTTP(URL, WORKER).call("GET", "/api/v1/workers/" + w.worker_id)
            release.set()
        self.assertEqual(rec["kind"], "http")
        self.assertEqual(rec["in_flight"], [t["task_id"]])
        self.assertTrue(rec["live"])
        self.assertIn("last_claim", rec)

    def test_example_worker_stops_gracefully_on_sigterm(self):
        here = os.path.dirname(os.path.abspath(__file__))
        example = os.path.join(here, "..", "..", "examples", "python", "resize_worker.py")
        env = dict(os.environ, DTQ_URL=URL, DTQ_TOKEN=WORKER)
        proc = subprocess.Popen([sys.executable, example], env=env, stderr=subprocess.PIPE, text=True)
        try:
            t = self.producer.submit({"task_type": "resize", "payload": {"width": 640, "height": 480}, "queue": "images"})
            self.assertEqual(self.producer.wait(t["task_id"], timeout=30)["result"], {"width": 320, "height": 240})
            # A task in flight when SIGTERM comes is finished, not dropped.
            t = self.producer.submit({"task_type": "resize", "payload": {"width": 10, "height": 10}, "queue": "images"})
            wait_until(lambda: self.producer.get(t["task_id"])["status"] == "running", what="running")
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            self.assertEqual(proc.returncode, 0, err)
            self.assertIn("stopped after 2 tasks", err)
            self.assertEqual(self.producer.get(t["task_id"])["status"], "succeeded")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


# What the installed package runs in its venv: submit a task, serve it with
# a worker that logs a line, and print what came back.
_INSTALLED_USE = r"""
import json, os, sys, threading
import dtq
url, queue = os.environ["DTQ_URL"], os.environ["DTQ_QUEUE"]
w = dtq.Worker(url, os.environ["DTQ_WORKER_TOKEN"], [queue], wait=1)
def double(task):
    task.log("doubling %d" % task.payload["n"])
    return task.payload["n"] * 2
w.handle("double", double)
runner = threading.Thread(target=w.run)
runner.start()
try:
    p = dtq.Producer(url, os.environ["DTQ_PRODUCER_TOKEN"])
    t = p.submit({"task_type": "double", "queue": queue, "payload": {"n": 21}})
    done = p.wait(t["task_id"], timeout=30)
    lines = [it["line"] for it in p.logs(t["task_id"])["items"]]
finally:
    w.stop()
    runner.join()
print(json.dumps({"file": dtq.__file__, "version": dtq.__version__, "status": done["status"],
                  "result": done.get("result"), "lines": lines}))
"""


class PackageTest(unittest.TestCase):
    """The package installs offline into a fresh virtual environment, as
    clients/python/README.md says, and works there against the API."""

    def run_ok(self, args, **kw):
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, **kw)
        self.assertEqual(proc.returncode, 0, "%s:\n%s" % (" ".join(args), proc.stdout))
        return proc.stdout

    def test_installs_offline_into_a_fresh_venv_and_runs(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "v")
            try:
                self.run_ok([sys.executable, "-m", "venv", venv])
            except AssertionError as e:
                raise AssertionError("python3 -m venv is needed to test the package (Debian: apt-get install "
                                     "python3-venv; .ci/run installs it): %s" % e) from None
            py = os.path.join(venv, "bin", "python")
            pip = [py, "-m", "pip", "--disable-pip-version-check", "--no-input"]
            # No setuptools, as in the venvs of Python 3.12 and later: the
            # package's own backend builds it.
            self.run_ok(pip + ["uninstall", "-y", "setuptools"])
            env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
            env["PIP_NO_INDEX"] = "1"  # offline: no package index is asked
            out = self.run_ok(pip + ["install", "--no-build-isolation", "--no-index", here], env=env, cwd=tmp)
            self.assertIn("Successfully installed dtq-client-0.1.0", out)
            env.update(DTQ_URL=URL, DTQ_WORKER_TOKEN=WORKER, DTQ_PRODUCER_TOKEN=PRODUCER,
                       DTQ_QUEUE=fresh_queue("pkg"))
            # Run from the temporary directory, so that dtq can only come
            # from the venv's site-packages, not from this checkout.
            got = json.loads(self.run_ok([py, "-c", _INSTALLED_USE], env=env, cwd=tmp).splitlines()[-1])
            self.assertTrue(got["file"].startswith(os.path.realpath(venv)) or got["file"].startswith(venv), got)
            self.assertEqual((got["version"], got["status"], got["result"], got["lines"]),
                             (dtq.__version__, "succeeded", 42, ["doubling 21"]))
            meta = self.run_ok(pip + ["show", "dtq-client"], env=env)
            self.assertIn("Version: 0.1.0", meta)
            self.assertIn("Requires: \n", meta + "\n", "no dependencies")


if __name__ == "__main__":
    unittest.main()
