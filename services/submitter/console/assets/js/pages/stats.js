// Counts from GET /v1/stats, brought into one shape for the pages:
// byType[type][STATE] = n, the lanes' backlogs ({priority, backlog,
// oldest_due}), totals per state, workflows[STATE] = n and when the server
// counted.
// Until a server has the route (404), the pages show what they can without.

import { api, APIError } from '../api.js';

export async function loadStats() {
  let raw;
  try {
    raw = await api('GET', '/v1/stats');
  } catch (err) {
    if (err instanceof APIError && err.status === 404) return null;
    throw err;
  }
  const byType = {};
  const totals = {};
  for (const t of raw.types || []) {
    byType[t.type] = t.counts || {};
    for (const [st, n] of Object.entries(t.counts || {})) totals[st] = (totals[st] || 0) + n;
  }
  // at is when the server counted (it keeps a reading a few seconds).
  return { byType, totals, lanes: raw.lanes || [], workflows: raw.workflows || {}, at: Date.parse(raw.at) || Date.now() };
}
