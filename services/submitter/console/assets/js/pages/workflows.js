// Workflows, newest first, filtered by state, name and business key
// (GET /v1/workflows), a page at a time with the API's cursor.

import { api, APIError, query } from '../api.js';
import { fill, fmtAgo, fmtTime, h, link, statusBadge, table, workflowStatuses } from '../dom.js';
import { filterForm } from './filters.js';

const filterNames = ['status', 'name', 'biz_key'];

export async function render(ctx) {
  const q = ctx.query;
  const filters = Object.fromEntries(filterNames.map((n) => [n, q.get(n)]));
  const form = filterForm('/workflows', q, [
    { name: 'status', label: 'State', options: workflowStatuses },
    { name: 'name', label: 'Name' },
    { name: 'biz_key', label: 'Business key' },
  ]);
  let list;
  try {
    list = await api('GET', '/v1/workflows' + query({ ...filters, cursor: q.get('cursor'), limit: 50 }));
  } catch (err) {
    // A refused filter keeps the form on the page, to be corrected.
    if (!(err instanceof APIError) || err.status !== 400 || !ctx.current()) throw err;
    fill(ctx.main, h('h1', { text: 'Workflows' }), form);
    ctx.fail(err);
    return;
  }
  if (!ctx.current()) return;
  const rows = list.workflows.map((w) => [
    link('/workflow/' + w.id, w.id),
    w.name,
    w.biz_key || '',
    statusBadge(w.status),
    String(w.open_steps),
    w.reason || '',
    h('span', { title: fmtTime(w.created_at), text: fmtAgo(w.created_at) }),
  ]);
  const next = list.next_cursor ? link('/workflows' + query({ ...filters, cursor: list.next_cursor }), 'Older →') : null;
  const first = q.get('cursor') ? link('/workflows' + query(filters), '← Newest') : null;
  fill(ctx.main,
    h('h1', { text: 'Workflows' }),
    form,
    table(['Workflow', 'Name', 'Business key', 'State', 'Open steps', 'Reason', 'Created'], rows, 'No workflow matches.'),
    h('p', { class: 'pager' }, first, ' ', next));
}
