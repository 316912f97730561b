// One workflow: its status and counts, its graph drawn by layers (or
// summarized per layer when too large to draw), followed live from the
// event feed, and the admin's Cancel.

import {api, APIError} from '../api.js';
import {TASK_STATUS_BY_EVENT, WORKFLOW_EVENTS} from '../feed.js';
import {h, add, setText, fmtInt, fmtTime, statusBadge, statusLabel, taskLink, STATUSES, TERMINAL} from '../dom.js';
import {DagView, LayerSummary, layout, statusBar, fillStatusBar, countsText, DRAW_MAX_NODES, DRAW_MAX_LAYER, DRAW_MAX_EDGES} from '../dag.js';
import {section, confirmAction, toast, errorToast, readOnlyNote} from '../ui.js';
import {refresher, errorBox, markReady, field} from './common.js';

const LIVE = new Set(['submitting', 'running']);

function dl(pairs) {
  return h('dl', {class: 'facts'}, pairs.filter(Boolean).map(([k, v, id]) => [h('dt', {}, k), h('dd', {id: id || null}, v)]));
}

// structureOf is what decides the drawing: refs and their deps. A status
// change keeps it; nodes added by a running node change it.
function structureOf(nodes) {
  return nodes.map(n => n.ref + '<' + (n.deps || []).join(',')).join('|');
}

export function mount(root, {app, arg: id, setTitle}) {
  const ctrl = new AbortController();
  const admin = app.session.canAdmin;
  let wf = null;
  let busy = false;
  let shape = '';
  let view = null; // DagView or LayerSummary
  const nodeByTask = new Map(); // task_id -> node (status kept current)
  setTitle(`Workflow ${id}`);

  const head = h('div', {class: 'task-head'});
  const actions = h('div', {class: 'page-actions'});
  const status = h('div', {class: 'page-status'});
  const facts = h('div', {class: 'wf-facts'});
  const countsBar = statusBar({}, 0, {width: 240, height: 10});
  const countsLine = h('p', {class: 'wf-counts', id: 'wf-counts'});
  const graphNote = h('p', {class: 'card-sub', id: 'wf-graph-note'});
  const graph = h('div', {id: 'wf-graph'});
  const legend = h('ul', {class: 'dag-legend', 'aria-label': 'Status colours'},
    STATUSES.map(st => h('li', {}, h('span', {class: 'dag-swatch', dataset: {status: st}, 'aria-hidden': 'true'}), statusLabel(st))));

  // Open a node by its ref: the way to a node's task when the graph is
  // summarized rather than drawn.
  const refInput = h('input', {id: 'wf-node-ref', type: 'search', placeholder: 'ref', autocomplete: 'off', spellcheck: 'false',
    class: 'mono', 'aria-describedby': 'wf-node-ref-error'});
  const refError = h('span', {class: 'form-error', id: 'wf-node-ref-error', role: 'alert'});
  const refForm = h('form', {class: 'inline-form', role: 'search', 'aria-label': 'Open a node by ref'},
    field('Node', refInput), h('button', {class: 'btn', type: 'submit', id: 'wf-node-open'}, 'Open task'), refError);
  refForm.addEventListener('submit', e => {
    e.preventDefault();
    const ref = refInput.value.trim();
    const n = wf?.nodes.find(x => x.ref === ref);
    if (!n) {
      setText(refError, ref ? `This workflow has no node ${ref}.` : 'Enter a node ref.');
      refInput.focus();
      return;
    }
    setText(refError, '');
    app.navigate(`/tasks/${n.task_id}`);
  });

  add(root,
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/workflows'}, 'Workflows'), ' / ', h('span', {class: 'mono'}, id)),
    h('div', {class: 'page-head'}, head, actions),
    admin ? null : readOnlyNote(),
    status,
    facts,
    h('section', {class: 'card', 'aria-labelledby': 'wf-graph-title'},
      h('div', {class: 'card-head'}, h('h2', {class: 'card-title', id: 'wf-graph-title'}, 'Graph'), refForm),
      graphNote, legend, graph));

  function renderHead() {
    head.replaceChildren(
      h('h1', {class: 'task-title'}, h('span', {class: 'task-type'}, wf.name || 'Workflow'), ' ', statusBadge(wf.status),
        wf.cancel_requested && LIVE.has(wf.status) ? h('span', {class: 'badge st-retrying', id: 'wf-cancel-requested'}, 'cancel requested') : null),
      h('p', {class: 'task-id mono'}, wf.workflow_id));
    head.querySelector('.badge').id = 'wf-status';
    renderActions();
  }

  function renderActions() {
    if (!admin || !wf) { actions.replaceChildren(); return; }
    if (!LIVE.has(wf.status)) { actions.replaceChildren(); return; }
    const focused = document.activeElement?.id;
    const b = h('button', {class: 'btn btn-danger', type: 'button', id: 'wf-cancel', dataset: {admin: ''},
      disabled: busy || wf.cancel_requested, onclick: cancel}, wf.cancel_requested ? 'Cancel requested' : 'Cancel workflow');
    actions.replaceChildren(b);
    if (focused === 'wf-cancel') b.focus();
  }

  // counts is the number of nodes per status, from the nodes as the page
  // knows them (kept current by events), so that it agrees with the graph.
  function counts() {
    const c = {};
    for (const n of nodeByTask.values()) c[n.status] = (c[n.status] || 0) + 1;
    return c;
  }

  function renderCounts() {
    const c = counts();
    fillStatusBar(countsBar, c, nodeByTask.size);
    setText(countsLine, countsText(c));
    countsLine.dataset.counts = JSON.stringify(c);
  }

  function renderFacts() {
    facts.replaceChildren(section('Workflow', dl([
      ['Nodes', fmtInt(wf.nodes.length), 'wf-nodes'],
      ['Status of nodes', h('div', {class: 'wf-counts-cell'}, countsBar, countsLine)],
      ['Created', fmtTime(wf.created_at, true)],
      ['Finished', wf.finished_at ? fmtTime(wf.finished_at, true) : LIVE.has(wf.status) ? 'not yet' : '—'],
      wf.on_failure_task_id ? ['On failure', taskLink(wf.on_failure_task_id), 'wf-on-failure'] : null,
    ])));
    renderCounts();
  }

  function renderGraph() {
    const lay = layout(wf.nodes);
    graph.dataset.layers = String(lay.order.length);
    if (lay.fits) {
      view = new DagView(wf.nodes, lay);
      graph.dataset.mode = 'drawn';
      graph.dataset.crossings = String(lay.crossings);
      setText(graphNote, `${fmtInt(wf.nodes.length)} nodes in ${lay.order.length} layers, by dependency depth. A node opens its task.`);
    } else {
      view = new LayerSummary(wf.nodes, lay);
      graph.dataset.mode = 'summary';
      delete graph.dataset.crossings;
      setText(graphNote, `${fmtInt(wf.nodes.length)} nodes in ${fmtInt(lay.order.length)} layers (widest ${fmtInt(lay.widest)}, ` +
        `${fmtInt(lay.edges)} edges): too large to draw node by node (a drawing shows up to ${fmtInt(DRAW_MAX_NODES)} nodes, ` +
        `${fmtInt(DRAW_MAX_LAYER)} per layer and ${fmtInt(DRAW_MAX_EDGES)} edges), so each layer's nodes are counted by status.`);
    }
    graph.replaceChildren(view.el);
  }

  // setNode moves one node to a status: the graph, the counts.
  function setNode(taskID, st, errorClass) {
    const n = nodeByTask.get(taskID);
    if (!n) return;
    const ec = errorClass ?? n.error_class ?? '';
    if (n.status !== st || (n.error_class ?? '') !== ec) {
      n.status = st;
      n.error_class = ec;
      view?.setStatus(taskID, st, ec);
    }
  }

  function render(next) {
    wf = next;
    renderHead();
    const s = structureOf(wf.nodes);
    if (s !== shape) {
      shape = s;
      nodeByTask.clear();
      for (const n of wf.nodes) nodeByTask.set(n.task_id, {...n});
      renderGraph();
    } else {
      for (const n of wf.nodes) setNode(n.task_id, n.status, n.error_class || '');
    }
    renderFacts();
  }

  async function load() {
    try {
      render(await api(`workflows/${id}`, {signal: ctrl.signal}));
      status.replaceChildren();
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e instanceof APIError && e.status === 404) {
        wf = null;
        head.replaceChildren(h('h1', {}, 'Workflow not found'));
        actions.replaceChildren();
        facts.replaceChildren(h('div', {class: 'card', id: 'wf-missing'},
          h('p', {}, 'No workflow has this id, or its retention has passed.'),
          h('p', {}, h('a', {href: '#/workflows'}, 'Back to the workflows'))));
      } else {
        status.replaceChildren(errorBox(e, () => refresh.now()));
      }
    }
    markReady(root);
  }

  async function cancel() {
    const yes = await confirmAction({
      title: 'Cancel this workflow?',
      body: [h('p', {}, 'Every node that has not ended is cancelled: waiting, pending and queued nodes will not run, ',
        'and running ones are told to stop (each ends cancelled if its handler returns an error, succeeded if it finishes anyway).'),
      h('p', {}, `The workflow ends cancelled once its last node has ended. This cannot be undone.`)],
      confirm: 'Cancel workflow',
      danger: true,
    });
    if (!yes) return;
    busy = true;
    renderActions();
    try {
      const res = await api(`workflows/${id}/cancel`, {method: 'POST'});
      toast(res.workflow?.status === 'cancelled' ? 'Workflow cancelled' : 'Workflow cancel requested: its nodes are being cancelled', 'ok');
    } catch (e) {
      errorToast(e);
    } finally {
      busy = false;
      await refresh.now();
    }
  }

  const refresh = refresher(load, {wait: 500, maxWait: 2500});
  refresh.now();

  return {
    onEvent(ev) {
      if (WORKFLOW_EVENTS.has(ev.type)) {
        if (ev.metadata?.workflow_id === id) refresh.soon();
        return;
      }
      if (!ev.task_id || !nodeByTask.has(ev.task_id)) return;
      const st = TASK_STATUS_BY_EVENT[ev.type];
      if (!st) return;
      // Shown at once; the read that follows brings what events do not
      // carry (error classes, nodes a running node added). The feed can be
      // behind a read: an event that would take an ended node back to a
      // live status is left to that read.
      if (!(TERMINAL.has(nodeByTask.get(ev.task_id).status) && !TERMINAL.has(st))) setNode(ev.task_id, st);
      renderCounts();
      refresh.soon();
    },
    onReset() { refresh.now(); },
    destroy() {
      ctrl.abort();
      refresh.stop();
    },
  };
}
