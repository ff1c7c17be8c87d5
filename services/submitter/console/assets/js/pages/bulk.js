// Acting on everything a filter matches, the way the API insists on: a dry
// run counts and returns a token, the operator sees the count, and only
// then the same filter with the token acts, a batch per call until nothing
// counted is left (POST /v1/tasks:cancel, POST /v1/deadletters:retry).

import { api } from '../api.js';
import { h } from '../dom.js';

// The most confirm calls one click makes: the API acts on at most 1000
// items per call and a dry run counts at most 100,000.
const maxCalls = 100;

// bulkPanel offers verb ('Cancel', past tense 'Cancelled') on every item
// filter matches; onDone re-renders the page afterwards.
export function bulkPanel(ctx, { path, filter, verb, past, noun, onDone }) {
  const box = h('div', { class: 'bulk' });
  const start = h('button', { type: 'button', class: 'warn', text: `${verb} all matching…` });
  start.addEventListener('click', async () => {
    start.disabled = true;
    try {
      const dry = await api('POST', path, { filter, dry_run: true });
      ask(dry);
    } catch (err) {
      ctx.fail(err);
    } finally {
      start.disabled = false;
    }
  });
  const ask = (dry) => {
    if (dry.matched === 0) {
      box.replaceChildren(start, h('span', { class: 'muted', text: ` No ${noun} match this filter.` }));
      return;
    }
    const go = h('button', { type: 'button', class: 'danger', text: `${verb} ${dry.matched} ${noun}` });
    const never = h('button', { type: 'button', text: 'Never mind', onclick: () => box.replaceChildren(start) });
    go.addEventListener('click', async () => {
      go.disabled = true;
      never.disabled = true;
      try {
        const message = await confirm(path, filter, dry.confirm, past, noun);
        await onDone();
        ctx.flash('ok', message);
      } catch (err) {
        ctx.fail(err);
        box.replaceChildren(start);
      }
    });
    box.replaceChildren(h('span', { class: 'bulk-count', text: `${dry.matched} ${noun} match this filter (counted now; the API acts only on these). ` }), go, ' ', never);
  };
  box.append(start);
  return box;
}

async function confirm(path, filter, token, past, noun) {
  let done = 0;
  let skipped = 0;
  for (let i = 0; i < maxCalls; i++) {
    const r = await api('POST', path, { filter, confirm: token });
    done += r.done;
    skipped += r.skipped;
    if (r.remaining === 0) break;
  }
  const moved = skipped ? `; ${skipped} had moved on and were left as they were` : '';
  return `${past} ${done} ${noun}${moved}.`;
}
