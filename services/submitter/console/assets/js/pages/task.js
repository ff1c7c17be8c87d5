// A task: its settings and state, a Cancel button while it can still be
// cancelled, and its lifecycle as a timeline read top-down: every transfer
// with the time, the states, the attempt, the reason, who moved it and on
// which node (GET /v1/tasks/{id} and /history).

import { api } from '../api.js';
import { confirmButton, fill, finished, fmtAgo, fmtDelta, fmtTime, h, link, parseActor, statusBadge } from '../dom.js';

export async function render(ctx) {
  const id = ctx.params[0];
  let shown = await draw(ctx, id);
  // Follow a task that is still moving; redraw only when it changed (a
  // progress report does not change updated_at).
  const version = (t) => t.updated_at + (t.progress ? t.progress.at : '');
  ctx.live(async () => {
    const t = await api('GET', `/v1/tasks/${id}`);
    if (ctx.current() && version(t) !== version(shown)) shown = await draw(ctx, id);
  }, 3000);
}

async function draw(ctx, id) {
  const [t, hist, letters] = await Promise.all([
    api('GET', `/v1/tasks/${id}`),
    api('GET', `/v1/tasks/${id}/history`),
    api('GET', `/v1/deadletters?task_id=${id}`),
  ]);
  if (!ctx.current()) return t;
  fill(ctx.main,
    h('h1', {}, 'Task ', h('span', { class: 'mono', text: t.id }), ' ', statusBadge(t.status)),
    actions(ctx, t),
    letters.dead_letters.map((d) => deadLetter(ctx, t, d)),
    details(t),
    h('h2', { text: 'Lifecycle' }),
    timeline(hist.history));
  return t;
}

function actions(ctx, t) {
  if (finished.includes(t.status)) return null;
  return h('div', { class: 'actions' }, confirmButton('Cancel task', 'Really cancel?', async () => {
    try {
      const after = await api('POST', `/v1/tasks/${t.id}/cancel`);
      await draw(ctx, t.id);
      ctx.flash('ok', `Task ${after.id} cancelled.`);
    } catch (err) {
      ctx.fail(err);
    }
  }, 'danger'));
}

// deadLetter shows an open dead letter of the task, with its Re-run.
function deadLetter(ctx, t, d) {
  return h('div', { class: 'flash error dead-letter' },
    `Filed as dead letter ${d.id} ${fmtAgo(d.created_at)}: it waits for an operator. `,
    confirmButton('Re-run', 'Really re-run?', async () => {
      try {
        await api('POST', `/v1/deadletters/${d.id}/retry`);
        await draw(ctx, t.id);
        ctx.flash('ok', `Task ${t.id} re-run from dead letter ${d.id}.`);
      } catch (err) {
        ctx.fail(err);
      }
    }));
}

function details(t) {
  const row = (k, v) => (v === undefined || v === null || v === '' ? null : [h('dt', { text: k }), h('dd', {}, v)]);
  return h('dl', { class: 'details' },
    row('Type', link('/tasks?type=' + encodeURIComponent(t.type), t.type)),
    row('Priority', t.priority),
    row('Business key', t.biz_key),
    row('Workflow', t.workflow_id ? link('/workflow/' + t.workflow_id, t.workflow_id) : ''),
    row('Attempt', String(t.attempt)),
    row('Retries', `${t.retry_count} of ${t.max_retries}`),
    row('Timeout', t.timeout),
    row('Next run', `${fmtTime(t.next_run_time)} (${fmtAgo(t.next_run_time)})`),
    row('Executor', t.executor ? link('/nodes', t.executor) : ''),
    row('Trace', t.trace_id ? h('code', { class: 'trace', text: t.trace_id, title: 'the trace every span of this task joins' }) : ''),
    row('Created', fmtTime(t.created_at)),
    row('Updated', `${fmtTime(t.updated_at)} (${fmtAgo(t.updated_at)})`),
    row('Progress', t.progress ? progress(t.progress) : ''),
    row('Last error', t.last_error ? h('span', { class: 'error-text', text: t.last_error }) : ''),
    row('Result', t.result === undefined ? '' : h('pre', { text: JSON.stringify(t.result, null, 2) })),
    row('Payload', t.payload === undefined ? '' : h('pre', { text: JSON.stringify(t.payload, null, 2) })));
}

// progress is what the handler last reported of a long run.
function progress(p) {
  return h('span', { class: 'progress' },
    h('progress', { max: '100', value: String(p.percent) }), ` ${p.percent} %`,
    p.message ? [' — ', p.message] : null,
    h('span', { class: 'muted', text: ` (reported ${fmtAgo(p.at)})` }));
}

// timeline lists the transfers oldest first, each with its time since the
// task was created.
function timeline(entries) {
  const first = entries.length ? entries[0].at : null;
  return h('ol', { class: 'timeline' }, entries.map((e) => {
    const { who, node } = parseActor(e.actor);
    return h('li', { class: 'transfer' },
      h('div', { class: 'when' }, h('time', { datetime: e.at, text: fmtTime(e.at) }), h('span', { class: 'muted', text: fmtDelta(first, e.at) })),
      h('div', { class: 'what' },
        h('div', { class: 'states' }, e.from ? [statusBadge(e.from), ' → '] : 'created ', statusBadge(e.to),
          h('span', { class: 'muted', text: ` attempt ${e.attempt}` })),
        h('div', { class: 'reason', text: e.reason }),
        h('div', { class: 'actor' }, 'by ', h('strong', { text: who }),
          node ? [' on node ', h('strong', { class: 'node', text: node })] : null)));
  }));
}
