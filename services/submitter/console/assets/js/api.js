// The console's only way to the server: the JSON API the CLI uses, with the
// operator's API key in the Authorization header. The key is kept in this
// tab's sessionStorage (gone when the tab closes) and never in a cookie, so
// another site cannot make the browser send it: there is no ambient
// credential, hence nothing to forge (no CSRF).

const tokenKey = 'ax.token';

export function token() {
  return sessionStorage.getItem(tokenKey) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
}

// APIError is a refused or failed call, carrying the problem+json answer's
// stable code and its detail, which the pages show as they are.
export class APIError extends Error {
  constructor(status, code, detail) {
    super(`${status} ${code}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

// api calls the API and returns the parsed JSON answer, or throws APIError.
// State-changing calls send a JSON body, as the server's edge requires.
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  const init = { method, headers, credentials: 'omit', cache: 'no-store' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body ?? {});
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, 'unreachable', 'the ax API did not answer: ' + e.message);
  }
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: reported below if the status says it failed
  }
  if (!resp.ok) {
    if (data && data.code) throw new APIError(resp.status, data.code, data.detail || data.title || '');
    throw new APIError(resp.status, 'http_' + resp.status, text.slice(0, 200));
  }
  return data;
}

// query builds "?a=1&b=2" from the non-empty values of obj.
export function query(obj) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  return s ? '?' + s : '';
}
