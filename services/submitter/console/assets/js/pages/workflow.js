// A workflow: its state and why, its steps with their tasks and
// compensations, and a Cancel button while it still moves
// (GET /v1/workflows/{id}, POST /v1/workflows/{id}/cancel).

import { api } from '../api.js';
import { confirmButton, fill, fmtAgo, fmtTime, h, link, statusBadge, table, workflowMoving } from '../dom.js';

export async function render(ctx) {
  const id = ctx.params[0];
  let shown = await draw(ctx, id);
  if (!workflowMoving.includes(shown.status)) return;
  // Follow a workflow that still moves, and stop once it has ended. Redraw
  // only on a change: a redraw would disarm a Cancel clicked once. A step
  // moves without the workflow's updated_at changing, hence the steps.
  const version = (w) => w.status + w.updated_at + w.steps.map((s) => s.status + (s.compensation_status || '')).join();
  const stop = ctx.live(async () => {
    const w = await api('GET', `/v1/workflows/${id}`);
    if (!ctx.current()) return;
    if (version(w) !== version(shown)) shown = await draw(ctx, id);
    if (!workflowMoving.includes(shown.status)) stop();
  }, 3000);
}

async function draw(ctx, id) {
  const w = await api('GET', `/v1/workflows/${id}`);
  // Why each step is where it is comes from the lineage, which any step's
  // task answers for its whole workflow: the reason of its last transfer,
  // its last error and its attempts.
  const lineage = w.steps.length ? await api('GET', `/v1/tasks/${w.steps[0].task_id}/lineage`) : { tasks: [] };
  if (!ctx.current()) return w;
  const byTask = new Map(lineage.tasks.map((t) => [t.id, t]));
  fill(ctx.main,
    h('h1', {}, 'Workflow ', h('span', { class: 'mono', text: w.id }), ' ', statusBadge(w.status)),
    actions(ctx, w),
    details(w),
    h('h2', { text: 'Steps' }),
    steps(w.steps, byTask));
  return w;
}

function actions(ctx, w) {
  if (!workflowMoving.includes(w.status)) return null;
  return h('div', { class: 'actions' }, confirmButton('Cancel workflow', 'Really cancel?', async () => {
    try {
      const after = await api('POST', `/v1/workflows/${w.id}/cancel`);
      await draw(ctx, w.id);
      ctx.flash('ok', `Workflow ${after.id} cancelled.`);
    } catch (err) {
      ctx.fail(err);
    }
  }, 'danger'));
}

// failed are the states whose reason is a step's failure.
const failed = ['FAILED', 'COMPENSATING', 'COMPENSATION_FAILED', 'COMPENSATED'];

function details(w) {
  const row = (k, v) => (v === undefined || v === null || v === '' ? null : [h('dt', { text: k }), h('dd', {}, v)]);
  return h('dl', { class: 'details' },
    row('Name', link('/workflows?name=' + encodeURIComponent(w.name), w.name)),
    row('Business key', w.biz_key),
    row('Reason', w.reason ? h('span', { class: failed.includes(w.status) ? 'error-text' : '', text: w.reason }) : ''),
    row('Created', fmtTime(w.created_at)),
    row('Updated', `${fmtTime(w.updated_at)} (${fmtAgo(w.updated_at)})`));
}

// steps lists the steps in the order the workflow declared them, each
// with why it is in its state (byTask: the lineage's tasks by ID).
function steps(list, byTask) {
  return table(['Step', 'Task', 'Type', 'State', 'Depends on', 'When', 'Why', 'Compensation'], list.map((s) => [
    h('strong', { text: s.key }),
    link('/task/' + s.task_id, s.task_id),
    s.type,
    statusBadge(s.status),
    (s.depends_on || []).join(', '),
    s.depends_on && s.depends_on.length ? s.when || 'success' : '',
    why(byTask.get(s.task_id)),
    s.compensation_task_id
      ? [link('/task/' + s.compensation_task_id, s.compensation_task_id), ' ', s.compensation_status ? statusBadge(s.compensation_status) : null]
      : '',
  ]), 'This workflow has no steps.');
}

// why says what moved a step's task last and, when it ran, how often,
// where last, and the error it left.
function why(t) {
  if (!t) return '';
  const attempts = t.attempts || [];
  const last = attempts[attempts.length - 1];
  return h('div', { class: 'why' },
    h('div', { text: t.reason }),
    last ? h('div', { class: 'small muted', text: `${attempts.length} attempt${attempts.length === 1 ? '' : 's'}, last on ${last.node} at ${fmtTime(last.started_at)}` }) : null,
    t.last_error ? h('div', { class: 'small error-text', text: t.last_error }) : null);
}
