// The console's only way to the service: the Redfish API, with the session
// token the SessionService gave at login. Nothing here decides what a user
// may see or do; the service does, and the console only hides controls the
// session's privileges would be refused.

import { useEffect, useState, useCallback, useRef } from 'preact/hooks';

const TOKEN = 'rackpool.token';
const SESSION = 'rackpool.session';

// ApiError carries the service's own Redfish error: its message, the
// properties it names and the resolution, so forms can show them next to
// the field they concern.
export class ApiError extends Error {
  constructor(status, body) {
    const ext = body?.error?.['@Message.ExtendedInfo'] ?? [];
    const first = ext[0] ?? {};
    super(first.Message || body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.messageId = first.MessageId || body?.error?.code || '';
    this.resolution = first.Resolution || '';
    this.properties = ext.flatMap((e) => (e.RelatedProperties ?? []).map((p) => p.replace(/^#\//, '')));
    this.extended = ext;
    this.body = body;
  }
}

// Listeners told when the session is found expired (a 401 on a request that
// carried a token) so the app can ask for the password again without
// unmounting the page underneath.
const expiredListeners = new Set();
export function onSessionExpired(fn) {
  expiredListeners.add(fn);
  return () => expiredListeners.delete(fn);
}

export const session = {
  token: sessionStorage.getItem(TOKEN) || '',
  info: JSON.parse(sessionStorage.getItem(SESSION) || 'null'),
  // can reports whether the session's role holds a Redfish privilege.
  can(priv) {
    return !!this.info?.privileges?.includes(priv);
  },
  get canCompose() {
    return this.can('ConfigureComponents');
  },
  get canManage() {
    return this.can('ConfigureManager');
  },
};

async function request(method, path, body, opts = {}) {
  // X-Requested-With: a 401 then carries no Basic challenge, which the
  // browser would answer with its own password prompt.
  const headers = { Accept: 'application/json', 'X-Requested-With': 'XMLHttpRequest', ...(opts.headers || {}) };
  if (session.token) headers['X-Auth-Token'] = session.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: opts.signal,
  });
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: { message: text } };
    }
  }
  if (res.status === 401 && session.token && !opts.login) {
    for (const fn of expiredListeners) fn();
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return { status: res.status, headers: res.headers, data };
}

export const api = {
  async get(path, opts) {
    return (await request('GET', path, undefined, opts)).data;
  },
  async post(path, body, opts) {
    return (await request('POST', path, body ?? {}, opts)).data;
  },
  async patch(path, body, opts) {
    return (await request('PATCH', path, body, opts)).data;
  },
  async del(path, opts) {
    return (await request('DELETE', path, undefined, opts)).data;
  },
  // act sends a change and, when the service answers 202 with a task
  // monitor (a slow composition), polls the monitor until the task ends,
  // calling onProgress with the task; it returns the final answer's body.
  async act(method, path, body, { onProgress, signal } = {}) {
    let res = await request(method, path, body, { signal });
    while (res.status === 202 && res.headers.get('Location')) {
      onProgress?.(res.data);
      const wait = Number(res.headers.get('Retry-After') || '1');
      await new Promise((r) => setTimeout(r, Math.min(Math.max(wait, 0.2), 5) * 1000));
      res = await request('GET', res.headers.get('Location'), undefined, { signal });
    }
    return res.data;
  },
  request,
};

// login opens a session and learns the account's role and tenant.
export async function login(user, password) {
  const res = await request('POST', '/redfish/v1/SessionService/Sessions', { UserName: user, Password: password }, { login: true });
  session.token = res.headers.get('X-Auth-Token');
  const location = res.headers.get('Location');
  sessionStorage.setItem(TOKEN, session.token);
  const account = await api.get(`/redfish/v1/AccountService/Accounts/${encodeURIComponent(user)}`);
  const role = await api.get(`/redfish/v1/AccountService/Roles/${encodeURIComponent(account.RoleId)}`);
  session.info = {
    user,
    location,
    role: account.RoleId,
    tenant: account.Oem?.Rackpool?.Tenant || '',
    privileges: [...(role.AssignedPrivileges || []), ...(role.OemPrivileges || [])],
  };
  sessionStorage.setItem(SESSION, JSON.stringify(session.info));
  return session.info;
}

// logout deletes the session on the service (best effort) and forgets it.
export async function logout() {
  const loc = session.info?.location;
  if (loc) {
    try {
      await api.del(loc);
    } catch {
      // already gone
    }
  }
  forget();
}

export function forget() {
  session.token = '';
  session.info = null;
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(SESSION);
}

// fetchMembers reads a whole collection with $expand=.&$select: a first
// page of `first` members, so a list can paint at once, then pages of
// `pageSize`, `parallel` requests in flight, handed to onPage(members,
// total) in collection order as they arrive. It resolves to every member.
// filter, when given, is a $filter: only the members it selects are read.
export async function fetchMembers(path, { select, filter, first = 500, pageSize = 2000, parallel = 3, onPage, signal } = {}) {
  const sel = (select ? `&$select=${select.map((s) => `Members/${s}`).join(',')}` : '')
    + (filter ? `&$filter=${encodeURIComponent(filter)}` : '');
  // A page the service ended early (it inlines at most 8 MiB a page and
  // says where to go on in Members@odata.nextLink) is completed here, so
  // that every page holds the members from skip to skip+top.
  const get = (skip, top) => {
    const p = api.get(`${path}?$expand=.${sel}&$skip=${skip}&$top=${top}`, { signal }).then(async (page) => {
      const members = page.Members || [];
      if (members.length > 0 && members.length < top && page['Members@odata.nextLink']) {
        const rest = await get(skip + members.length, top - members.length);
        return { ...page, Members: members.concat(rest.Members || []) };
      }
      return page;
    });
    p.catch(() => {}); // a page still in flight when an earlier one fails
    return p;
  };
  const all = [];
  const take = (page, total) => {
    const members = page.Members || [];
    all.push(...members);
    onPage?.(members, page['Members@odata.count'] ?? total);
    return page['Members@odata.count'] ?? total;
  };
  let total = take(await get(0, first), 0);
  let next = all.length;
  const inflight = [];
  while (next < total || inflight.length) {
    while (inflight.length < parallel && next < total) {
      inflight.push(get(next, pageSize));
      next += pageSize;
    }
    total = take(await inflight.shift(), total);
  }
  return all;
}

// useResource GETs path and re-reads it when reload() is called or any of
// deps changes.
export function useResource(path, deps = []) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    if (!path) return undefined;
    const ctl = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    api.get(path, { signal: ctl.signal }).then(
      (data) => setState({ data, error: null, loading: false }),
      (error) => error.name !== 'AbortError' && setState({ data: null, error, loading: false }),
    );
    return () => ctl.abort();
  }, [path, n, ...deps]);
  const reload = useCallback(() => setN((x) => x + 1), []);
  return { ...state, reload };
}

// The event stream: one Server-Sent Events connection (fetch, so the token
// travels in a header rather than the URL) shared by every view.
const eventListeners = new Set();
let stream = null;
const cursor = { id: '' }; // the last event seen, to resume after a reconnect or a new login

export function useEvents(fn) {
  const ref = useRef(fn);
  ref.current = fn;
  useEffect(() => {
    const l = (e) => ref.current(e);
    eventListeners.add(l);
    startStream();
    return () => eventListeners.delete(l);
  }, []);
}

export const streamState = { connected: false, listeners: new Set() };
function setConnected(v) {
  streamState.connected = v;
  for (const fn of streamState.listeners) fn(v);
}

function startStream() {
  if (stream || !session.token) return;
  const ctl = new AbortController();
  stream = ctl;
  openStream('/redfish/v1/EventService/SSE', (data, ev) => {
    for (const fn of eventListeners) fn(data, ev);
  }, ctl.signal, { onState: setConnected, cursor }).finally(() => {
    if (stream === ctl) stream = null;
  });
}

// openStream reads a Server-Sent Events stream of the service (the event
// stream, or ?EventFormatType=MetricReport) until signal aborts, calling
// onData with each message's JSON and the message. It reconnects after a
// failure with a growing delay, resuming after cursor.id when given one;
// onState(connected) follows the connection. A 401 ends it and reports
// the session expired.
export async function openStream(path, onData, signal, { onState, cursor: cur } = {}) {
  let delay = 500;
  while (!signal.aborted && session.token) {
    try {
      const headers = { 'X-Auth-Token': session.token, Accept: 'text/event-stream', 'X-Requested-With': 'XMLHttpRequest' };
      if (cur?.id) headers['Last-Event-ID'] = cur.id;
      const res = await fetch(path, { headers, signal });
      if (res.status === 401) {
        for (const fn of expiredListeners) fn();
        break;
      }
      if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
      onState?.(true);
      delay = 500;
      await readSSE(res.body, (ev) => {
        if (cur && ev.id) cur.id = ev.id;
        let data;
        try {
          data = JSON.parse(ev.data);
        } catch {
          return; // not JSON: nothing for the views
        }
        onData(data, ev);
      });
    } catch {
      if (signal.aborted) break;
    }
    onState?.(false);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
  }
  onState?.(false);
}

export function stopStream() {
  stream?.abort();
  stream = null;
}

async function readSSE(body, emit) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
      const chunk = buf.slice(0, i);
      buf = buf.slice(buf[i] === '\r' ? i + 4 : i + 2);
      const ev = { data: '', id: '', event: '' };
      for (const line of chunk.split(/\r?\n/)) {
        if (line.startsWith(':')) continue;
        const [k, ...rest] = line.split(':');
        const v = rest.join(':').replace(/^ /, '');
        if (k === 'data') ev.data += (ev.data ? '\n' : '') + v;
        else if (k === 'id') ev.id = v;
        else if (k === 'event') ev.event = v;
      }
      if (ev.data) emit(ev);
    }
  }
}

// lastSegment returns the last path segment of an @odata.id.
export const lastSegment = (id) => (id || '').split('/').pop();
