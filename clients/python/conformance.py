"""The client conformance scenarios, driven through the Python client.

Every HTTP client of dtq runs the same scenarios against one live `dtq api`
(clients/conformance.md lists them). This program reads DTQ_URL,
DTQ_WORKER_TOKEN, DTQ_PRODUCER_TOKEN, DTQ_ADMIN_TOKEN and
DTQ_CONFORMANCE_CLIENT (python), runs every scenario in order, each on its
own queue conf-<client>-<scenario>, prints one line per scenario,

    CONFORMANCE <scenario> ok
    CONFORMANCE <scenario> FAIL <one-line reason>

and exits 1 if any failed. Run it by hand against your own API:

    DTQ_URL=http://127.0.0.1:8080 DTQ_WORKER_TOKEN=w-secret DTQ_PRODUCER_TOKEN=p-secret \\
        DTQ_ADMIN_TOKEN=a-secret DTQ_CONFORMANCE_CLIENT=python python3 conformance.py

Keys and idempotency keys carry a random run id, so the program may run
again against the same API; tasks it leaves queued are cancelled.
"""

import os
import sys
import threading
import time
import traceback
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dtq  # noqa: E402 (the client beside this file, not an installed one)

URL = os.environ.get("DTQ_URL", "")
WORKER = os.environ.get("DTQ_WORKER_TOKEN", "")
PRODUCER = os.environ.get("DTQ_PRODUCER_TOKEN", "")
ADMIN = os.environ.get("DTQ_ADMIN_TOKEN", "")
CLIENT = os.environ.get("DTQ_CONFORMANCE_CLIENT", "python")

RUN = uuid.uuid4().hex[:8]  # makes this run's idempotency keys its own

# How long one scenario may wait for the API: a bound against a hang, not a
# measure (the machine may be slow).
WAIT = 60.0

SCENARIOS = []


def scenario(fn):
    """Registers fn as the scenario named after it (in definition order)."""
    SCENARIOS.append(fn)
    return fn


class Failed(Exception):
    """A scenario's check that did not hold."""


def check(cond, what):
    if not cond:
        raise Failed(what)


def equal(got, want, what):
    if got != want:
        raise Failed("%s: got %r, want %r" % (what, got, want))


def queue_of(name):
    return "conf-%s-%s" % (CLIENT, name.replace("_", "-"))


def key(name):
    return "conf-%s-%s-%s" % (CLIENT, name, RUN)


def wait_until(cond, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise Failed("timed out waiting for " + what)
        time.sleep(0.02)


class Answers:
    """Records the HTTP status of every answer a client's transport gets
    (through its on_answer hook), by method and path."""

    def __init__(self, http):
        self._lock = threading.Lock()
        self.seen = []
        http.on_answer = self._record

    def _record(self, method, path, status, body):
        with self._lock:
            self.seen.append((method, path.split("?")[0], status, body))

    def of(self, method, path):
        with self._lock:
            return [(s, b) for m, p, s, b in self.seen if m == method and p == path]

    def last(self, method, path):
        got = self.of(method, path)
        check(got, "no answer to %s %s" % (method, path))
        return got[-1]


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
        self.thread.join(timeout=WAIT)
        if not exc[0]:
            check(not self.thread.is_alive(), "the worker did not stop")


def worker(q, **kw):
    kw.setdefault("wait", 1)
    w = dtq.Worker(URL, WORKER, [q], worker_id="conf-%s-%s-%s" % (CLIENT, q, RUN), **kw)
    return w


def producer():
    return dtq.Producer(URL, PRODUCER)


def admin():
    return dtq.Producer(URL, ADMIN)


def expect_api_error(fn, status, code, what):
    try:
        fn()
    except dtq.APIError as e:
        if (e.status, e.code) != (status, code):
            raise Failed("%s: got %s %s (%s), want %s %s" % (what, e.status, e.code, e.message, status, code))
        return e
    raise Failed("%s: no error, want %s %s" % (what, status, code))


@scenario
def submit_created():
    p, q = producer(), queue_of("submit_created")
    answers = Answers(p._http)
    t = p.submit({"task_type": "conf", "payload": {"n": 1}, "queue": q}, idempotency_key=key("submit_created"))
    equal(answers.last("POST", "/api/v1/tasks")[0], 202, "the submission's status")
    check(isinstance(t.get("task_id"), str) and len(t["task_id"]) == 32, "a task id: %r" % t.get("task_id"))
    equal(t.get("duplicate"), False, "duplicate")
    got = p.get(t["task_id"])
    equal(got["status"], "queued", "GET's status")
    equal(got["payload"], {"n": 1}, "GET's payload")
    admin().cancel(t["task_id"])


@scenario
def submit_in_progress():
    p, q = producer(), queue_of("submit_in_progress")
    first = p.submit({"task_type": "conf", "payload": {"n": 2}, "queue": q}, idempotency_key=key("submit_in_progress"))
    e = expect_api_error(lambda: p.submit({"task_type": "conf", "payload": {"n": 2}, "queue": q}, idempotency_key=key("submit_in_progress")),
                         409, "IDEMPOTENCY_IN_PROGRESS", "the same key and body again")
    equal(e.details.get("task_id"), first["task_id"], "the existing task's id in details")
    admin().cancel(first["task_id"])


@scenario
def submit_replay():
    p, q = producer(), queue_of("submit_replay")
    answers = Answers(p._http)
    first = p.submit({"task_type": "conf", "payload": {"n": 3}, "queue": q}, idempotency_key=key("submit_replay"))
    with Running(worker(q).handle("conf", lambda task: {"doubled": task.payload["n"] * 2})):
        done = p.wait(first["task_id"], timeout=WAIT)
    equal(done["status"], "succeeded", "the first task")
    again = p.submit({"task_type": "conf", "payload": {"n": 3}, "queue": q}, idempotency_key=key("submit_replay"))
    equal(answers.last("POST", "/api/v1/tasks")[0], 200, "the replay's status")
    equal(again["task_id"], first["task_id"], "the replay's task id")
    equal(again.get("duplicate"), True, "duplicate")
    equal(again["result"], {"doubled": 6}, "the replay's result")


@scenario
def submit_mismatch():
    p, q = producer(), queue_of("submit_mismatch")
    first = p.submit({"task_type": "conf", "payload": {"n": 4}, "queue": q}, idempotency_key=key("submit_mismatch"))
    e = expect_api_error(lambda: p.submit({"task_type": "conf", "payload": {"n": 5}, "queue": q}, idempotency_key=key("submit_mismatch")),
                         422, "IDEMPOTENCY_KEY_MISMATCH", "the same key, another payload")
    equal(e.details.get("task_id"), first["task_id"], "the existing task's id in details")
    admin().cancel(first["task_id"])


@scenario
def batch_submit():
    p, q = producer(), queue_of("batch_submit")
    existing = p.submit({"task_type": "conf", "payload": {"n": 0}, "queue": q}, idempotency_key=key("batch_submit-0"))
    admin().cancel(existing["task_id"])  # ended: its key now replays it
    items = p.submit_batch([
        {"task_type": "conf", "queue": q, "payload": {"n": 1}, "idempotency_key": key("batch_submit-1")},
        {"task_type": "conf", "queue": q, "payload": {"n": 0}, "idempotency_key": key("batch_submit-0")},
        {"task_type": "conf", "queue": q, "payload": {"n": 2}},
    ])
    equal(len(items), 3, "items")
    equal([it.get("index") for it in items], [0, 1, 2], "indexes, in order")
    equal([it["http_status"] for it in items], [202, 200, 202], "each item's status")
    equal([it.get("duplicate") for it in items], [False, True, False], "duplicate")
    equal(items[1]["task"]["task_id"], existing["task_id"], "the replayed item's task")
    equal([it["task"]["payload"] for it in items], [{"n": 1}, {"n": 0}, {"n": 2}], "payloads, in order")
    check(len({it["task"]["task_id"] for it in items}) == 3, "three tasks")
    for it in (items[0], items[2]):
        admin().cancel(it["task"]["task_id"])


@scenario
def claim_heartbeat_complete():
    p, q = producer(), queue_of("claim_heartbeat_complete")
    t = p.submit({"task_type": "conf", "payload": {"n": 7}, "queue": q})
    w = worker(q, lease=5)
    answers = Answers(w._http)
    beat_path = "/api/v1/tasks/%s/heartbeat" % t["task_id"]

    def handle(task):
        if task.id != t["task_id"]:
            return "left by an earlier run"
        # Hold the task until a heartbeat renewed its lease.
        wait_until(lambda: any(s == 200 for s, _ in answers.of("POST", beat_path)), "a heartbeat")
        return {"n": task.payload["n"], "by": "python"}

    with Running(w.handle("conf", handle)):
        done = p.wait(t["task_id"], timeout=WAIT)
    claimed = [c["task_id"] for s, b in answers.of("POST", "/api/v1/claims") if s == 200 for c in b["tasks"]]
    equal(claimed.count(t["task_id"]), 1, "claims of the task")
    _, beat = answers.of("POST", beat_path)[0]
    check(beat.get("lease_expires_at"), "the heartbeat's lease_expires_at")
    equal(beat.get("cancel_requested"), False, "the heartbeat's cancel_requested")
    equal(answers.last("POST", "/api/v1/tasks/%s/complete" % t["task_id"])[0], 200, "complete's status")
    equal(done["status"], "succeeded", "status")
    equal(done["result"], {"n": 7, "by": "python"}, "result")
    equal(done["attempt"], 1, "attempt")


@scenario
def fail_retry():
    p, q = producer(), queue_of("fail_retry")
    attempts = []

    def flaky(task):
        attempts.append(task.attempt)
        if task.attempt == 1:
            raise dtq.RetryAfter(0.05, "not yet")
        return "second time"

    t = p.submit({"task_type": "conf", "queue": q, "max_attempts": 3})
    with Running(worker(q).handle("conf", flaky)):
        done = p.wait(t["task_id"], timeout=WAIT)
    equal(done["status"], "succeeded", "status")
    equal(done["attempt"], 2, "attempt")
    equal(done["result"], "second time", "result")
    equal(attempts, [1, 2], "the handler's attempts")


@scenario
def fail_permanent():
    p, q = producer(), queue_of("fail_permanent")
    calls = []

    def bad(task):
        calls.append(task.attempt)
        raise dtq.Permanent("cannot be done")

    t = p.submit({"task_type": "conf", "queue": q, "max_attempts": 5})
    with Running(worker(q).handle("conf", bad)):
        done = p.wait(t["task_id"], timeout=WAIT)
    equal(done["status"], "dead_lettered", "status")
    equal(done["attempt"], 1, "attempt")
    equal(calls, [1], "the handler's attempts")
    equal(done["execution"]["error_class"], "Permanent", "error_class")


@scenario
def cancel_on_heartbeat():
    p, q = producer(), queue_of("cancel_on_heartbeat")
    started, told = threading.Event(), threading.Event()

    def hold(task):
        started.set()
        if task.cancelled.wait(WAIT):
            told.set()
            raise RuntimeError("stopped on request")
        return "never told"

    t = p.submit({"task_type": "conf", "queue": q})
    w = worker(q, lease=5)
    answers = Answers(w._http)
    with Running(w.handle("conf", hold)):
        check(started.wait(WAIT), "the handler never started")
        ans = admin().cancel(t["task_id"], reason="conformance")
        equal(ans["cancel_requested"], True, "cancel_requested of the cancel's answer")
        check(told.wait(WAIT), "the handler was never told")
        done = p.wait(t["task_id"], timeout=WAIT)
    beats = [b for s, b in answers.of("POST", "/api/v1/tasks/%s/heartbeat" % t["task_id"]) if s == 200]
    check(any(b.get("cancel_requested") for b in beats), "no heartbeat answered cancel_requested")
    equal(done["status"], "cancelled", "status")


def claim_one(http, q, task_id, worker_id, lease="30s"):
    """Claims task_id from q over the worker routes, waiting for it; a task
    an earlier run left in q is completed on the way."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        got = http.call("POST", "/api/v1/claims", {"worker_id": worker_id, "queues": [q], "wait": "5s",
                                                   "lease": lease}, timeout=20)["tasks"]
        for c in got:
            if c["task_id"] == task_id:
                return c
            http.call("POST", "/api/v1/tasks/%s/complete" % c["task_id"], {"lease_token": c["lease_token"]})
    raise Failed("task %s was never claimed from %s" % (task_id, q))


def expect_lease_lost(fn, what):
    try:
        fn()
    except dtq.LeaseLost as e:
        equal((e.status, e.code), (409, "LEASE_LOST"), what)
        return
    except dtq.APIError as e:
        raise Failed("%s: got %s %s (%s), want LeaseLost" % (what, e.status, e.code, e.message))
    raise Failed("%s: accepted, want LeaseLost" % what)


@scenario
def lease_lost():
    p, q = producer(), queue_of("lease_lost")
    http = dtq._HTTP(URL, WORKER)
    t = p.submit({"task_type": "conf", "payload": {"n": 10}, "queue": q})
    # The first claim's lease runs out unrenewed: the API reclaims the task
    # and the next claim gets attempt 2.
    first = claim_one(http, q, t["task_id"], "conf-%s-lease-1-%s" % (CLIENT, RUN), lease="5s")
    equal((first["task_id"], first["attempt"]), (t["task_id"], 1), "the first claim")
    second = claim_one(http, q, t["task_id"], "conf-%s-lease-2-%s" % (CLIENT, RUN))
    equal((second["task_id"], second["attempt"]), (t["task_id"], 2), "the claim after the lease ran out")
    path = "/api/v1/tasks/%s/complete" % t["task_id"]
    before = p.get(t["task_id"])
    expect_lease_lost(lambda: http.call("POST", path, {"lease_token": first["lease_token"], "result": "stale"}),
                      "complete with the lost lease")
    # A token altered inside its MAC (the part after the dot) is not the claim's.
    token = second["lease_token"]
    i = len(token) - 10
    check("." in token[:i], "a lease token is body.mac")
    forged = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1:]
    expect_lease_lost(lambda: http.call("POST", path, {"lease_token": forged, "result": "forged"}),
                      "complete with a tampered token")
    equal(p.get(t["task_id"]), before, "the task after the refused completes (nothing written)")
    done = http.call("POST", path, {"lease_token": token, "result": "real"})
    equal((done["status"], done["result"], done["attempt"]), ("succeeded", "real", 2), "the real complete")
    expect_lease_lost(lambda: http.call("POST", "/api/v1/tasks/%s/heartbeat" % t["task_id"],
                                        {"lease_token": first["lease_token"]}), "a heartbeat with the lost lease")
    equal(p.get(t["task_id"])["result"], "real", "the result")


@scenario
def workflow_deps():
    p, q = producer(), queue_of("workflow_deps")
    seen = {}

    def a(task):
        return {"value": 21}

    def b(task):
        seen.update(ref=task.ref, workflow_id=task.workflow_id, deps=task.deps)
        return task.deps["a"]["result"]["value"] * 2

    w = p.submit_workflow({"nodes": [
        {"ref": "a", "queue": q, "task_type": "a"},
        {"ref": "b", "queue": q, "task_type": "b", "deps": ["a"]},
    ], "name": "conf-deps"}, idempotency_key=key("workflow_deps"))
    equal([(n["ref"], n["status"]) for n in w["nodes"]], [("a", "queued"), ("b", "waiting")], "nodes at submit")
    with Running(worker(q).handle("a", a).handle("b", b)):
        done = p.wait_workflow(w["workflow_id"], timeout=WAIT)
    equal(done["status"], "succeeded", "the workflow's status")
    equal(seen.get("ref"), "b", "b's ref")
    equal(seen.get("workflow_id"), w["workflow_id"], "b's workflow_id")
    equal(seen.get("deps"), {"a": {"status": "succeeded", "result": {"value": 21}}}, "b's deps")
    equal(p.get(w["nodes"][1]["task_id"])["result"], 42, "b's result")


@scenario
def add_nodes():
    p, q = producer(), queue_of("add_nodes")
    added, ran = {}, []
    lock = threading.Lock()
    kids = [{"ref": "kid-1", "queue": q, "task_type": "kid", "payload": {"n": 1}, "deps": ["root"]},
            {"ref": "kid-2", "queue": q, "task_type": "kid", "payload": {"n": 2}, "deps": ["kid-1"]}]

    def root(task):
        added["nodes"] = task.add_nodes(kids)
        return "root"

    def kid(task):
        with lock:
            ran.append(task.ref)
        return task.payload["n"]

    w = p.submit_workflow({"nodes": [{"ref": "root", "queue": q, "task_type": "root"}], "name": "conf-fanout"})
    with Running(worker(q).handle("root", root).handle("kid", kid)):
        done = p.wait_workflow(w["workflow_id"], timeout=WAIT)
    check("nodes" in added, "add_nodes did not answer")
    equal([n["ref"] for n in added["nodes"]], ["kid-1", "kid-2"], "the added nodes")
    check(all(len(n["task_id"]) == 32 for n in added["nodes"]), "task ids of the added nodes")
    equal(done["status"], "succeeded", "the workflow's status")
    equal(sorted(n["ref"] for n in done["nodes"]), ["kid-1", "kid-2", "root"], "the workflow's nodes")
    equal(done["counts"], {"succeeded": 3}, "counts")
    equal(ran, ["kid-1", "kid-2"], "the added nodes ran, in dependency order")


@scenario
def progress_logs():
    p, q = producer(), queue_of("progress_logs")
    seen = {}

    def report(task):
        task.progress(50)
        task.log("first line")
        task.log("second line")
        # Hold the task until its progress is visible while it runs.
        wait_until(lambda: p.get(task.id).get("progress") == 50, "progress 50 on GET")
        seen["running"] = p.get(task.id)
        return "reported"

    t = p.submit({"task_type": "conf", "queue": q})
    with Running(worker(q).handle("conf", report)):
        done = p.wait(t["task_id"], timeout=WAIT)
    equal(done["status"], "succeeded", "status")
    check("running" in seen, "the handler did not see its progress")
    equal(seen["running"]["status"], "running", "status while reporting")
    check(seen["running"].get("progress_at"), "progress_at")
    equal(done.get("progress"), 50, "progress")
    lines = p.logs(t["task_id"])["items"]
    equal([it["line"] for it in lines], ["first line", "second line"], "the log lines")
    equal([it["attempt"] for it in lines], [1, 1], "their attempt")
    first = p.logs(t["task_id"], attempt=1, limit=1)
    second = p.logs(t["task_id"], attempt=1, cursor=first["next_cursor"], limit=1)
    equal([it["line"] for it in first["items"] + second["items"]], ["first line", "second line"],
          "the lines one a page")


@scenario
def dedup():
    p, q = producer(), queue_of("dedup")
    k = key("dedup")
    first = p.submit({"task_type": "conf", "payload": {"n": 1}, "queue": q, "dedup": {"key": k, "mode": "drop"}})
    equal(first.get("dedup_key"), k, "the first task's dedup_key")
    check("deduplicated" not in first, "the first submission was not collapsed")
    second = p.submit({"task_type": "conf", "payload": {"n": 2}, "queue": q, "dedup": {"key": k, "mode": "drop"}})
    equal(second.get("deduplicated"), "drop", "the second answer's deduplicated")
    equal(second["task_id"], first["task_id"], "the second answer names the key's task")
    r1 = p.submit({"task_type": "conf", "payload": {"n": 3}, "queue": q, "dedup": {"key": k + "-r", "mode": "replace"}})
    r2 = p.submit({"task_type": "conf", "payload": {"n": 4}, "queue": q, "dedup": {"key": k + "-r", "mode": "replace"}})
    equal(r2.get("replaced_task_id"), r1["task_id"], "replaced_task_id")
    equal(p.get(r1["task_id"])["status"], "cancelled", "the replaced task's status")
    try:
        p.submit({"task_type": "conf", "queue": q, "dedup": {"key": k + "-t", "mode": "throttle"}})
    except dtq.APIError as e:
        equal((e.status, e.code, e.details.get("field")), (400, "INVALID_TASK", "dedup.ttl"), "a throttle without ttl")
    else:
        raise Failed("a throttle without ttl was accepted")
    admin().cancel(first["task_id"])
    admin().cancel(r2["task_id"])


def one_line(e):
    if isinstance(e, Failed):
        text = str(e)
    else:
        # Where in this program: the scenario's line, not the client's.
        tb = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__] or \
            traceback.extract_tb(e.__traceback__)
        where = ("%s:%d" % (os.path.basename(tb[-1].filename), tb[-1].lineno)) if tb else ""
        text = "%s: %s (%s)" % (type(e).__name__, e, where)
    return " ".join(text.split())[:500] or type(e).__name__


def main():
    missing = [n for n, v in (("DTQ_URL", URL), ("DTQ_WORKER_TOKEN", WORKER), ("DTQ_PRODUCER_TOKEN", PRODUCER),
                              ("DTQ_ADMIN_TOKEN", ADMIN)) if not v]
    if missing:
        print("conformance.py: set %s (see the module docstring)" % ", ".join(missing), file=sys.stderr)
        return 2
    failed = 0
    for fn in SCENARIOS:
        began = time.monotonic()
        try:
            fn()
        except Exception as e:  # every scenario runs, whatever the one before did
            failed += 1
            print("CONFORMANCE %s FAIL %s" % (fn.__name__, one_line(e)), flush=True)
            traceback.print_exc(file=sys.stderr)
        else:
            print("CONFORMANCE %s ok" % fn.__name__, flush=True)
        print("conformance.py: %s took %.2fs" % (fn.__name__, time.monotonic() - began), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
