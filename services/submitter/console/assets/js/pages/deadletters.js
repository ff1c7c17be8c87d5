// Dead letters: tasks that failed for good and wait for an operator, newest
// first, each with a Re-run button (GET /v1/deadletters, POST
// /v1/deadletters/{id}/retry). The re-run is recorded under the key.

import { api, query } from '../api.js';
import { confirmButton, fill, fmtAgo, fmtTime, h, link, statusBadge, table } from '../dom.js';
import { bulkPanel } from './bulk.js';
import { filterForm, typeNames } from './filters.js';

export async function render(ctx) {
  const q = ctx.query;
  const [list, names] = await Promise.all([
    api('GET', '/v1/deadletters' + query({ type: q.get('type'), all: q.get('all'), before: q.get('before'), limit: 50 })),
    typeNames(),
  ]);
  if (!ctx.current()) return;
  const form = filterForm('/deadletters', q, [
    { name: 'type', label: 'Type', options: names },
    { name: 'all', label: 'Re-run ones too', checkbox: true },
  ]);
  const rows = list.dead_letters.map((d) => [
    h('span', { class: 'mono', text: d.id }),
    link('/task/' + d.task_id, d.task_id),
    d.type,
    statusBadge(d.status),
    String(d.attempt),
    h('span', { class: 'error-text clip', title: d.last_error, text: d.last_error }),
    h('span', { title: fmtTime(d.created_at), text: fmtAgo(d.created_at) }),
    d.retried_at ? h('span', { class: 'muted', text: `re-run ${fmtAgo(d.retried_at)} by ${d.retried_by}` }) : rerun(ctx, d),
  ]);
  const older = list.next_before ? link('/deadletters' + query({ type: q.get('type'), all: q.get('all'), before: list.next_before }), 'Older →') : null;
  fill(ctx.main,
    h('h1', { text: 'Dead letters' }),
    h('p', { class: 'muted', text: 'Tasks out of retries, or whose error was not retryable. A re-run puts the task back to READY with a fresh attempt.' }),
    form,
    bulkPanel(ctx, { path: '/v1/deadletters:retry', filter: q.get('type') ? { type: q.get('type') } : {}, verb: 'Re-run',
      past: 'Re-ran', noun: 'dead letters', onDone: () => render(ctx) }),
    table(['Letter', 'Task', 'Type', 'Ended', 'Attempt', 'Last error', 'Filed', ''], rows, 'No open dead letters.'),
    h('p', { class: 'pager' }, older));
}

function rerun(ctx, d) {
  return confirmButton('Re-run', 'Really re-run?', async () => {
    try {
      await api('POST', `/v1/deadletters/${d.id}/retry`);
      await render(ctx);
      ctx.flash('ok', `Task ${d.task_id} re-run from dead letter ${d.id}.`);
    } catch (err) {
      ctx.fail(err);
    }
  });
}
