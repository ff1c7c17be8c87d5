// The console's shell: who is signed in, which page the URL fragment names
// (#/tasks?status=READY, #/task/123), messages, and the login form. Pages
// are modules exporting render(ctx); ctx gives them the main element, the
// route's parameters and query, and ways to report and to refresh.

import { api, APIError, setToken, token } from './api.js';
import { fill, h } from './dom.js';
import * as overview from './pages/overview.js';
import * as tasks from './pages/tasks.js';
import * as task from './pages/task.js';
import * as workflows from './pages/workflows.js';
import * as workflow from './pages/workflow.js';
import * as deadletters from './pages/deadletters.js';
import * as types from './pages/types.js';
import * as nodes from './pages/nodes.js';

const routes = [
  { pattern: /^\/?$/, name: 'overview', page: overview },
  { pattern: /^\/tasks$/, name: 'tasks', page: tasks },
  { pattern: /^\/task\/(\d+)$/, name: 'tasks', page: task },
  { pattern: /^\/workflows$/, name: 'workflows', page: workflows },
  { pattern: /^\/workflow\/(\d+)$/, name: 'workflows', page: workflow },
  { pattern: /^\/deadletters$/, name: 'deadletters', page: deadletters },
  { pattern: /^\/types$/, name: 'types', page: types },
  { pattern: /^\/nodes$/, name: 'nodes', page: nodes },
];

const main = document.getElementById('main');
const flashBox = document.getElementById('flash');
let caller = null; // the answer of GET /v1/whoami once signed in
let generation = 0; // bumped on every navigation: stops the last page's refreshes

// flash shows a message above the page until the next navigation; an
// APIError shows its status, code and the server's own explanation.
function flash(kind, message) {
  let body = message;
  if (message instanceof APIError) {
    body = [h('strong', { text: `${message.status || ''} ${message.code}`.trim() }), ' — ', message.detail];
  }
  flashBox.replaceChildren(h('div', { class: 'flash ' + kind, role: kind === 'error' ? 'alert' : 'status' }, body));
}

// fail reports an error; a 401 means the key is no longer good (revoked,
// expired) and leads back to the login form.
function fail(err) {
  if (err instanceof APIError && err.status === 401 && caller && caller.auth) {
    signOut('Your API key was refused: ' + err.detail);
    return;
  }
  flash('error', err instanceof APIError ? err : new APIError(0, 'console_error', String(err)));
}

function showWho() {
  const who = document.getElementById('who');
  const notice = document.getElementById('notice');
  notice.replaceChildren();
  if (!caller) {
    who.replaceChildren();
    return;
  }
  if (!caller.auth) {
    who.replaceChildren(h('span', { class: 'badge open', text: 'no login: API open' }));
    notice.replaceChildren(h('p', { class: 'notice' },
      'This ax checks no API keys (bound to loopback with no key, or --auth off): anyone on this machine may use ' +
      'the console and its actions, which are recorded as the submitter itself. Create a key with ' +
      '`ax key create` and restart to require one.'));
    return;
  }
  who.replaceChildren(
    h('span', { class: 'key', title: 'actions are recorded as key:' + caller.name },
      'key ', h('strong', { text: caller.name }), ' · ', h('span', { class: 'role', text: caller.role })),
    h('button', { type: 'button', class: 'link', text: 'Sign out', onclick: () => signOut('Signed out.') }));
}

function signOut(why) {
  setToken('');
  caller = null;
  showWho();
  login(why);
}

// login shows the form for an API key and checks the key with
// GET /v1/whoami before keeping it.
function login(message) {
  generation++;
  document.body.classList.add('signed-out');
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', placeholder: 'ax_…', required: true });
  const error = h('p', { id: 'login-error', class: 'flash error', role: 'alert', hidden: !message || message === 'Signed out.' },
    message || '');
  const form = h('form', { id: 'login', class: 'login' },
    h('h1', { text: 'Sign in to ax' }),
    h('p', { text: 'Paste an API key with the read role or more (operate to cancel, pause and re-run). ' +
      'It is kept in this tab only and sent with each request; closing the tab forgets it.' }),
    h('label', { for: 'token', text: 'API key' }), input,
    h('button', { type: 'submit', text: 'Sign in' }), error);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    try {
      await identify();
      route();
    } catch (err) {
      setToken('');
      input.value = '';
      input.focus();
      error.hidden = false;
      error.textContent = loginRefusal(err);
    }
  });
  flashBox.replaceChildren();
  fill(main, form);
  input.focus();
}

function loginRefusal(err) {
  if (!(err instanceof APIError)) return String(err);
  if (err.status === 401) return 'Wrong key: ' + err.detail;
  if (err.status === 403) return 'This key may not read: ' + err.detail + '. The console needs read, operate or admin.';
  return `${err.status} ${err.code}: ${err.detail}`;
}

async function identify() {
  caller = await api('GET', '/v1/whoami');
  document.body.classList.remove('signed-out');
  showWho();
}

// route renders the page the URL fragment names.
async function route() {
  const gen = ++generation;
  const [path, qs] = location.hash.replace(/^#/, '').split('?');
  const match = routes.map((r) => ({ r, m: r.pattern.exec(path) })).find((x) => x.m);
  flashBox.replaceChildren();
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', match && a.dataset.page === match.r.name);
  }
  if (!match) {
    fill(main, h('h1', { text: 'No such page' }), h('p', {}, h('a', { href: '#/', text: 'Overview' })));
    return;
  }
  const ctx = {
    main, caller, flash, fail,
    params: match.m.slice(1),
    query: new URLSearchParams(qs || ''),
    current: () => gen === generation,
    // live calls fn every ms milliseconds while this page is shown, or
    // until the function it returns is called.
    live(fn, ms) {
      const timer = setInterval(() => {
        if (gen !== generation) clearInterval(timer);
        else fn().catch(fail);
      }, ms);
      return () => clearInterval(timer);
    },
  };
  try {
    await match.r.page.render(ctx);
  } catch (err) {
    if (gen !== generation) return;
    fill(main, h('h1', { text: 'This page could not be loaded' }));
    fail(err);
  }
}

async function start() {
  const stored = token(); // a key kept by this tab before a reload
  try {
    await identify();
  } catch (err) {
    if (err instanceof APIError && (err.status === 401 || err.status === 403)) {
      setToken('');
      login(stored ? loginRefusal(err) : '');
      return;
    }
    fill(main, h('h1', { text: 'ax does not answer' }));
    fail(err);
    return;
  }
  route();
}

window.addEventListener('hashchange', () => {
  if (caller) route();
});
start();
