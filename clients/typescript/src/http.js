// JSON requests to the API over node:http(s) with a keep-alive agent, and
// retries with backoff of what is safe to send again.

import http from "node:http";
import https from "node:https";

import { errorFor, InvalidAnswer } from "./errors.js";

/** The client's version, sent in User-Agent. */
export const VERSION = "0.1.0";

// Statuses worth sending an idempotent request again for: the server or a
// proxy could not serve it now.
const RETRY_STATUS = new Set([429, 502, 503, 504]);

/** The largest answer read, in bytes: a batch of 1000 tasks with results is far below. */
export const MAX_BODY_BYTES = 128 << 20;

/** The longest Retry-After honoured, in seconds. */
export const MAX_RETRY_AFTER_S = 60;

/** The longest one backoff sleeps, in seconds. */
const MAX_DELAY_S = 5;

/**
 * What may be sent again after a failure.
 * - "idempotent": anything (transport errors, 429/502/503/504): the call may land twice harmlessly.
 * - "safe": only what certainly wrote nothing: a refused connection, a stale
 *   keep-alive socket, and answers whose code says nothing was written (`codes`).
 * @typedef {{mode: "idempotent"} | {mode: "safe", codes: ReadonlySet<string>}} RetryPolicy
 */

/** @type {RetryPolicy} */
export const IDEMPOTENT = Object.freeze({ mode: "idempotent" });

/**
 * A policy for a call that must not land twice: only failures that wrote
 * nothing are retried, among them answers with one of codes.
 * @param {...string} codes
 * @returns {RetryPolicy}
 */
export function safeOnly(...codes) {
  return Object.freeze({ mode: "safe", codes: new Set(codes) });
}

/** The request took longer than its timeout. */
export class RequestTimeout extends Error {
  constructor(ms) {
    super(`no answer within ${ms} ms`);
    this.code = "DTQ_REQUEST_TIMEOUT";
  }
}
RequestTimeout.prototype.name = "RequestTimeout";

/**
 * An HTTP client of one API: base URL, bearer token, retries.
 */
export class HTTP {
  /**
   * @param {{url: string, token?: string, retries?: number, timeout?: number, maxSockets?: number}} opts
   *   timeout: seconds one request may take (default 10); retries: how many
   *   times a failed call is sent again (default 6).
   */
  constructor({ url, token, retries = 6, timeout = 10, maxSockets = 64 }) {
    if (typeof url !== "string" || url === "") throw new TypeError("url is required, e.g. http://127.0.0.1:8080");
    const base = new URL(url);
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new TypeError(`url must be http:// or https://, not ${url}`);
    }
    this.base = url.replace(/\/+$/, "");
    this.token = token ?? "";
    this.retries = retries;
    this.timeout = timeout;
    this.transport = base.protocol === "https:" ? https : http;
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets });
  }

  /** Closes the idle keep-alive connections. */
  close() {
    this.agent.destroy();
  }

  /**
   * Sends one JSON request; returns the status, headers and parsed body of a
   * 2xx answer, and throws an APIError (or a transport error) otherwise: an
   * InvalidAnswer for a 2xx body that is not JSON or an answer over
   * MAX_BODY_BYTES. Redirects are not followed (a 3xx is an APIError
   * HTTP_3xx naming where it pointed), so the token goes nowhere else.
   * @param {string} method
   * @param {string} path starting with /
   * @param {{body?: unknown, headers?: Record<string,string>, timeout?: number, retry?: RetryPolicy | null, signal?: AbortSignal}} [opts]
   *   retry: null sends once; timeout: seconds for each try.
   * @returns {Promise<{status: number, headers: import("node:http").IncomingHttpHeaders, body: any}>}
   */
  async call(method, path, { body, headers, timeout, retry = IDEMPOTENT, signal } = {}) {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body), "utf8");
    const h = {
      Accept: "application/json",
      "User-Agent": `dtq-client-js/${VERSION}`,
      ...headers,
    };
    if (data !== undefined) {
      h["Content-Type"] = "application/json";
      h["Content-Length"] = String(data.length);
    }
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    const ms = Math.round((timeout ?? this.timeout) * 1000);
    let delay = 0.1;
    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted();
      let res;
      try {
        res = await this.#once(method, this.base + path, h, data, ms, signal);
      } catch (err) {
        if (err instanceof InvalidAnswer) throw err;
        if (signal?.aborted || attempt >= this.retries || !retry || !transportRetryable(err, retry)) throw err;
        await sleep(jitter(delay), signal);
        delay = Math.min(delay * 2, MAX_DELAY_S);
        continue;
      }
      if (res.status >= 200 && res.status < 300) {
        if (res.text !== "" && res.body === undefined) {
          throw new InvalidAnswer(`the answer is not JSON: ${JSON.stringify(res.text.slice(0, 200))}`, res.status);
        }
        return res;
      }
      const err = errorFor(res.status, res.body, res.text, retryAfter(res.headers));
      if (res.status >= 300 && res.status < 400) {
        const where = String(res.headers.location ?? "").slice(0, 200);
        err.message = err.apiMessage = `redirected to ${JSON.stringify(where)}; redirects are not followed: give the client the API's own url`;
      }
      if (attempt >= this.retries || !retry || !answerRetryable(err, retry)) throw err;
      await sleep(Math.max(jitter(delay), Math.min(err.retryAfter ?? 0, MAX_RETRY_AFTER_S)), signal);
      delay = Math.min(delay * 2, MAX_DELAY_S);
    }
  }

  /** One try: resolves with any answer, rejects on a transport failure. */
  #once(method, url, headers, data, ms, signal) {
    return new Promise((resolve, reject) => {
      const req = this.transport.request(url, { method, headers, agent: this.agent, signal });
      const timer = setTimeout(() => req.destroy(new RequestTimeout(ms)), ms);
      const fail = (err) => {
        clearTimeout(timer);
        // A request sent on a kept-alive socket the server had already
        // closed was not served: it is safe to send again.
        if (req.reusedSocket && (err.code === "ECONNRESET" || err.code === "EPIPE")) err.staleSocket = true;
        reject(err);
      };
      req.on("error", fail);
      req.on("response", (res) => {
        const chunks = [];
        let size = 0;
        const tooLarge = (what) =>
          new InvalidAnswer(`the answer is ${what}, more than the ${MAX_BODY_BYTES} bytes this client reads`, res.statusCode);
        res.on("error", fail);
        const length = Number(res.headers["content-length"]);
        if (length > MAX_BODY_BYTES) {
          // Refused unread: the announced length is enough.
          res.destroy(tooLarge(`${length} bytes`));
          return;
        }
        res.on("data", (c) => {
          size += c.length;
          if (size > MAX_BODY_BYTES) {
            res.destroy(tooLarge("longer"));
            return;
          }
          chunks.push(c);
        });
        res.on("end", () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed;
          if (text !== "") {
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text });
        });
      });
      req.end(data);
    });
  }
}

function transportRetryable(err, policy) {
  if (policy.mode === "idempotent") return true;
  return err?.code === "ECONNREFUSED" || err?.staleSocket === true;
}

function answerRetryable(err, policy) {
  if (policy.mode === "idempotent") return RETRY_STATUS.has(err.status);
  return policy.codes.has(err.code);
}

function retryAfter(headers) {
  const v = headers["retry-after"];
  return typeof v === "string" && /^\d+$/.test(v) ? Number(v) : undefined;
}

function jitter(s) {
  return s * (0.8 + Math.random() * 0.4);
}

/**
 * Resolves after s seconds, or rejects with the signal's reason once it aborts.
 * @param {number} s
 * @param {AbortSignal} [signal]
 */
export function sleep(s, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, s * 1000);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
