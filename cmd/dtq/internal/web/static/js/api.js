// The dashboard's only way to the server: the public HTTP API. URLs are
// relative to the page, so the dashboard also works behind a proxy that
// serves dtq under a path prefix.

const KEY_STORAGE = 'dtq.apiKey';

// session holds the API key (kept in sessionStorage: it lives as long as the
// tab and is never written to disk by the page) and the role found for it.
export const session = {
  key: sessionStorage.getItem(KEY_STORAGE) || '',
  // role is 'admin', 'reader' (any key that may read but not administer)
  // or 'open' (the server runs without keys: everything is allowed).
  role: null,
  get canAdmin() { return this.role === 'admin' || this.role === 'open'; },
  setKey(k) {
    this.key = k;
    if (k) sessionStorage.setItem(KEY_STORAGE, k); else sessionStorage.removeItem(KEY_STORAGE);
  },
};

// APIError is an error answer in the API's envelope, or a network failure
// (status 0).
export class APIError extends Error {
  constructor(status, code, message, details, requestID) {
    super(message);
    this.name = 'APIError';
    this.status = status;
    this.code = code;
    this.details = details || {};
    this.requestID = requestID || '';
  }

  // describe is a plain sentence for people.
  describe() {
    switch (this.status) {
      case 0: return `Cannot reach the dtq API server: ${this.message}`;
      case 401: return `Not signed in: ${this.message}`;
      case 403: return `Not allowed: ${this.message}`;
    }
    const id = this.requestID ? ` (request ${this.requestID})` : '';
    return `${this.code || 'HTTP ' + this.status}: ${this.message}${id}`;
  }
}

const listeners = {unauthorized: new Set()};

// onUnauthorized registers fn to run whenever the server answers 401.
export function onUnauthorized(fn) { listeners.unauthorized.add(fn); }

export function authHeaders() {
  return session.key ? {Authorization: `Bearer ${session.key}`} : {};
}

function buildURL(path, query) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const qs = q.toString();
    if (qs) url += '?' + qs;
  }
  return url;
}

async function errorFrom(res) {
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  if (body && typeof body === 'object' && body.code) {
    return new APIError(res.status, body.code, body.message || res.statusText, body.details, body.request_id);
  }
  return new APIError(res.status, '', res.statusText || `HTTP ${res.status}`, {}, res.headers.get('X-Request-ID'));
}

// request calls the server. path is relative to the page ("api/v1/tasks",
// "ready"); body, when given, is sent as JSON. It resolves to the decoded
// answer (null for 204) or rejects with an APIError.
export async function request(path, {method = 'GET', query, body, signal} = {}) {
  const headers = {Accept: 'application/json', ...authHeaders()};
  // The dashboard's reads are mostly polling: the header lets the server
  // log them at DEBUG rather than fill its log at INFO.
  if (method === 'GET') headers['Dtq-Client'] = 'dashboard';
  const init = {method, headers, signal, cache: 'no-store', credentials: 'omit'};
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(buildURL(path, query), init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new APIError(0, 'NETWORK', e.message || 'network error');
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401) for (const fn of listeners.unauthorized) fn(err);
    throw err;
  }
  if (res.status === 204) return null;
  return res.json();
}

// api calls a route under api/v1.
export function api(path, opts) { return request('api/v1/' + path, opts); }

// ready asks GET /ready: {ok, message}. It never rejects.
export async function ready(signal) {
  try {
    await request('ready', {signal});
    return {ok: true, message: 'Redis reachable, scripts loaded, noeviction'};
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    return {ok: false, message: e.message || 'not ready'};
  }
}

// detectRole finds what the current key may do. An admin key (or open mode)
// may read the audit log; a valid key that may not is treated as a reader.
// It rejects with the 401 APIError when the key is missing or wrong.
export async function detectRole() {
  try {
    await api('audit', {query: {limit: 1}});
    session.role = session.key ? 'admin' : 'open';
  } catch (e) {
    if (!(e instanceof APIError) || e.status === 401 || e.status === 0) throw e;
    session.role = 'reader'; // 403, or an API without the audit log
  }
  return session.role;
}

// listAll follows next_cursor through a list endpoint, up to max items.
export async function listAll(path, query, {max = 10000, signal} = {}) {
  const items = [];
  let cursor = '';
  for (;;) {
    const page = await api(path, {query: {...query, limit: 1000, cursor}, signal});
    items.push(...page.items);
    if (!page.next_cursor || items.length >= max) return {items, more: !!page.next_cursor};
    cursor = page.next_cursor;
  }
}
