// Tasks, newest first, filtered by type, state, business key, node and
// creation time (GET /v1/tasks), a page at a time with the API's cursor.

import { api, query } from '../api.js';
import { fill, fmtAgo, fmtTime, h, link, statusBadge, statuses, table } from '../dom.js';
import { bulkPanel } from './bulk.js';
import { filterForm, typeNames } from './filters.js';

const filterNames = ['type', 'status', 'biz_key', 'node', 'created_after', 'created_before'];

// A bulk cancel must name one of these states (the API reads its index).
const cancellable = ['READY', 'RUNNING', 'SUSPEND', 'RETRYING'];

// A datetime-local field holds local time without zone; the API wants
// RFC 3339.
const toRFC3339 = (v) => (v ? new Date(v).toISOString() : '');
const toLocal = (iso) => {
  const d = new Date(iso);
  if (!iso || isNaN(d)) return '';
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
};

export async function render(ctx) {
  const q = ctx.query;
  const filters = Object.fromEntries(filterNames.map((n) => [n, q.get(n)]));
  const [list, names] = await Promise.all([
    api('GET', '/v1/tasks' + query({ ...filters, cursor: q.get('cursor'), limit: 50 })),
    typeNames(),
  ]);
  if (!ctx.current()) return;
  const form = filterForm('/tasks', q, [
    { name: 'type', label: 'Type', options: names },
    { name: 'status', label: 'State', options: statuses },
    { name: 'biz_key', label: 'Business key' },
    { name: 'node', label: 'Node' },
    { name: 'created_after', label: 'Created after', type: 'datetime-local', toQuery: toRFC3339, fromQuery: toLocal },
    { name: 'created_before', label: 'Created before', type: 'datetime-local', toQuery: toRFC3339, fromQuery: toLocal },
  ]);
  const rows = list.tasks.map((t) => [
    link('/task/' + t.id, t.id),
    t.type,
    statusBadge(t.status),
    t.biz_key || '',
    String(t.attempt),
    t.executor || '',
    h('span', { title: fmtTime(t.created_at), text: fmtAgo(t.created_at) }),
    h('span', { title: fmtTime(t.updated_at), text: fmtAgo(t.updated_at) }),
  ]);
  const next = list.next_cursor ? link('/tasks' + query({ ...filters, cursor: list.next_cursor }), 'Older →') : null;
  const first = q.get('cursor') ? link('/tasks' + query(filters), '← Newest') : null;
  const bulk = cancellable.includes(filters.status)
    ? bulkPanel(ctx, { path: '/v1/tasks:cancel', filter: bulkFilter(filters), verb: 'Cancel', past: 'Cancelled', noun: 'tasks', onDone: () => render(ctx) })
    : h('p', { class: 'muted small', text: `To cancel many tasks at once, filter by one state of ${cancellable.join(', ')}.` });
  fill(ctx.main,
    h('h1', { text: 'Tasks' }),
    form,
    bulk,
    table(['Task', 'Type', 'State', 'Business key', 'Attempt', 'Executor', 'Created', 'Updated'], rows, 'No task matches.'),
    h('p', { class: 'pager' }, first, ' ', next));
}

// bulkFilter is the list's filter without its empty fields.
function bulkFilter(filters) {
  return Object.fromEntries(Object.entries(filters).filter(([, v]) => v));
}
