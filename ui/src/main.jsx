// The console's shell: login, navigation, and the view the hash names.
// An expired session shows the login form over the page instead of
// replacing it, so whatever was typed is still there after logging in.

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { session, login, logout, forget, onSessionExpired, stopStream, streamState, ApiError } from './api.js';
import { useRoute, href } from './router.js';
import { Dashboard } from './dashboard.jsx';
import { TopologyView } from './topology.jsx';
import { BlocksList, SystemsList, HostsList, DrivesList, LeasesList, ReservationsList, BlockDetails, SystemDetails } from './lists.jsx';
import { Compose } from './compose.jsx';
import { Telemetry } from './telemetry.jsx';
import { EventsView } from './events.jsx';
import { Transfer } from './transfer.jsx';
import './style.css';

const nav = [
  ['/', 'Dashboard'],
  ['/topology', 'Topology'],
  ['/blocks', 'Blocks'],
  ['/systems', 'Systems'],
  ['/hosts', 'Hosts'],
  ['/drives', 'Drives'],
  ['/leases', 'Memory leases'],
  ['/reservations', 'Reservations'],
  ['/compose', 'Compose', () => session.canCompose],
  ['/telemetry', 'Telemetry'],
  ['/events', 'Events and audit'],
  ['/transfer', 'Import and export'],
];

function view(route) {
  const { path, params } = route;
  const [, first, id] = path.split('/');
  switch (`/${first}`) {
    case '/':
      return <Dashboard />;
    case '/topology':
      return <TopologyView params={params} />;
    case '/blocks':
      return id ? <BlockDetails id={decodeURIComponent(id)} /> : <BlocksList params={params} />;
    case '/systems':
      return id ? <SystemDetails id={decodeURIComponent(id)} /> : <SystemsList params={params} />;
    case '/hosts':
      return <HostsList params={params} />;
    case '/drives':
      return <DrivesList params={params} />;
    case '/leases':
      return <LeasesList params={params} />;
    case '/reservations':
      return <ReservationsList params={params} />;
    case '/compose':
      return <Compose params={params} />;
    case '/telemetry':
      return <Telemetry params={params} />;
    case '/events':
      return <EventsView params={params} />;
    case '/transfer':
      return <Transfer />;
  }
  return (
    <section class="page">
      <h1>Not found</h1>
      <p>
        There is no view at {path}. <a href="#/">Go to the dashboard</a>.
      </p>
    </section>
  );
}

function Login({ expired, onDone }) {
  const [user, setUser] = useState(expired ? session.info?.user || '' : '');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function submit(e) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await login(user, password);
      onDone();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }
  return (
    <div class={expired ? 'login-overlay' : 'login-page'}>
      <form class="login" onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">rackpool</h1>
        {expired && (
          <p class="notice" role="status">
            Your session has expired. Log in again to carry on; what you typed is kept.
          </p>
        )}
        <label for="login-user">User name</label>
        <input id="login-user" name="username" autocomplete="username" value={user} onInput={(e) => setUser(e.target.value)} required />
        <label for="login-password">Password</label>
        <input id="login-password" name="password" type="password" autocomplete="current-password" value={password}
          onInput={(e) => setPassword(e.target.value)} required />
        {error && (
          <div class="error" role="alert">
            {error instanceof ApiError && error.status === 401 ? 'The user name or password is not right, or the account is locked.' : error.message}
          </div>
        )}
        <button type="submit" class="primary" disabled={busy}>Log in</button>
      </form>
    </div>
  );
}

function StreamIndicator() {
  const [on, setOn] = useState(streamState.connected);
  useEffect(() => {
    streamState.listeners.add(setOn);
    return () => streamState.listeners.delete(setOn);
  }, []);
  return (
    <span class={`stream ${on ? 'on' : 'off'}`} role="status" title="Live updates from the event stream">
      {on ? 'Live' : 'Reconnecting…'}
    </span>
  );
}

function App() {
  const route = useRoute();
  const [, setTick] = useState(0);
  const [expired, setExpired] = useState(false);
  useEffect(() => onSessionExpired(() => {
    stopStream();
    setExpired(true);
  }), []);
  if (!session.token || !session.info) {
    return <Login onDone={() => setTick((x) => x + 1)} />;
  }
  const info = session.info;
  return (
    <div class="shell">
      <a class="skip" href="#main">Skip to content</a>
      <nav class="sidebar" aria-label="Views">
        <div class="brand">rackpool</div>
        <ul>
          {nav.filter(([, , show]) => !show || show()).map(([p, label]) => {
            const current = p === '/' ? route.path === '/' : route.path === p || route.path.startsWith(`${p}/`);
            return (
              <li key={p}>
                <a href={href(p)} aria-current={current ? 'page' : undefined}>{label}</a>
              </li>
            );
          })}
        </ul>
        <div class="who">
          <div>
            <span class="user">{info.user}</span>
            <span class="role">{info.role}{info.tenant ? ` · tenant ${info.tenant}` : ''}</span>
          </div>
          <StreamIndicator />
          <button type="button" onClick={async () => {
            await logout();
            setTick((x) => x + 1);
          }}>Log out</button>
        </div>
      </nav>
      <main id="main" tabIndex={-1} inert={expired ? true : undefined}>{view(route)}</main>
      {expired && <Login expired onDone={() => setExpired(false)} />}
    </div>
  );
}

// A token from a previous page load that the service no longer accepts is
// dropped before the first view asks for anything with it.
if (session.token && !session.info) forget();
render(<App />, document.getElementById('app'));
