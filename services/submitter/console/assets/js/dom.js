// Small helpers to build the pages. Everything shown is set as text (never
// as markup), so a payload or an error message that looks like HTML stays
// text; the Content-Security-Policy's Trusted Types would refuse markup
// from a string anyway.

// h builds an element: attrs may hold class, text, on<event> handlers and
// plain attributes; children are nodes, strings, arrays or null (skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

// fill replaces el's children, with h's rules for what a child may be.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// link is an anchor to a console page (a #/ route).
export function link(route, text) {
  return h('a', { href: '#' + route, text });
}

// table builds a table from column headings and rows of cells.
export function table(headings, rows, empty) {
  if (rows.length === 0) return h('p', { class: 'muted empty', text: empty || 'Nothing here.' });
  return h('table', {},
    h('thead', {}, h('tr', {}, headings.map((t) => h('th', { text: t })))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c) => h('td', {}, c))))));
}

// statusBadge shows a task or workflow state in its colour.
export function statusBadge(status) {
  return h('span', { class: 'badge st-' + String(status).toLowerCase(), text: status });
}

// The task states, in the order the API documents them.
export const statuses = ['READY', 'RUNNING', 'SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED', 'SUSPEND', 'RETRYING'];

// finished are the states a task does not leave on its own.
export const finished = ['SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED'];

// The workflow states, in the order the API documents them.
export const workflowStatuses = ['RUNNING', 'SUCCEEDED', 'FAILED', 'COMPENSATING', 'COMPENSATED', 'COMPENSATION_FAILED', 'CANCELLED'];

// workflowMoving are the states a workflow leaves on its own, and the ones
// it may be cancelled in.
export const workflowMoving = ['RUNNING', 'COMPENSATING'];

// fmtTime shows an RFC 3339 time as UTC with milliseconds.
export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  return d.toISOString().replace('T', ' ').replace('Z', ' UTC');
}

// fmtAgo says how long ago a time was, roughly.
export function fmtAgo(iso) {
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (isNaN(s)) return '';
  if (s < 0) return 'in ' + fmtSeconds(-s);
  return fmtSeconds(s) + ' ago';
}

function fmtSeconds(s) {
  if (s < 1) return '<1 s';
  if (s < 90) return Math.round(s) + ' s';
  if (s < 90 * 60) return Math.round(s / 60) + ' min';
  if (s < 36 * 3600) return Math.round(s / 3600) + ' h';
  return Math.round(s / 86400) + ' d';
}

// fmtDelta shows the time between two instants, "+41 ms", "+2.5 s".
export function fmtDelta(fromISO, toISO) {
  const ms = new Date(toISO) - new Date(fromISO);
  if (isNaN(ms)) return '';
  if (ms < 1000) return '+' + ms + ' ms';
  if (ms < 120000) return '+' + (ms / 1000).toFixed(1) + ' s';
  return '+' + (ms / 60000).toFixed(1) + ' min';
}

// parseActor splits a history row's actor into who acted and on which
// node: "key:alice via submitter@n1 (note: bob)" is the key alice through
// the submitter of node n1; "executor@host-2" is the executor of host-2.
export function parseActor(actor) {
  const m = /^(?:key:(\S+) via )?([a-z]+)@(\S+?)(?: \(note: (.*)\))?$/.exec(actor || '');
  if (!m) return { who: actor || '', node: '' };
  const who = m[1] ? `key ${m[1]} via ${m[2]}` : m[2];
  return { who: m[4] ? `${who} (note: ${m[4]})` : who, node: m[3] };
}

// shardRanges writes [0,1,2,5,7,8] as "0–2, 5, 7–8".
export function shardRanges(shards) {
  const out = [];
  for (let i = 0; i < shards.length; i++) {
    let j = i;
    while (j + 1 < shards.length && shards[j + 1] === shards[j] + 1) j++;
    out.push(i === j ? String(shards[i]) : `${shards[i]}–${shards[j]}`);
    i = j;
  }
  return out.join(', ');
}

// confirmButton is a button that acts on its second click within a few
// seconds, so that a stray click changes nothing; action returns a promise.
export function confirmButton(label, confirmLabel, action, cls) {
  let armed = null;
  const btn = h('button', { type: 'button', class: cls || '', text: label });
  btn.addEventListener('click', async () => {
    if (!armed) {
      btn.textContent = confirmLabel;
      btn.classList.add('armed');
      armed = setTimeout(() => {
        armed = null;
        btn.textContent = label;
        btn.classList.remove('armed');
      }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    btn.disabled = true;
    btn.classList.remove('armed');
    try {
      await action();
    } finally {
      btn.disabled = false;
      btn.textContent = label;
    }
  });
  return btn;
}
