// Shared interface pieces: notices, the confirmation dialog, the sign-in
// form and the connection indicator.

import {h, setText} from './dom.js';

// toast shows a short notice; kind is 'ok', 'error' or 'info'. Errors stay
// until dismissed, the others fade after a few seconds.
export function toast(text, kind = 'info') {
  const box = document.getElementById('toasts');
  const close = h('button', {class: 'toast-close', type: 'button', 'aria-label': 'Dismiss'}, '×');
  const el = h('div', {class: `toast toast-${kind}`}, h('span', {class: 'toast-text'}, text), close);
  close.addEventListener('click', () => el.remove());
  box.appendChild(el);
  while (box.children.length > 4) box.firstElementChild.remove();
  if (kind !== 'error') setTimeout(() => el.remove(), 5000);
  return el;
}

// errorToast shows an API error plainly (401 and 403 included).
export function errorToast(err, what) {
  const msg = typeof err?.describe === 'function' ? err.describe() : (err?.message || String(err));
  return toast(what ? `${what}: ${msg}` : msg, 'error');
}

// settleAsked answers the question confirmAction last asked while its close
// event has not arrived; null when none is waiting.
let settleAsked = null;

// confirmAction asks before a destructive action, with a native modal
// dialog (focus is trapped and Escape cancels). body may be text or nodes.
// It resolves to true when the action is confirmed.
export function confirmAction({title, body, confirm = 'Confirm', danger = false}) {
  const dlg = document.getElementById('confirm');
  if (dlg.open) return Promise.resolve(false); // one question at a time
  // The close event is fired later, as a task: the previous question's can
  // still be on its way when this one opens. That question is answered now,
  // with the answer its own close left, so that this question's answer is
  // never taken for it.
  settleAsked?.();
  setText(document.getElementById('confirm-title'), title);
  const bodyEl = document.getElementById('confirm-body');
  bodyEl.replaceChildren(...(Array.isArray(body) ? body : [typeof body === 'string' ? h('p', {}, body) : body]));
  const ok = document.getElementById('confirm-ok');
  setText(ok, confirm);
  ok.className = danger ? 'btn btn-danger' : 'btn btn-primary';
  dlg.returnValue = '';
  return new Promise(resolve => {
    const settle = () => {
      dlg.removeEventListener('close', onClose);
      if (settleAsked === settle) settleAsked = null;
      resolve(dlg.returnValue === 'ok');
    };
    const onClose = () => {
      if (!dlg.open) settle();
    };
    settleAsked = settle;
    dlg.addEventListener('close', onClose);
    dlg.showModal();
    document.getElementById('confirm-cancel').focus();
  });
}

// signInView is the form shown when the server answers 401. message is
// shown above the button (as a plain notice when info is set). onSubmit gets
// the key and resolves to an error message, or '' on success.
export function signInView({message, info = false, onSubmit}) {
  const err = h('p', {class: info ? 'form-error form-info' : 'form-error', id: 'signin-error', role: 'alert'}, message || '');
  const input = h('input', {
    id: 'signin-key', type: 'password', name: 'key', autocomplete: 'current-password',
    required: true, spellcheck: 'false', 'aria-describedby': 'signin-help signin-error',
  });
  const submit = h('button', {class: 'btn btn-primary', id: 'signin-submit', type: 'submit'}, 'Sign in');
  const form = h('form', {class: 'signin card', 'aria-labelledby': 'signin-title'},
    h('h1', {id: 'signin-title'}, 'Sign in to dtq'),
    h('p', {id: 'signin-help', class: 'muted'},
      'This server requires an API key. It is kept for this browser tab only (session storage) and sent as ',
      h('code', {}, 'Authorization: Bearer'), '.'),
    h('label', {for: 'signin-key'}, 'API key'),
    input,
    err,
    h('div', {class: 'form-actions'}, submit));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    submit.disabled = true;
    setText(err, '');
    const msg = await onSubmit(input.value.trim());
    submit.disabled = false;
    if (msg) {
      err.classList.remove('form-info');
      setText(err, msg);
      input.focus();
      input.select();
    }
  });
  queueMicrotask(() => input.focus());
  return h('div', {class: 'signin-wrap'}, form);
}

// showConnection reflects a feed's state in the top bar.
export function showConnection(feed) {
  const el = document.getElementById('conn');
  const text = el.querySelector('.conn-text');
  el.dataset.state = feed.state;
  let label;
  switch (feed.state) {
    case 'live': label = 'Live'; break;
    case 'connecting': label = 'Connecting…'; break;
    case 'reconnecting': {
      const s = Math.max(0, Math.ceil((feed.retryAt - Date.now()) / 1000));
      label = s > 0 ? `Reconnecting in ${s} s` : 'Reconnecting…';
      break;
    }
    case 'unauthorized': label = 'Signed out'; break;
    default: label = 'Not connected';
  }
  setText(text, label);
  el.title = feed.state === 'live' ? 'Receiving live events' : 'Live events are not flowing; the page shows the last known state';
}

// pageHeader is the title row of a page, with optional actions on the right.
export function pageHeader(title, ...actions) {
  return h('div', {class: 'page-head'}, h('h1', {}, title), h('div', {class: 'page-actions'}, actions));
}

// section is a titled card.
export function section(title, ...children) {
  return h('section', {class: 'card'}, title ? h('h2', {class: 'card-title'}, title) : null, children);
}

// readOnlyNote explains why actions are missing for a reader key.
export function readOnlyNote() {
  return h('p', {class: 'note', id: 'read-only-note'},
    'Read-only: this key may look but not act. Sign in with an admin key to pause queues, cancel tasks or requeue dead letters.');
}
