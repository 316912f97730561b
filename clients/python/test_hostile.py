"""Tests of the dtq Python client against hostile or misconfigured servers.

Each test starts a local HTTP server (http.server in a thread) that answers
what a broken proxy or a hostile API might: a redirect elsewhere, a huge or
dripping answer, a day's Retry-After, wrong-typed or too deeply nested JSON.
They need no dtq API; the Go test TestPythonClient runs them with the others:

    python3 -m unittest -v test_hostile
"""

import json
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import dtq

# Nested deeper than Python's json decoder follows (its recursion limit).
DEEP = "[" * 100000 + "]" * 100000


def wait_until(cond, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def send(h, status, body, headers=None):
    """Answers with status and body (bytes, str, or a value sent as JSON)."""
    if not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)


class Server:
    """A local HTTP server answering every request with respond(handler,
    body); seen lists (method, path, headers, body) of what it got."""

    def __init__(self, respond):
        self.seen = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                with outer.lock:
                    outer.seen.append((self.command, self.path, dict(self.headers), body))
                try:
                    respond(self, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up: what the test wanted
                self.close_connection = True

            do_GET = do_POST = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def requests(self, method=None, prefix=""):
        with self.lock:
            return [r for r in self.seen if (method is None or r[0] == method) and r[1].startswith(prefix)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class HostileServerTest(unittest.TestCase):
    def serve(self, respond):
        s = Server(respond)
        self.addCleanup(s.close)
        return s

    def test_redirects_are_not_followed_and_the_token_stays_home(self):
        elsewhere = self.serve(lambda h, _: send(h, 200, {"task_id": "t", "status": "succeeded"}))
        for status, target in [(302, elsewhere.url), (307, "")]:
            with self.subTest(status=status, cross_origin=bool(target)):
                home = self.serve(lambda h, _, s=status, t=target: send(
                    h, s, "", {"Location": (t or "") + "/api/v1/tasks/t"}))
                p = dtq.Producer(home.url, "secret", retries=0)
                with self.assertRaises(dtq.APIError) as c:
                    p.get("t")
                self.assertEqual(c.exception.code, "HTTP_%d" % status)
                self.assertIn("redirect", c.exception.message)
                self.assertEqual(len(home.requests()), 1, "a redirect is not followed")
                self.assertEqual(home.requests()[0][2].get("Authorization"), "Bearer secret")
        self.assertEqual(elsewhere.requests(), [], "nothing, the token least of all, went to the other origin")

    def test_an_oversized_answer_is_refused_without_reading_it(self):
        size = 300 << 20
        for announced in (True, False):
            with self.subTest(content_length=announced):
                sent = {"bytes": 0, "done": False}

                def huge(h, _, announced=announced, sent=sent):
                    try:
                        h.send_response(200)
                        h.send_header("Content-Type", "application/json")
                        if announced:
                            h.send_header("Content-Length", str(size))
                        else:
                            h.send_header("Connection", "close")  # the body ends when the connection does
                        h.end_headers()
                        chunk = b"[" + b" " * ((1 << 20) - 1)
                        while sent["bytes"] < size:
                            h.wfile.write(chunk)
                            sent["bytes"] += len(chunk)
                    finally:
                        sent["done"] = True

                s = self.serve(huge)
                http = dtq._HTTP(s.url, "t", retries=0)
                if not announced:
                    http.max_body = 1 << 20  # the streamed case, at a cap a test can afford
                with self.assertRaises(dtq.InvalidAnswer) as c:
                    http.call("GET", "/api/v1/tasks/t")
                self.assertIn("bytes", str(c.exception))
                wait_until(lambda: sent["done"], what="the server to see the client hang up")
                self.assertLess(sent["bytes"], 64 << 20, "the client stopped reading long before 300 MB")

    def test_a_dripping_answer_ends_at_the_deadline(self):
        stop = threading.Event()
        self.addCleanup(stop.set)

        def drip_head(h, _):
            h.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for _ in range(400):  # 20 s, a byte at a time
                if stop.wait(0.05):
                    return
                h.wfile.write(b"X")
                h.wfile.flush()

        def drip_body(h, _):
            h.send_response(200)
            h.send_header("Content-Length", "1000")
            h.end_headers()
            for _ in range(400):
                if stop.wait(0.05):
                    return
                h.wfile.write(b" ")
                h.wfile.flush()

        for name, respond in [("head", drip_head), ("body", drip_body)]:
            with self.subTest(dripped=name):
                s = self.serve(respond)
                with self.assertRaises(dtq.RequestTimeout):
                    dtq._HTTP(s.url, "t", retries=0, timeout=0.5).call("GET", "/x")

    def test_retry_after_is_capped(self):
        s = self.serve(lambda h, _: send(h, 503, {"code": "SERVER_BUSY", "message": "busy"}, {"Retry-After": "86400"})
                       if len(s.requests()) == 1 else send(h, 200, {"ok": True}))
        waits = []
        with mock.patch.object(dtq.time, "sleep", waits.append):
            self.assertEqual(dtq._HTTP(s.url, "t").call("GET", "/x"), {"ok": True})
        self.assertEqual(len(waits), 1)
        self.assertLessEqual(waits[0], dtq.MAX_RETRY_AFTER_S)
        self.assertEqual(waits[0], 60.0, "a day's Retry-After is waited for a minute")

    def test_error_bodies_that_are_not_objects_are_api_errors(self):
        for body in ["[1, 2]", '"oops"', "42", "null", '{"code": 5}', "<html>bad gateway</html>", DEEP]:
            with self.subTest(body=body[:20]):
                s = self.serve(lambda h, _, b=body: send(h, 400, b))
                with self.assertRaises(dtq.APIError) as c:
                    dtq._HTTP(s.url, "t").call("GET", "/x")
                self.assertEqual(c.exception.code, "HTTP_400")
                self.assertEqual(c.exception.message, body[:200])
                self.assertEqual(c.exception.details, {})

    def test_a_2xx_answer_that_is_not_json_is_an_invalid_answer(self):
        s = self.serve(lambda h, _: send(h, 200, "<!doctype html><p>Welcome to nginx!</p>"))
        with self.assertRaises(dtq.InvalidAnswer) as c:
            dtq.Producer(s.url, "t").get("t")
        self.assertIn("not JSON", str(c.exception))
        self.assertIn("nginx", str(c.exception))

    def test_get_and_wait_of_a_result_nested_too_deep(self):
        s = self.serve(lambda h, _: send(h, 200, '{"task_id": "t", "status": "succeeded", "result": %s}' % DEEP))
        p = dtq.Producer(s.url, "t")
        for call in (lambda: p.get("t"), lambda: p.wait("t", timeout=5)):
            with self.assertRaises(dtq.InvalidAnswer) as c:
                call()
            self.assertIn("deeper", str(c.exception))

    def test_wrong_typed_answers_to_producer_calls(self):
        s = self.serve(lambda h, _: send(h, 200, {"status": 7, "items": "x", "workflow": []}))
        p = dtq.Producer(s.url, "t")
        for call in (lambda: p.wait("t", timeout=5), lambda: p.logs("t"), lambda: p.cancel_workflow("w"),
                     lambda: p.submit_batch([{"task_type": "x"}])):
            with self.assertRaises(dtq.InvalidAnswer):
                call()


def leased(task_id, **over):
    t = {"task_id": task_id, "queue": "q", "task_type": "echo", "attempt": 1, "max_attempts": 3,
         "lease_token": "lease-" + task_id, "lease_expires_at": "2026-12-07T00:00:00.000Z", "payload": {"n": 1}}
    t.update(over)
    return t


class FakeAPI:
    """A stand-in API for a Worker: claims are answered from claims (one
    each, then empty claims held for a moment as a long-poll would be);
    heartbeats, reports and outcomes are answered OK and recorded."""

    def __init__(self, test, claims):
        self.claims = list(claims)
        self.stop = threading.Event()
        test.addCleanup(self.stop.set)
        self.server = test.serve(self.respond)

    def respond(self, h, body):
        if h.path == "/api/v1/claims":
            with self.server.lock:
                answer = self.claims.pop(0) if self.claims else None
            if answer is None:
                self.stop.wait(0.2)  # an empty long-poll
                answer = {"tasks": []}
            send(h, 200, answer)
        elif h.path.endswith("/heartbeat"):
            send(h, 200, {"lease_expires_at": "2026-12-07T00:00:30.000Z", "cancel_requested": False})
        else:
            send(h, 200, {"task_id": h.path.split("/")[4], "status": "succeeded"})

    def outcomes(self):
        """{task id: (route, body)} of the complete and fail calls seen."""
        out = {}
        for method, path, _, body in self.server.requests("POST", "/api/v1/tasks/"):
            parts = path.split("/")
            if parts[-1] in ("complete", "fail"):
                out[parts[4]] = (parts[-1], json.loads(body))
        return out


class WorkerAgainstHostileServerTest(unittest.TestCase):
    serve = HostileServerTest.serve

    def run_worker(self, api, until):
        logs = []
        w = dtq.Worker(api.server.url, "w", ["q"], concurrency=4, wait=0, log=logs.append)
        w.handle("echo", lambda task: {"echo": task.payload})
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        try:
            wait_until(lambda: until(api) or not t.is_alive(), what="the worker to handle the claims")
            self.assertTrue(t.is_alive(), "run() is still running: %s" % logs)
        finally:
            w.stop()
            t.join(timeout=30)
        self.assertFalse(t.is_alive())
        return logs

    def test_run_survives_wrong_typed_claim_answers(self):
        api = FakeAPI(self, [
            "<html>502 Bad Gateway</html>",
            {"tasks": 5},
            [1, 2],
            {"tasks": None},
            {"tasks": [leased("t-ok")]},
        ])
        logs = self.run_worker(api, lambda a: "t-ok" in a.outcomes())
        self.assertEqual(api.outcomes()["t-ok"], ("complete", {"lease_token": "lease-t-ok", "result": {"echo": {"n": 1}}}))
        self.assertGreaterEqual(sum("claim failed" in m for m in logs), 4, logs)

    def test_one_undecodable_task_does_not_cost_its_claim(self):
        # One claim: two tasks to run, one whose deps nest too deep for
        # Python's json (the whole answer then fails json.loads), one with
        # a wrong-typed field, and two that cannot even be named.
        api = FakeAPI(self, [
            '{"tasks": [%s, %s, %s, %s, "junk", {"task_id": 7}]}' % (
                json.dumps(leased("t-1")),
                json.dumps(leased("t-deep", deps={}))[:-1].replace('"deps": {}', '"deps": {"up": %s}' % DEEP) + "}",
                json.dumps(leased("t-typed", attempt="1")),
                json.dumps(leased("t-2"))),
        ])
        want = {"t-1", "t-2", "t-deep", "t-typed"}
        logs = self.run_worker(api, lambda a: want <= set(a.outcomes()))
        got = api.outcomes()
        self.assertEqual(got["t-1"][0], "complete")
        self.assertEqual(got["t-2"][0], "complete")
        for tid, field in [("t-deep", "deps"), ("t-typed", "attempt")]:
            route, body = got[tid]
            self.assertEqual(route, "fail", tid)
            self.assertEqual(body["error"]["class"], "UndecodableTask")
            self.assertFalse(body["retryable"])
            self.assertEqual(body["lease_token"], "lease-" + tid)
            self.assertIn(field, body["error"]["message"])
        self.assertEqual(sum("without an id and lease token" in m for m in logs), 2, logs)


if __name__ == "__main__":
    unittest.main()
