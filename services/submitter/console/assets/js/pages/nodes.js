// Executor nodes as their heartbeats describe them: alive or not, load,
// the tasks they run and, per type, the shards they own (GET /v1/nodes).

import { api } from '../api.js';
import { fill, fmtAgo, fmtTime, h, link, shardRanges } from '../dom.js';

export async function render(ctx) {
  await draw(ctx);
  ctx.live(() => draw(ctx), 5000);
}

async function draw(ctx) {
  const list = await api('GET', '/v1/nodes');
  if (!ctx.current()) return;
  fill(ctx.main,
    h('h1', { text: 'Nodes' }),
    h('p', { class: 'muted', text: `${list.nodes.filter((n) => n.alive).length} of ${list.nodes.length} nodes alive; every type's ring has ${list.shard_count} shards.` }),
    list.nodes.length ? list.nodes.map((n) => node(n, list.shard_count)) : h('p', { class: 'muted empty', text: 'No executor node is registered.' }));
}

function node(n, shardCount) {
  const types = Object.keys(n.shards || {}).sort();
  return h('section', { class: 'node-card' + (n.alive ? '' : ' dead') },
    h('h2', {}, n.name, ' ', h('span', { class: 'badge ' + (n.alive ? 'running' : 'dead'), text: n.alive ? 'alive' : 'dead' })),
    h('dl', { class: 'details' },
      h('dt', { text: 'Address' }), h('dd', { text: n.addr }),
      h('dt', { text: 'Version' }), h('dd', { text: n.version }),
      h('dt', { text: 'Started' }), h('dd', { text: fmtTime(n.started_at) }),
      h('dt', { text: 'Last heartbeat' }), h('dd', { text: `${fmtAgo(n.last_heartbeat)} (${fmtTime(n.last_heartbeat)})` }),
      h('dt', { text: 'Running' }), h('dd', {}, `${n.running.length} of ${n.capacity || 'unlimited'}`,
        n.running.length ? [' — ', n.running.map((id, i) => [i ? ', ' : '', link('/task/' + id, id)])] : null),
      h('dt', { text: 'Types' }), h('dd', { text: n.types.join(', ') })),
    types.length ? h('table', { class: 'shards' },
      h('thead', {}, h('tr', {}, h('th', { text: 'Type' }), h('th', { text: 'Shards owned' }))),
      h('tbody', {}, types.map((t) => h('tr', {},
        h('td', { text: t }),
        h('td', {}, h('strong', { text: `${n.shards[t].length} of ${shardCount}` }), ': ', h('span', { class: 'mono', text: shardRanges(n.shards[t]) })))))) : null);
}
