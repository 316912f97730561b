"""A small client for dtq's HTTP API: a worker and a producer helper.

Standard library only (http.client, json, threading), Python 3.8 or later.
Install it with `pip install ./clients/python` (or copy this one file). See
docs/http-workers.md for the protocol, and clients/conformance.md for how its
methods match the TypeScript client's.

    from dtq import Producer, Worker

    def resize(task):
        return {"width": task.payload["width"] // 2}

    Producer("http://127.0.0.1:8080", producer_token).submit(
        {"task_type": "resize", "queue": "images", "payload": {"width": 640}})
    Worker("http://127.0.0.1:8080", worker_token, ["images"]).handle("resize", resize).run()

A handler gets a Task and returns any JSON-encodable result (the task
succeeds) or raises: Permanent(...) dead-letters the task at once,
RetryAfter(seconds, ...) retries after that delay, any other exception is
retried with the server's backoff while attempts remain. While a handler
runs, a background thread renews its lease; task.cancelled is set when a
cancel was requested (the handler should stop and raise), task.lost when
the lease was lost (its result will be discarded). A workflow node's task
has workflow_id, ref and deps, its deps' outcomes by ref, and may add nodes
to its workflow with task.add_nodes([...]) (fan-out).

A handler reports how far it got with task.progress(40) (a number 0..100
or a dict of at most 4 KiB as JSON) and logs lines with task.log("...")
(each cut to 1 KiB, kept with the time of the call): the worker sends them
at most once a second, and once more before the task's complete or fail
(docs/progress.md).

The server is held to limits (the TypeScript client's): redirects are not
followed (the token goes to url only), an answer is at most MAX_BODY_BYTES,
a try ends within its timeout with its answer's body, a Retry-After is
waited up to MAX_RETRY_AFTER_S, and an answer the client cannot use raises
InvalidAnswer. A claimed task the worker cannot decode is failed for good
as UndecodableTask, without costing the others of its claim
(docs/http-workers.md).
"""

import http.client
import io
import json
import os
import random
import re
import signal
import socket
import threading
import time
import urllib.parse
import warnings

__version__ = "0.1.0"

__all__ = ["APIError", "LeaseLost", "InvalidAnswer", "RequestTimeout", "Permanent", "RetryAfter", "Task", "Worker",
           "Producer", "TERMINAL", "WORKFLOW_TERMINAL", "MAX_BODY_BYTES", "MAX_RETRY_AFTER_S"]

TERMINAL = frozenset(["succeeded", "failed", "dead_lettered", "cancelled", "expired"])
WORKFLOW_TERMINAL = frozenset(["succeeded", "failed", "cancelled"])

# Statuses worth sending a request again for: the server or a proxy could
# not serve it now.
_RETRY_STATUS = frozenset([429, 502, 503, 504])

# The limits an answer is held to, the TypeScript client's: whatever a
# hostile or misconfigured server sends, a call ends within its timeout
# (default 10 s a try), reads at most MAX_BODY_BYTES, waits at most
# MAX_RETRY_AFTER_S for a Retry-After and never sends the token elsewhere
# (redirects are not followed).
MAX_BODY_BYTES = 128 << 20  # the largest answer read: a batch of 1000 tasks with results is far below
MAX_RETRY_AFTER_S = 60.0  # the longest Retry-After honoured
_MAX_DELAY_S = 5.0  # the longest backoff between tries


class APIError(Exception):
    """An error answer of the API: status, code, message, details."""

    def __init__(self, status, code, message, details=None):
        super().__init__("%s %s: %s" % (status, code, message))
        self.status = status
        self.code = code
        self.message = message
        self.details = details if isinstance(details, dict) else {}


class LeaseLost(APIError):
    """409 LEASE_LOST: the lease token no longer owns the task; nothing was written."""


class InvalidAnswer(APIError):
    """An answer the client cannot use (code INVALID_ANSWER): larger than
    MAX_BODY_BYTES, not JSON, nested deeper than Python's json decodes, or
    not of the shape the API documents. status is the answer's HTTP status
    (0 when the shape was checked after the call). It is not sent again:
    the same server would answer the same."""

    def __init__(self, message, status=0, raw=None):
        super().__init__(status, "INVALID_ANSWER", message)
        if not status:
            self.args = ("INVALID_ANSWER: %s" % message,)
        self.raw = raw  # the answer's bytes, when it was read


class RequestTimeout(TimeoutError):
    """A try took longer than its timeout, its answer's body included (a
    server dripping its answer does not hold a call past it)."""


class Permanent(Exception):
    """Raise from a handler to dead-letter the task without retrying."""


class RetryAfter(Exception):
    """Raise from a handler to retry the task after `seconds`."""

    def __init__(self, seconds, message=""):
        super().__init__(message)
        self.seconds = float(seconds)


class _DeadlineSocket:
    """A connected socket whose every send and receive ends by deadline
    (time.monotonic()): the socket's own timeout bounds one receive, which
    a server sending a byte at a time renews forever."""

    def __init__(self, sock, deadline, timeout):
        self._sock = sock
        self._deadline = deadline
        self._timeout = timeout
        self._readers = 0  # open makefile()s: as for a socket, close() waits for them
        self._closed = False

    def _arm(self):
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise RequestTimeout("no answer within %.3g s" % self._timeout)
        self._sock.settimeout(left)

    def sendall(self, data):
        self._arm()
        try:
            self._sock.sendall(data)
        except socket.timeout:
            raise RequestTimeout("no answer within %.3g s" % self._timeout) from None

    def recv_into(self, buf):
        self._arm()
        try:
            return self._sock.recv_into(buf)
        except socket.timeout:
            raise RequestTimeout("no answer within %.3g s" % self._timeout) from None

    def makefile(self, mode="rb", *args, **kwargs):
        self._readers += 1
        return io.BufferedReader(_DeadlineReader(self))

    def _reader_closed(self):
        self._readers -= 1
        if self._closed and self._readers <= 0:
            self._sock.close()

    def close(self):
        # http.client closes the connection of an answer that ends with it
        # before the answer is read: the socket lives on until that is done.
        self._closed = True
        if self._readers <= 0:
            self._sock.close()


class _DeadlineReader(io.RawIOBase):
    """The raw reader http.client reads an answer from, through a _DeadlineSocket."""

    def __init__(self, sock):
        super().__init__()
        self._sock = sock

    def readable(self):
        return True

    def readinto(self, buf):
        return self._sock.recv_into(buf)

    def close(self):
        if not self.closed:
            self._sock._reader_closed()
        super().close()


def _decode(raw, status):
    """The JSON value of an answer's body (None when empty); InvalidAnswer
    when it is not JSON or nests deeper than Python's json decodes."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except RecursionError:
        raise InvalidAnswer("the answer nests deeper than Python's json decoder can follow", status, raw) from None
    except ValueError:  # UnicodeDecodeError included
        start = raw[:200].decode("utf-8", "replace")
        raise InvalidAnswer("the answer is not JSON: %r" % start, status, raw) from None


def _envelope(status, raw):
    """The API's error envelope in an error answer; a body that is not one
    (a proxy's page, any other JSON) is HTTP_<status> with its text."""
    try:
        env = json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        env = None
    if isinstance(env, dict) and isinstance(env.get("code"), str):
        msg = env.get("message")
        return env, env["code"], msg if isinstance(msg, str) else "", env.get("details")
    return env, "HTTP_%d" % status, raw.decode("utf-8", "replace")[:200], None


def _member(v, name, kind, what):
    """v[name] when v is an object and that member is a kind (a bool is no
    int here); else InvalidAnswer naming what was asked."""
    m = v.get(name) if isinstance(v, dict) else None
    if not isinstance(m, kind) or (isinstance(m, bool) and kind is not bool):
        raise InvalidAnswer("%s: the answer's %s is missing or not of the documented type" % (what, name))
    return m


class _HTTP:
    """JSON requests with retries of transport errors and 429/5xx-unavailable answers.

    timeout: seconds one try may take, its answer included (default 10);
    retries: how many times a failed call is sent again (default 6).
    Redirects are not followed (a 3xx is an APIError HTTP_3xx naming where
    it pointed), so the token goes to the url given and nowhere else.
    """

    def __init__(self, url, token, retries=6, timeout=10.0):
        parts = urllib.parse.urlsplit(url or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be http:// or https://, e.g. http://127.0.0.1:8080, not %r" % url)
        self.base = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self.token = token
        self.retries = retries
        self.timeout = timeout
        self.max_body = MAX_BODY_BYTES
        # on_answer(method, path, status, body), when set, sees every answer
        # (errors and resent ones included): a hook for tests and tracing.
        self.on_answer = None

    def call(self, method, path, body=None, timeout=None, retry=True, headers=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = dict(headers or {}, **{"Accept": "application/json", "User-Agent": "dtq-client-py"})
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        delay = 0.1
        attempt = 0
        while True:
            attempt += 1
            try:
                status, res_headers, raw = self._once(method, path, data, headers, timeout or self.timeout)
            except (OSError, http.client.HTTPException):  # RequestTimeout included
                if not retry or attempt > self.retries:
                    raise
                time.sleep(_jitter(delay))
                delay = min(delay * 2, _MAX_DELAY_S)
                continue
            if 200 <= status < 300:
                out = _decode(raw, status)
                if self.on_answer is not None:
                    self.on_answer(method, path, status, out)
                return out
            env, code, message, details = _envelope(status, raw)
            if 300 <= status < 400:
                where = (res_headers.get("Location") or "")[:200]
                message = "redirected to %r; redirects are not followed: give the client the API's own url" % where
            if self.on_answer is not None:
                self.on_answer(method, path, status, env if isinstance(env, dict) else {"code": code, "message": message})
            if retry and status in _RETRY_STATUS and attempt <= self.retries:
                wait = _jitter(delay)
                ra = res_headers.get("Retry-After") or ""
                if ra.isdigit():
                    wait = max(wait, min(float(ra), MAX_RETRY_AFTER_S))
                time.sleep(wait)
                delay = min(delay * 2, _MAX_DELAY_S)
                continue
            cls = LeaseLost if code == "LEASE_LOST" else APIError
            raise cls(status, code, message, details)

    def _once(self, method, path, data, headers, timeout):
        """One try: (status, headers, body bytes). The whole try, the
        answer's body included, ends within timeout seconds; a body over
        max_body is refused without reading the rest."""
        deadline = time.monotonic() + timeout
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)
        res = None
        try:
            try:
                conn.connect()
            except socket.timeout:
                raise RequestTimeout("no connection within %.3g s" % timeout) from None
            conn.sock = _DeadlineSocket(conn.sock, deadline, timeout)
            conn.request(method, self._prefix + path, body=data, headers=headers)
            res = conn.getresponse()
            length = res.getheader("Content-Length") or ""
            if length.isdigit() and int(length) > self.max_body:
                raise InvalidAnswer("the answer is %s bytes, more than the %d this client reads" % (length, self.max_body),
                                    res.status)
            chunks, size = [], 0
            while True:
                chunk = res.read(min(1 << 20, self.max_body + 1 - size))
                if not chunk:
                    break
                size += len(chunk)
                if size > self.max_body:
                    raise InvalidAnswer("the answer is more than the %d bytes this client reads" % self.max_body,
                                        res.status)
                chunks.append(chunk)
            return res.status, res.headers, b"".join(chunks)
        finally:
            if res is not None:
                res.close()
            conn.close()


def _check_request(request, what, member, kind):
    """Refuses a request that is not a dict with a non-empty member."""
    if not isinstance(request, dict):
        raise TypeError("%s: the request is a dict, not a %s" % (what, type(request).__name__))
    if not isinstance(request.get(member), kind) or not request[member]:
        raise TypeError("%s: request[%r] is required" % (what, member))


def _idempotency_header(key):
    """The Idempotency-Key header of key (None: no header)."""
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= 255 or not all(" " <= c <= "~" for c in key):
        raise TypeError("an idempotency key is 1..255 printable ASCII characters")
    return {"Idempotency-Key": key}


def _legacy_submission(task_type, args, legacy):
    """The request of the older submit("type", payload, queue=..., **fields)."""
    warnings.warn("Producer.submit(task_type, payload, queue=...) is submit({\"task_type\": ..., \"payload\": ..., "
                  "\"queue\": ...})", DeprecationWarning, stacklevel=3)
    names = ("payload", "queue", "idempotency_key", "dedup")
    if len(args) > len(names):
        raise TypeError("submit(task_type, payload=None, queue=None, idempotency_key=None, dedup=None, **fields)")
    legacy.update(zip(names, args))
    if legacy.get("dedup") is not None and not isinstance(legacy["dedup"], dict):
        raise TypeError("dedup is a dict such as {\"key\": \"user-7\", \"mode\": \"drop\"}")
    return dict({k: v for k, v in legacy.items() if v is not None}, task_type=task_type)


def _jitter(s):
    return s * random.uniform(0.8, 1.2)


class Producer:
    """Submits tasks and reads them back (needs a producer key).

    timeout: seconds one try of a call may take, its answer included
    (default 10; long-polls take up to 45); retries: how many times a
    failed call that is safe to repeat is sent again (default 6).
    """

    def __init__(self, url, token=None, retries=6, timeout=10.0):
        self._http = _HTTP(url, token, retries, timeout)

    def submit(self, request, *args, idempotency_key=None, **legacy):
        """Submits one task: request is the API's submission as a dict
        (task_type, and queue, payload, priority, delay_ms, run_at, dedup,
        ...: the members of SubmitRequest in openapi.json; see
        docs/http-api.md). The TypeScript client's submit(request,
        {idempotencyKey}).

        Returns the task as the API answers it ("duplicate": true when an
        idempotency key replayed a finished task; "deduplicated": "<mode>"
        when a dedup key collapsed it onto its key's task). Pass an
        idempotency_key (sent as the Idempotency-Key header) or the
        request's idempotency_key to make resending after a lost reply safe.

        submit("type", payload, queue=..., **fields), the older spelling,
        still works and warns (DeprecationWarning).
        """
        if isinstance(request, str):
            request = _legacy_submission(request, args, legacy)
        elif args or legacy:
            raise TypeError("submit(request, *, idempotency_key=None): the request is a dict such as "
                            "{\"task_type\": \"resize\", \"queue\": \"images\", \"payload\": {...}}")
        _check_request(request, "submit", "task_type", str)
        headers = _idempotency_header(idempotency_key)
        keyed = idempotency_key is not None or isinstance(request.get("idempotency_key"), str)
        return self._http.call("POST", "/api/v1/tasks", request, retry=keyed, headers=headers)

    def submit_batch(self, tasks):
        """Submits up to 1000 submissions (dicts as for submit) in one
        request; returns one item per task, in order ({index, http_status,
        duplicate, task} or {..., error}). The TypeScript client's
        submitBatch."""
        if not isinstance(tasks, (list, tuple)) or not 1 <= len(tasks) <= 1000:
            raise ValueError("submit_batch: tasks is a list of 1..1000 submissions")
        out = self._http.call("POST", "/api/v1/tasks/batch", {"tasks": list(tasks)}, timeout=60, retry=False)
        return _member(out, "items", list, "submit_batch")

    def submit_many(self, tasks):
        """Deprecated: submit_batch."""
        warnings.warn("Producer.submit_many is Producer.submit_batch", DeprecationWarning, stacklevel=2)
        return self.submit_batch(tasks)

    def get(self, task_id):
        """Returns the task with its result and attempts."""
        return self._http.call("GET", "/api/v1/tasks/" + urllib.parse.quote(task_id, safe=""))

    def cancel(self, task_id, reason=None):
        """Cancels a task (needs an admin key).

        A pending, queued or retrying task is cancelled at once; a running
        one gets a cancel request, which its worker sees at its next
        heartbeat. Returns {"task", "cancel_requested"}; cancelling again is
        no error, a task that ended otherwise raises APIError TASK_TERMINAL.
        """
        body = {} if reason is None else {"reason": reason}
        return self._http.call("POST", "/api/v1/tasks/%s/cancel" % urllib.parse.quote(task_id, safe=""), body)

    def logs(self, task_id, attempt=None, cursor=None, limit=None):
        """Reads a page of a task's log lines, oldest first: {"items":
        [{"attempt", "ts", "line"}], "next_cursor"}; only one attempt's
        with attempt. Pass next_cursor back as cursor for the lines logged
        since (an empty page: nothing new yet); limit is 1..1000 lines
        (default 100). The TypeScript client's logs(taskId, {attempt,
        cursor, limit})."""
        query = {}
        if attempt is not None:
            query["attempt"] = str(int(attempt))
        if cursor is not None:
            query["cursor"] = cursor
        if limit is not None:
            if not 1 <= limit <= 1000:
                raise ValueError("limit is 1..1000")
            query["limit"] = str(int(limit))
        path = "/api/v1/tasks/%s/logs" % urllib.parse.quote(task_id, safe="")
        if query:
            path += "?" + urllib.parse.urlencode(query)
        page = self._http.call("GET", path)
        _member(page, "items", list, "logs")
        return page

    def wait(self, task_id, timeout=60.0):
        """Waits until the task is finished (long-polls); returns it, or raises TimeoutError."""
        return self._long_poll("/api/v1/tasks/", "task", task_id, TERMINAL, timeout)

    def _long_poll(self, prefix, what, ident, terminal, timeout):
        """GETs prefix+ident with ?wait= (at most 30 s a call) until its status is in terminal."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            path = "%s%s?wait=%.3f" % (prefix, urllib.parse.quote(ident, safe=""), max(0.0, min(left, 30.0)))
            v = self._http.call("GET", path, timeout=45)
            if _member(v, "status", str, "wait") in terminal:
                return v
            if left <= 0:
                raise TimeoutError("%s %s is still %s" % (what, ident, v["status"]))


    def submit_workflow(self, request, *args, idempotency_key=None, **legacy):
        """Submits a workflow: request is the API's workflow submission as a
        dict: nodes (task dicts with a ref, and deps and on_dep_failure when
        needed), and name, on_failure (a task dict submitted once if the
        workflow fails) when wanted. The TypeScript client's
        submitWorkflow(request, {idempotencyKey}).

        Returns {workflow_id, status, nodes: [{ref, task_id, status}]}. Pass
        an idempotency_key (or the request's) to make resending after a
        lost reply safe. submit_workflow(nodes, name=..., on_failure=...),
        the older spelling, still works and warns (DeprecationWarning).
        """
        if isinstance(request, (list, tuple)):
            warnings.warn("Producer.submit_workflow(nodes, name=...) is submit_workflow({\"nodes\": nodes, "
                          "\"name\": ...})", DeprecationWarning, stacklevel=2)
            names = ("name", "on_failure")
            if len(args) > len(names) or set(legacy) - set(names):
                raise TypeError("submit_workflow(nodes, name=None, on_failure=None, idempotency_key=None)")
            legacy.update(zip(names, args))
            request = dict({k: v for k, v in legacy.items() if v is not None}, nodes=list(request))
        elif args or legacy:
            raise TypeError("submit_workflow(request, *, idempotency_key=None): the request is a dict such as "
                            "{\"nodes\": [...], \"name\": \"...\"}")
        _check_request(request, "submit_workflow", "nodes", list)
        headers = _idempotency_header(idempotency_key)
        keyed = idempotency_key is not None or isinstance(request.get("idempotency_key"), str)
        return self._http.call("POST", "/api/v1/workflows", request, timeout=60, retry=keyed, headers=headers)

    def get_workflow(self, workflow_id):
        """Returns the workflow: status, counts and every node with its status."""
        return self._http.call("GET", "/api/v1/workflows/" + urllib.parse.quote(workflow_id, safe=""))

    def wait_workflow(self, workflow_id, timeout=60.0):
        """Waits until the workflow ended (long-polls); returns it, or raises TimeoutError."""
        return self._long_poll("/api/v1/workflows/", "workflow", workflow_id, WORKFLOW_TERMINAL, timeout)

    def cancel_workflow(self, workflow_id):
        """Cancels a workflow: every node not ended is cancelled (running ones
        get a cancel request). Returns the workflow as it is then
        (cancel_requested, or status cancelled); one that ended otherwise
        raises APIError WORKFLOW_NOT_RUNNING."""
        path = "/api/v1/workflows/%s/cancel" % urllib.parse.quote(workflow_id, safe="")
        return _member(self._http.call("POST", path, {}), "workflow", dict, "cancel_workflow")


MAX_PROGRESS_BYTES = 4096
MAX_LOG_LINE_BYTES = 1024
MAX_LOG_LINES = 1000  # per report, and buffered between reports (the oldest dropped)

_UNSET = object()


# The members of a claimed task (the API's LeasedTask) a worker relies on,
# and their types; the optional ones may also be absent or null.
_LEASED_REQUIRED = (("task_id", str), ("lease_token", str), ("queue", str), ("task_type", str),
                    ("attempt", int), ("max_attempts", int))
_LEASED_OPTIONAL = (("timeout_ms", int), ("idempotency_key", str), ("workflow_id", str), ("ref", str),
                    ("deps", dict), ("cancel_requested", bool), ("priority", int))


def _leased_problem(raw):
    """Why raw is not a claimed task this worker can run, or None."""
    if not isinstance(raw, dict):
        return "the claimed task is a %s, not an object" % type(raw).__name__
    for name, kind in _LEASED_REQUIRED:
        v = raw.get(name)
        if not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool):
            return "its %s is missing or not a %s" % (name, "string" if kind is str else "number")
    for name, kind in _LEASED_OPTIONAL:
        v = raw.get(name)
        if v is not None and (not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool)):
            return "its %s is not a %s" % (name, {str: "string", int: "number", dict: "object", bool: "boolean"}[kind])
    return None


# A claim answer json.loads cannot decode (a task's payload, metadata or
# deps nested deeper than its recursion allows) is split without recursion
# into its tasks, and each task into its members, so that one such task
# does not cost the others of its claim.
_BRACKET_OR_QUOTE = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r'[,\]}\s]')
_SPACE = re.compile(r'\s*')


def _string_end(s, i):
    """The index after the JSON string whose opening quote is s[i]."""
    j = i + 1
    while True:
        j = s.find('"', j)
        if j < 0:
            raise ValueError("an unterminated string at %d" % i)
        k = j - 1
        while s[k] == "\\":
            k -= 1
        if (j - 1 - k) % 2 == 0:  # not escaped
            return j + 1
        j += 1


def _value_end(s, i):
    """The index after the JSON value that starts at s[i], at any depth."""
    if s.startswith('"', i):
        return _string_end(s, i)
    if not s.startswith(("[", "{"), i):
        m = _SCALAR_END.search(s, i)
        return m.start() if m else len(s)
    depth = 0
    while True:
        m = _BRACKET_OR_QUOTE.search(s, i)
        if m is None:
            raise ValueError("an unterminated value")
        i = m.start()
        if s[i] == '"':
            i = _string_end(s, i)
            continue
        depth += 1 if s[i] in "[{" else -1
        i += 1
        if depth == 0:
            return i


def _spans(s, i, open_):
    """The members of the object (open_ "{") or elements of the array ("[")
    whose bracket is at s[i]: [(key or None, start, end)]."""
    if not s.startswith(open_, i):
        raise ValueError("expected %r at %d" % (open_, i))
    close = "}" if open_ == "{" else "]"
    out = []
    i = _SPACE.match(s, i + 1).end()
    if s.startswith(close, i):
        return out
    while True:
        key = None
        if open_ == "{":
            end = _string_end(s, i) if s.startswith('"', i) else -1
            if end < 0:
                raise ValueError("expected a member name at %d" % i)
            key = json.loads(s[i:end])
            i = _SPACE.match(s, end).end()
            if not s.startswith(":", i):
                raise ValueError("expected ':' at %d" % i)
            i = _SPACE.match(s, i + 1).end()
        end = _value_end(s, i)
        out.append((key, i, end))
        i = _SPACE.match(s, end).end()
        if s.startswith(close, i):
            return out
        if not s.startswith(",", i):
            raise ValueError("expected ',' at %d" % i)
        i = _SPACE.match(s, i + 1).end()


def _split_claim(raw):
    """The tasks of a claim answer decoded one by one: [(task, problem)],
    problem None for a task that decoded, else why it did not (the task
    then holds the members that did)."""
    try:
        s = raw.decode("utf-8")
        top = {k: (a, b) for k, a, b in _spans(s, _SPACE.match(s).end(), "{")}
        if "tasks" not in top:
            raise ValueError("no tasks member")
        items = []
        for _, a, b in _spans(s, top["tasks"][0], "["):
            try:
                items.append((json.loads(s[a:b]), None))
                continue
            except RecursionError:
                pass
            task, deep = {}, []
            if s.startswith("{", a):
                for k, x, y in _spans(s, a, "{"):
                    try:
                        task[k] = json.loads(s[x:y])
                    except RecursionError:
                        deep.append(k)
            items.append((task, "its %s nests deeper than Python's json decoder can follow"
                          % (", ".join(deep) or "value")))
        return items
    except (ValueError, RecursionError) as e:
        raise InvalidAnswer("the claim answer cannot be decoded, even task by task: %s" % e) from None


def _rfc3339_ms(t):
    """The time t (seconds since the epoch) as RFC 3339 in UTC to the
    millisecond, as the API writes times: 2026-01-02T15:04:05.123Z."""
    ms = int(t * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def _cut(line, n):
    """line without its trailing newline, cut to at most n UTF-8 bytes."""
    b = line.rstrip("\n").encode("utf-8")
    if len(b) <= n:
        return b.decode("utf-8")
    return b[:n].decode("utf-8", "ignore")


class Task:
    """A claimed task. Read payload and metadata; watch cancelled and lost;
    report with progress() and log()."""

    def __init__(self, raw, http=None):
        problem = _leased_problem(raw)
        if problem is not None:
            raise InvalidAnswer("a claimed task: " + problem)
        self._http = http  # the worker's, for add_nodes
        self._slot = True  # holds one of the worker's slots (see Worker._start_claimed)
        self.id = raw["task_id"]
        self.queue = raw["queue"]
        self.type = raw["task_type"]
        self.payload = raw.get("payload")
        self.metadata = raw.get("metadata")
        self.attempt = raw["attempt"]
        self.max_attempts = raw["max_attempts"]
        self.timeout_ms = raw.get("timeout_ms")
        self.idempotency_key = raw.get("idempotency_key")
        self.lease_token = raw["lease_token"]
        # A workflow node's workflow, ref and its deps' outcomes by ref:
        # {ref: {"status", "result", "error_class"}} ({} for a plain task).
        self.workflow_id = raw.get("workflow_id")
        self.ref = raw.get("ref")
        self.deps = raw.get("deps") or {}
        self.cancelled = threading.Event()
        self.lost = threading.Event()
        if raw.get("cancel_requested"):
            self.cancelled.set()
        # The report buffer (see Worker._report): the latest progress and
        # the lines since the last report; pending is a report whose answer
        # is unknown, sent again as it was before anything newer.
        self._buf_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._progress = _UNSET
        self._lines = []
        self._seq = 0
        self._pending = None
        self.dropped_lines = 0

    def progress(self, value):
        """Reports progress: a number 0..100 or a dict (JSON of at most 4 KiB).
        The last value reported within a second wins."""
        if isinstance(value, bool) or not isinstance(value, (int, float, dict)):
            raise ValueError("progress is a number 0..100 or a dict")
        if isinstance(value, dict):
            if len(json.dumps(value, separators=(",", ":")).encode("utf-8")) > MAX_PROGRESS_BYTES:
                raise ValueError("a progress dict is at most %d bytes as JSON" % MAX_PROGRESS_BYTES)
        elif not 0 <= value <= 100:
            raise ValueError("progress %r is outside 0..100" % value)
        with self._buf_lock:
            self._progress = value

    def add_nodes(self, nodes):
        """Adds nodes to this node's workflow (fan-out): a list of node
        dicts as in Producer.submit_workflow, which may depend on existing
        refs and on each other. Returns [{ref, task_id, status}].

        Adding the same refs with the same definitions again is no change
        (a handler run again after a retry may call it again); another
        definition raises APIError IDEMPOTENCY_KEY_MISMATCH (422). A lost
        lease raises LeaseLost (and sets lost and cancelled); a task that is
        not a workflow node raises APIError INVALID_WORKFLOW.
        """
        if self._http is None:
            raise RuntimeError("add_nodes needs a task claimed by a Worker")
        if not isinstance(nodes, (list, tuple)) or not nodes:
            raise ValueError("nodes is a non-empty list of node dicts")
        body = {"lease_token": self.lease_token, "nodes": list(nodes)}
        try:
            # Safe to send again after a lost reply: the same nodes are no change.
            out = self._http.call("POST", "/api/v1/tasks/%s/nodes" % urllib.parse.quote(self.id, safe=""),
                                  body, timeout=60)
            return _member(out, "nodes", list, "add_nodes")
        except LeaseLost:
            self.lost.set()
            self.cancelled.set()
            raise

    def log(self, line):
        """Appends a line to the attempt's log (cut to 1 KiB), with the
        time of this call: the API keeps it (docs/progress.md)."""
        entry = {"ts": _rfc3339_ms(time.time()), "line": _cut(str(line), MAX_LOG_LINE_BYTES)}
        with self._buf_lock:
            self._lines.append(entry)
            if len(self._lines) > MAX_LOG_LINES:
                over = len(self._lines) - MAX_LOG_LINES
                del self._lines[:over]
                self.dropped_lines += over


class Worker:
    """Claims tasks over HTTP and runs registered handlers in threads.

    url: the API's base URL; token: a worker key; queues: the queues served.
    concurrency: handlers at once (and the most one claim asks for).
    lease: seconds each claim and heartbeat lease lasts (5..3600); heartbeats
    run every lease/3. wait: seconds one claim long-polls (0..30).
    drain_timeout: seconds run() waits for running handlers after stop().
    """

    def __init__(self, url, token, queues, worker_id=None, concurrency=10, lease=30.0, wait=10.0,
                 drain_timeout=30.0, retries=6, log=None):
        self._http = _HTTP(url, token, retries, timeout=max(10.0, wait + 10.0))
        self.queues = list(queues)
        self.worker_id = worker_id or "py-%s-%d-%04x" % (socket.gethostname(), os.getpid(), random.getrandbits(16))
        self.concurrency = concurrency
        self.lease = lease
        self.wait = wait
        self.drain_timeout = drain_timeout
        self._handlers = {}
        self._stop = threading.Event()
        self._done = threading.Event()  # run() has drained: heartbeats end
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._running = {}  # task id -> Task
        self._threads = set()
        self._log = log or (lambda msg: None)
        self.processed = 0

    def handle(self, task_type, fn):
        """Registers fn(task) for task_type; returns the worker, so calls chain."""
        self._handlers[task_type] = fn
        return self

    def stop(self):
        """Asks run() to stop claiming and return once running handlers finished."""
        self._stop.set()

    def run(self):
        """Claims and runs tasks until stop() or SIGTERM/SIGINT (in the main thread)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        beat = threading.Thread(target=self._heartbeats, name="dtq-heartbeat", daemon=True)
        beat.start()
        reports = threading.Thread(target=self._reports, name="dtq-progress", daemon=True)
        reports.start()
        delay = 0.1
        while not self._stop.is_set():
            free = self._acquire_free()
            if free == 0:
                continue
            try:
                got = self._claim(free)
                delay = 0.1
            except Exception as e:  # the API is away or answered nonsense: keep trying with backoff
                self._log("claim failed: %s" % e)
                for _ in range(free):
                    self._slots.release()
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            self._start_claimed(got, free)
        self._drain()
        self._done.set()
        beat.join(timeout=5)
        reports.join(timeout=5)

    def _claim(self, free):
        """Claims up to free tasks: [(task, problem)] as _split_claim. A
        claim answer Python's json cannot decode whole is decoded task by
        task, so one task nested too deep does not cost the others."""
        body = {"worker_id": self.worker_id, "queues": self.queues, "max": free,
                "wait": "%.3fs" % self.wait, "lease": "%.3fs" % self.lease}
        try:
            out = self._http.call("POST", "/api/v1/claims", body)
        except InvalidAnswer as e:
            if e.raw is None:
                raise
            return _split_claim(e.raw)
        return [(raw, None) for raw in _member(out, "tasks", list, "claim")]

    def _start_claimed(self, got, free):
        """Starts the claimed tasks, each in a slot of the free ones taken,
        and fails those it cannot decode (see _refuse)."""
        used = 0
        for raw, problem in got:
            problem = problem or _leased_problem(raw)
            if problem is not None:
                self._refuse(raw, problem)
                continue
            task = Task(raw, self._http)
            # A server that hands out more than asked gets them run all the
            # same; only the asked-for ones hold a slot.
            task._slot = used < free
            used += task._slot
            self._start(task)
        for _ in range(free - used):
            self._slots.release()

    def _refuse(self, raw, problem):
        """Fails a claimed task this worker cannot decode, at once and for
        good (class UndecodableTask: retries would meet the same answer),
        rather than let its lease run out into WorkerLost. Without a task id
        and lease token to name it by, it can only be logged."""
        tid = raw.get("task_id") if isinstance(raw, dict) else None
        token = raw.get("lease_token") if isinstance(raw, dict) else None
        if not isinstance(tid, str) or not isinstance(token, str):
            self._log("claim: a task that cannot be decoded, without an id and lease token to fail it by "
                      "(its lease will run out): %s" % problem)
            return
        msg = "this worker could not decode the claimed task, and did not run it: %s" % problem
        self._log("task %s: %s; failing it" % (tid, msg))
        try:
            self._http.call("POST", "/api/v1/tasks/%s/fail" % urllib.parse.quote(tid, safe=""), {
                "lease_token": token, "error": {"class": "UndecodableTask", "message": msg[:500]}, "retryable": False})
        except Exception as e:
            self._log("task %s: fail failed: %s; its lease will run out and it will be retried" % (tid, e))

    def _acquire_free(self):
        """Waits for one free slot, then takes all free ones; returns how many."""
        if not self._slots.acquire(timeout=0.5):
            return 0
        n = 1
        while n < self.concurrency and self._slots.acquire(blocking=False):
            n += 1
        return n

    def _start(self, task):
        with self._lock:
            self._running[task.id] = task
        t = threading.Thread(target=self._execute, args=(task,), name="dtq-task-" + task.id, daemon=True)
        with self._lock:
            self._threads.add(t)
        t.start()

    def _execute(self, task):
        try:
            fn = self._handlers.get(task.type)
            try:
                if fn is None:
                    raise Permanent("no handler for task type %r" % task.type)
                result = fn(task)
            except Exception as e:  # the handler's failure is the task's
                self._finish(task, "fail", self._failure(task, e))
            else:
                self._finish(task, "complete", {"result": result})
        finally:
            with self._lock:
                self._running.pop(task.id, None)
                self._threads.discard(threading.current_thread())
            if task._slot:
                self._slots.release()

    @staticmethod
    def _failure(task, e):
        cls = type(e).__name__
        if isinstance(e, (Permanent, RetryAfter)) and e.__cause__ is not None:
            cls = type(e.__cause__).__name__
        if task.cancelled.is_set():
            cls = "Cancelled"
        cls = re.sub(r"[^A-Za-z0-9_.:@-]", "_", cls)[:128] or "Error"  # the API's error_class form
        body = {"error": {"class": cls, "message": str(e)[:500]}, "retryable": not isinstance(e, Permanent)}
        if isinstance(e, RetryAfter):
            body["retry_after"] = "%.3fs" % e.seconds
        return body

    def _report(self, task):
        """Sends the task's buffered progress and lines (the pending report
        first); returns True when nothing is left to send."""
        with task._send_lock:
            while True:
                if task.lost.is_set():
                    return True
                if task._pending is None:
                    with task._buf_lock:
                        if task._progress is _UNSET and not task._lines:
                            return True
                        task._seq += 1
                        body = {"lease_token": task.lease_token, "seq": task._seq}
                        if task._progress is not _UNSET:
                            body["progress"] = task._progress
                        if task._lines:
                            body["logs"] = task._lines
                        task._progress, task._lines = _UNSET, []
                    task._pending = body
                try:
                    # A 429 (within a second of the last write) is waited out
                    # and sent again by _HTTP; so is a lost reply: the seq
                    # makes a resend land once.
                    self._http.call("POST", "/api/v1/tasks/%s/progress" % task.id, task._pending)
                except LeaseLost:
                    task._pending = None
                    task.lost.set()
                    task.cancelled.set()
                    return True
                except APIError as e:
                    if e.status == 429:  # still too soon: nothing was written; next time
                        return False
                    self._log("task %s: progress report refused: %s" % (task.id, e))
                    task._pending = None  # a bad report is not sent again
                    continue
                except Exception as e:
                    self._log("task %s: progress report failed: %s" % (task.id, e))
                    return False
                task._pending = None

    def _reports(self):
        """Sends every running task's reports once a second."""
        while not self._done.wait(1.0):
            for task in self._running_tasks():
                self._report(task)

    def _finish(self, task, what, body):
        # What the handler reported lands before its outcome does.
        self._report(task)
        if task.lost.is_set():
            self._log("task %s: lease lost; result discarded" % task.id)
            return
        body["lease_token"] = task.lease_token
        try:
            # Complete and fail are idempotent: resending after a lost reply is safe.
            self._http.call("POST", "/api/v1/tasks/%s/%s" % (task.id, what), body)
            self.processed += 1
        except LeaseLost:
            self._log("task %s: lease lost before %s; nothing written" % (task.id, what))
        except Exception as e:
            self._log("task %s: %s failed: %s; its lease will run out and it will be retried" % (task.id, what, e))

    def _heartbeats(self):
        every = self.lease / 3.0
        while not self._done.wait(every):
            for task in self._running_tasks():
                if task.lost.is_set():
                    continue
                try:
                    ren = self._http.call("POST", "/api/v1/tasks/%s/heartbeat" % task.id,
                                          {"lease_token": task.lease_token, "lease": "%.3fs" % self.lease})
                    if ren.get("cancel_requested"):
                        task.cancelled.set()
                except LeaseLost:
                    task.lost.set()
                    task.cancelled.set()
                except Exception as e:
                    self._log("heartbeat of %s failed: %s" % (task.id, e))

    def _running_tasks(self):
        with self._lock:
            return list(self._running.values())

    def _drain(self):
        deadline = time.monotonic() + self.drain_timeout
        while True:
            with self._lock:
                threads = list(self._threads)
            if not threads:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                # Unfinished tasks keep their leases until they run out;
                # then the server hands them to another worker.
                self._log("drain timeout: %d tasks still running" % len(threads))
                return
            threads[0].join(timeout=left)
