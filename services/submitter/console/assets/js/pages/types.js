// Task types: their settings, how many tasks each holds per state (from
// GET /v1/stats when the server has it), Pause/Resume and a form for the
// limits (PUT /v1/types/{name}, recorded under the key).

import { api } from '../api.js';
import { fill, fmtTime, h, link, statusBadge, table } from '../dom.js';
import { loadStats } from './stats.js';

export async function render(ctx) {
  const [list, stats] = await Promise.all([api('GET', '/v1/types'), loadStats()]);
  if (!ctx.current()) return;
  const rows = list.types.map((t) => [
    link('/tasks?type=' + encodeURIComponent(t.name), t.name),
    t.paused ? h('span', { class: 'badge paused', text: 'paused' }) : h('span', { class: 'badge running', text: 'running' }),
    t.concurrency ? String(t.concurrency) : 'unlimited',
    t.timeout,
    String(t.max_retries),
    t.priority,
    `${t.backoff_base} … ${t.backoff_cap}`,
    sizes(stats, t.name),
    h('div', { class: 'row-actions' }, pauseButton(ctx, t), limitsForm(ctx, t)),
  ]);
  fill(ctx.main,
    h('h1', { text: 'Task types' }),
    h('p', { class: 'muted', text: 'Types are registered by the executors that serve them. A paused type keeps its tasks but dispatches none until resumed.' }),
    table(['Type', 'State', 'Concurrency', 'Timeout', 'Retries', 'Priority', 'Backoff', 'Tasks', ''], rows, 'No task type is registered: start an executor.'),
    stats ? h('p', { class: 'muted small', text: `Task counts as of ${fmtTime(new Date(stats.at).toISOString())}; the server counts again every few seconds.` }) : null);
}

// sizes shows a type's task counts by state, largest first.
function sizes(stats, name) {
  if (!stats) return h('span', { class: 'muted', text: '—' });
  const counts = stats.byType[name] || {};
  const parts = Object.entries(counts).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  if (parts.length === 0) return h('span', { class: 'muted', text: 'none' });
  return h('span', { class: 'sizes' }, parts.map(([st, n]) => h('span', { class: 'size' }, statusBadge(st), ' ' + n)));
}

async function update(ctx, name, body, done) {
  try {
    await api('PUT', '/v1/types/' + encodeURIComponent(name), body);
    await render(ctx);
    ctx.flash('ok', done);
  } catch (err) {
    ctx.fail(err);
  }
}

function pauseButton(ctx, t) {
  const label = t.paused ? 'Resume' : 'Pause';
  return h('button', { type: 'button', class: t.paused ? '' : 'warn', text: label, 'data-type': t.name,
    onclick: () => update(ctx, t.name, { paused: !t.paused }, `${t.name} ${t.paused ? 'resumed' : 'paused'}.`) });
}

// limitsForm edits concurrency, timeout and retries; only changed fields
// are sent, so a concurrent change of another field is kept.
function limitsForm(ctx, t) {
  const conc = h('input', { type: 'number', min: '0', name: 'concurrency', value: String(t.concurrency), title: '0 means unlimited' });
  const timeout = h('input', { type: 'text', name: 'timeout', value: t.timeout, size: '6' });
  const retries = h('input', { type: 'number', min: '0', name: 'max_retries', value: String(t.max_retries) });
  const form = h('form', { class: 'limits' },
    h('label', {}, 'Concurrency', conc), h('label', {}, 'Timeout', timeout), h('label', {}, 'Retries', retries),
    h('button', { type: 'submit', text: 'Save' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const body = {};
    if (conc.value !== String(t.concurrency)) body.concurrency = Number(conc.value);
    if (timeout.value.trim() !== t.timeout) body.timeout = timeout.value.trim();
    if (retries.value !== String(t.max_retries)) body.max_retries = Number(retries.value);
    if (Object.keys(body).length === 0) {
      ctx.flash('ok', 'Nothing changed.');
      return;
    }
    update(ctx, t.name, body, `${t.name} limits saved.`);
  });
  return h('details', { 'data-type': t.name }, h('summary', { text: 'Limits' }), form);
}
