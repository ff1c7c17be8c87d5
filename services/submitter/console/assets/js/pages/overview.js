// The overview: throughput, backlog per lane, failures and the newest dead
// letters, refreshed every few seconds. Throughput is the change of the
// finished-task counts between two refreshes, so it shows from the second
// refresh on.

import { api } from '../api.js';
import { fill, finished, fmtAgo, fmtTime, h, link, statusBadge, statuses, table, workflowStatuses } from '../dom.js';
import { loadStats } from './stats.js';

const refreshMs = 5000;
let previous = null; // the last stats sample, for throughput

export async function render(ctx) {
  await draw(ctx);
  ctx.live(() => draw(ctx), refreshMs);
}

async function draw(ctx) {
  const [stats, letters, types, nodes] = await Promise.all([
    loadStats(),
    api('GET', '/v1/deadletters?limit=10'),
    api('GET', '/v1/types'),
    api('GET', '/v1/nodes').catch(() => null), // a submitter without a registry answers 503
  ]);
  if (!ctx.current()) return;
  const live = nodes ? nodes.nodes.filter((n) => n.alive) : [];
  const paused = types.types.filter((t) => t.paused).map((t) => t.name);
  fill(ctx.main,
    h('h1', { text: 'Overview' }),
    h('div', { class: 'cards' },
      card('Throughput', throughput(stats), previous && previous.rated ? 'tasks finished per second' : 'tasks finished per second, from the next refresh on'),
      card('Backlog', stats ? String(stats.lanes.reduce((n, l) => n + l.backlog, 0)) : '—', 'due and not running yet'),
      card('Waiting', stats ? count(stats.totals, ['READY', 'RETRYING']) : '—', 'ready or retrying, due or not'),
      card('Running', stats ? count(stats.totals, ['RUNNING']) : '—', nodes ? `on ${live.length} live nodes` : ''),
      card('Failed', stats ? count(stats.totals, ['FAILED', 'TIMEOUT']) : '—', 'failed or timed out', 'bad'),
      card('Dead letters', letters.next_before ? '10+' : String(letters.dead_letters.length), 'open, waiting for an operator',
        letters.dead_letters.length ? 'bad' : ''),
      card('Paused types', String(paused.length), paused.join(', ') || 'none')),
    stats ? lanes(stats) : h('p', { class: 'muted', text: 'This server does not serve GET /v1/stats, so counts are not shown.' }),
    stats ? byType(stats) : null,
    stats ? workflows(stats) : null,
    h('h2', {}, 'Recent dead letters ', link('/deadletters', 'all →')),
    table(['Task', 'Type', 'Ended', 'Last error', 'Filed'], letters.dead_letters.map((d) => [
      link('/task/' + d.task_id, d.task_id), d.type, statusBadge(d.status),
      h('span', { class: 'error-text clip', title: d.last_error, text: d.last_error }),
      h('span', { title: fmtTime(d.created_at), text: fmtAgo(d.created_at) }),
    ]), 'No open dead letters.'),
    h('p', { class: 'muted small', text: `Refreshed ${fmtTime(new Date().toISOString())}, every ${refreshMs / 1000} s.` }));
}

function card(title, value, note, tone) {
  return h('div', { class: 'card ' + (tone && value !== '0' && value !== '—' ? tone : '') },
    h('div', { class: 'card-title', text: title }),
    h('div', { class: 'card-value', text: value }),
    h('div', { class: 'card-note', text: note || '' }));
}

function count(totals, states) {
  return String(states.reduce((n, s) => n + (totals[s] || 0), 0));
}

function throughput(stats) {
  if (!stats) return '—';
  const done = finished.reduce((n, s) => n + (stats.totals[s] || 0), 0);
  const prev = previous;
  previous = { done, at: stats.at, rated: !!prev && stats.at > prev.at };
  if (!previous.rated) return '…';
  // Retention deletes finished tasks, which would read as negative.
  const rate = Math.max(0, done - prev.done) / ((stats.at - prev.at) / 1000);
  return rate < 10 ? rate.toFixed(1) : String(Math.round(rate));
}

function lanes(stats) {
  return h('section', { id: 'lanes' }, h('h2', { text: 'Backlog per lane' }),
    table(['Lane', 'Due and waiting', 'Oldest due'], stats.lanes.map((l) => [
      l.priority, String(l.backlog),
      l.oldest_due ? h('span', { title: fmtTime(l.oldest_due), text: fmtAgo(l.oldest_due) }) : '—',
    ]), 'No lane.'));
}

function byType(stats) {
  const names = Object.keys(stats.byType).sort();
  const shown = statuses.filter((s) => names.some((n) => stats.byType[n][s]));
  return h('section', { id: 'by-type' }, h('h2', { text: 'Tasks by type and state' }),
    table(['Type', ...shown], names.map((n) => [
      link('/tasks?type=' + encodeURIComponent(n), n),
      ...shown.map((s) => (stats.byType[n][s] ? link(`/tasks?type=${encodeURIComponent(n)}&status=${s}`, String(stats.byType[n][s])) : '0')),
    ]), 'No tasks.'));
}

// workflows counts the workflows per state, each count a link to that list.
function workflows(stats) {
  const shown = workflowStatuses.filter((s) => stats.workflows[s]);
  return h('section', { id: 'workflows' }, h('h2', {}, 'Workflows by state ', link('/workflows', 'all →')),
    shown.length
      ? table(shown, [shown.map((s) => link('/workflows?status=' + s, String(stats.workflows[s])))])
      : h('p', { class: 'muted', text: 'No workflows.' }));
}
