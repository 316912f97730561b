// The dashboard's entry point: sign-in, the shared event feed, and hash
// routing between pages. Each page module exports mount(root, ctx) and
// returns {destroy, onEvent, onReset}; pages refresh themselves from the
// events they care about, so nothing polls the whole page.

import {session, detectRole, onUnauthorized, APIError} from './api.js';
import {Feed} from './feed.js';
import {h, setText} from './dom.js';
import {signInView, showConnection, toast, errorToast} from './ui.js';
import * as overview from './pages/overview.js';
import * as tasks from './pages/tasks.js';
import * as task from './pages/task.js';
import * as queues from './pages/queues.js';
import * as dlq from './pages/dlq.js';
import * as workers from './pages/workers.js';
import * as schedules from './pages/schedules.js';
import * as workflows from './pages/workflows.js';
import * as workflow from './pages/workflow.js';
import * as events from './pages/events.js';

const ROUTES = [
  {re: /^\/?$/, page: overview, nav: 'overview', title: 'Overview'},
  {re: /^\/tasks\/([0-9a-f]{32})$/, page: task, nav: 'tasks', title: 'Task'},
  {re: /^\/tasks\/?$/, page: tasks, nav: 'tasks', title: 'Tasks'},
  {re: /^\/queues\/?$/, page: queues, nav: 'queues', title: 'Queues'},
  {re: /^\/dlq\/?$/, page: dlq, nav: 'dlq', title: 'Dead letters'},
  {re: /^\/workers\/?$/, page: workers, nav: 'workers', title: 'Workers'},
  {re: /^\/schedules\/?$/, page: schedules, nav: 'schedules', title: 'Schedules'},
  {re: /^\/workflows\/([0-9a-f]{32})$/, page: workflow, nav: 'workflows', title: 'Workflow'},
  {re: /^\/workflows\/?$/, page: workflows, nav: 'workflows', title: 'Workflows'},
  {re: /^\/events\/?$/, page: events, nav: 'events', title: 'Live events'},
];

// How many recent events the dashboard keeps for the live events page.
const RECENT_MAX = 1000;
// How far back the queue depth chart goes.
const DEPTH_HISTORY_MS = 15 * 60 * 1000;

const main = document.getElementById('main');

// app is what pages share: the session, the feed and recent events.
const app = {
  session,
  feed: null,
  recent: [],
  current: null,
  signedIn: false,
  // depthHistory is total queue depth sampled whenever a page read the
  // queues; the API keeps no depth history, so the chart starts with the
  // page.
  depthHistory: [],

  // recordDepth takes the live tasks over every queue (the queue list's
  // totals).
  recordDepth(depth) {
    const now = Date.now();
    const hist = this.depthHistory;
    hist.push({t: now, depth});
    while (hist.length > 2 && hist[1].t < now - DEPTH_HISTORY_MS) hist.shift();
    if (hist.length > 2000) hist.splice(0, hist.length - 2000);
  },

  // navigate changes the hash; the router does the rest.
  navigate(path, params) {
    const qs = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString() : '';
    const target = '#' + path + (qs ? '?' + qs : '');
    if (location.hash !== target) location.hash = target;
  },
};

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  return {path, params: new URLSearchParams(qs || '')};
}

function unmount() {
  if (app.current) {
    try { app.current.destroy?.(); } catch (e) { console.error(e); }
    app.current = null;
  }
  app.currentRoute = null;
}

// route shows the page of the current hash. It reports whether a new page
// was mounted (false when the same page only took new parameters).
function route() {
  if (!app.signedIn) return false;
  const {path, params} = parseHash();
  const r = ROUTES.find(r => r.re.test(path));
  const arg = r ? path.match(r.re)[1] : undefined;
  if (r && app.current && app.currentRoute === r && app.currentArg === arg && app.current.setParams) {
    app.current.setParams(params);
    return false;
  }
  unmount();
  app.currentRoute = r;
  app.currentArg = arg;
  main.replaceChildren();
  delete main.dataset.ready;
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (r && a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!r) {
    main.dataset.page = 'notfound';
    document.title = 'Not found · dtq';
    main.append(h('div', {class: 'card'}, h('h1', {}, 'Page not found'), h('p', {}, h('a', {href: '#/'}, 'Go to the overview'))));
    main.dataset.ready = 'true';
    return true;
  }
  main.dataset.page = r.page === task ? 'task' : r.page === workflow ? 'workflow' : r.nav;
  document.title = `${r.title} · dtq`;
  app.current = r.page.mount(main, {app, params, arg, setTitle: t => { document.title = `${t} · dtq`; }});
  return true;
}

function showRole() {
  const el = document.getElementById('role');
  const out = document.getElementById('signout');
  const labels = {admin: 'Admin', reader: 'Read-only', open: 'Open mode'};
  el.hidden = !session.role;
  el.dataset.role = session.role || '';
  setText(el, labels[session.role] || '');
  el.title = session.role === 'open'
    ? 'The server runs without API keys: anyone who can reach it may act'
    : session.role === 'reader' ? 'This key may read but not act' : 'This key may do everything';
  out.hidden = !session.key;
}

function startFeed() {
  if (app.feed) app.feed.stop();
  const feed = new Feed();
  app.feed = feed;
  feed.on('state', showConnection);
  feed.on('event', ev => {
    app.recent.push(ev);
    if (app.recent.length > RECENT_MAX) app.recent.splice(0, app.recent.length - RECENT_MAX);
    app.current?.onEvent?.(ev);
  });
  feed.on('reset', info => {
    toast(`Some events were trimmed before the dashboard read them (${info.queue || 'feed'}); the page was reloaded.`, 'info');
    app.current?.onReset?.(info);
  });
  feed.on('unauthorized', () => signOut('Your API key was refused. Sign in again.'));
  feed.start();
}

// Keep the "reconnecting in N s" countdown moving.
setInterval(() => { if (app.feed?.state === 'reconnecting') showConnection(app.feed); }, 1000);

function signOut(message, info = false) {
  app.signedIn = false;
  unmount();
  app.feed?.stop();
  app.feed = null;
  session.role = null;
  showRole();
  showSignIn(message, info);
}

function showSignIn(message, info = false) {
  main.dataset.page = 'signin';
  main.dataset.ready = 'true';
  document.title = 'Sign in · dtq';
  main.replaceChildren(signInView({
    message,
    info,
    onSubmit: async key => {
      if (!key) return 'Enter an API key.';
      session.setKey(key);
      try {
        await detectRole();
      } catch (e) {
        session.setKey('');
        if (e instanceof APIError && e.status === 401) return 'That key was not accepted.';
        return e.describe ? e.describe() : String(e);
      }
      signedIn();
      return '';
    },
  }));
}

function signedIn() {
  app.signedIn = true;
  showRole();
  startFeed();
  route();
}

async function start() {
  try {
    await detectRole();
  } catch (e) {
    if (e instanceof APIError && e.status === 401) {
      const had = !!session.key;
      session.setKey('');
      showSignIn(had ? 'Your saved API key was refused. Sign in again.' : '');
      return;
    }
    main.dataset.page = 'error';
    main.replaceChildren(h('div', {class: 'card error-box'},
      h('h1', {}, 'Cannot load the dashboard'),
      h('p', {}, e.describe ? e.describe() : String(e)),
      h('button', {class: 'btn btn-primary', type: 'button', onclick: () => start()}, 'Try again')));
    main.dataset.ready = 'true';
    return;
  }
  signedIn();
}

onUnauthorized(() => { if (app.signedIn) signOut('Your API key was refused. Sign in again.'); });
document.getElementById('signout').addEventListener('click', () => {
  session.setKey('');
  signOut('Signed out. The key was removed from this tab.', true);
});
window.addEventListener('hashchange', () => {
  if (route()) {
    window.scrollTo(0, 0);
    main.focus({preventScroll: true});
  }
});
window.addEventListener('unhandledrejection', e => {
  if (e.reason?.name === 'AbortError') { e.preventDefault(); return; }
  if (e.reason instanceof APIError) { e.preventDefault(); errorToast(e.reason); }
});

start();
