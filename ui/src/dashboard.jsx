// The dashboard: how much of each kind of block is in use, the systems
// (composed and hosts, counted as the Systems view counts them), what is
// unhealthy, and the latest events, kept current by the event stream.

import { useEffect, useRef, useState } from 'preact/hooks';
import { fetchMembers, useEvents, useResource } from './api.js';
import { href } from './router.js';
import { Page, ErrorMessage, Health, fmtTime, systemsSplit } from './components.jsx';
import { eventRecords, logRecords, resourceLink } from './events.jsx';

// usePool counts the blocks the session can see by kind and state. On a
// large pool the counts fill in as pages arrive.
function usePool() {
  const [pool, setPool] = useState({ kinds: {}, loaded: 0, total: 0, unhealthy: [], error: null, done: false });
  const [n, setN] = useState(0);
  useEffect(() => {
    const ctl = new AbortController();
    const kinds = {};
    const unhealthy = [];
    let loaded = 0;
    fetchMembers('/redfish/v1/CompositionService/ResourceBlocks', {
      select: ['Id', 'CompositionStatus/CompositionState', 'Status/Health', 'Oem/Rackpool/Kind'],
      signal: ctl.signal,
      onPage(members, total) {
        for (const b of members) {
          const k = b.Oem?.Rackpool?.Kind || 'other';
          const st = b.CompositionStatus?.CompositionState || 'Unknown';
          kinds[k] ??= { total: 0, used: 0, reserved: 0, failed: 0 };
          kinds[k].total++;
          if (st === 'Composed' || st === 'ComposedAndAvailable') kinds[k].used++;
          else if (st === 'Reserved' || st === 'Composing') kinds[k].reserved++;
          else if (st === 'Failed') kinds[k].failed++;
          if (b.Status?.Health && b.Status.Health !== 'OK') unhealthy.push({ id: b.Id, health: b.Status.Health });
        }
        loaded += members.length;
        setPool({ kinds: { ...kinds }, loaded, total, unhealthy: unhealthy.slice(0, 20), error: null, done: false });
      },
    }).then(
      () => setPool((p) => ({ ...p, done: true })),
      (error) => error.name !== 'AbortError' && setPool((p) => ({ ...p, error })),
    );
    return () => ctl.abort();
  }, [n]);
  return [pool, () => setN((x) => x + 1)];
}

// useSystems reads the Systems collection's members' types, page by page
// as the Systems view does, so that both count the same members.
function useSystems() {
  const [state, setState] = useState({ data: null, error: null });
  const [n, setN] = useState(0);
  useEffect(() => {
    const ctl = new AbortController();
    fetchMembers('/redfish/v1/Systems', { select: ['Id', 'SystemType'], signal: ctl.signal }).then(
      (members) => setState({ data: members, error: null }),
      (error) => error.name !== 'AbortError' && setState((s) => ({ ...s, error })),
    );
    return () => ctl.abort();
  }, [n]);
  return { ...state, reload: () => setN((x) => x + 1) };
}

export function Dashboard() {
  const [pool, reloadPool] = usePool();
  const systems = useSystems();
  const log = useResource('/redfish/v1/Managers/rackpool/LogServices/Events/Entries');
  const [recent, setRecent] = useState([]);
  const timer = useRef();
  useEvents((payload) => {
    setRecent((r) => [...eventRecords(payload), ...r].slice(0, 10));
    clearTimeout(timer.current);
    timer.current = setTimeout(() => {
      reloadPool();
      systems.reload();
    }, 400);
  });
  useEffect(() => () => clearTimeout(timer.current), []);
  const members = systems.data || [];
  const events = [...recent, ...logRecords(log.data).slice(-10).reverse()]
    .filter((e, i, all) => all.findIndex((x) => x.Id === e.Id) === i)
    .slice(0, 10);
  const kinds = Object.entries(pool.kinds).sort(([a], [b]) => a.localeCompare(b));
  return (
    <Page id="dashboard" title="Dashboard">
      <div class="cards">
        <div class="card">
          <h2>Systems</h2>
          <div class="big" data-testid="dash-systems">{systems.data ? members.length : '…'}</div>
          {systems.data && <div class="muted" data-testid="dash-systems-split">{systemsSplit(members.map((m) => m.SystemType))}</div>}
          <a href={href('/systems')}>All systems</a>
        </div>
        <div class="card">
          <h2>Resource blocks</h2>
          <div class="big">{pool.done || pool.total ? pool.total.toLocaleString() : '…'}</div>
          {pool.loaded < pool.total && <div class="muted" role="status">Counted {pool.loaded.toLocaleString()} of {pool.total.toLocaleString()}…</div>}
          <a href={href('/blocks')}>All blocks</a>
        </div>
        <div class="card">
          <h2>Health</h2>
          <div class="big" data-testid="dash-unhealthy">{pool.unhealthy.length ? `${pool.unhealthy.length} not OK` : 'All OK'}</div>
          {pool.unhealthy.slice(0, 5).map((u) => (
            <div key={u.id}><a href={href(`/blocks/${u.id}`)}>{u.id}</a> <Health value={u.health} /></div>
          ))}
        </div>
      </div>
      <ErrorMessage error={pool.error || systems.error} />
      <div class="cards" style="grid-template-columns: repeat(auto-fill, minmax(420px, 1fr))">
        <section class="card" aria-labelledby="pool-title" data-testid="dash-pool">
          <h2 id="pool-title">Pool utilisation by kind</h2>
          {pool.done && !kinds.length && (
            <p class="empty" data-testid="dash-pool-empty">
              No resource blocks: the service makes one of every device, memory region and host in the topology it
              serves (serve --topology).
            </p>
          )}
          {kinds.map(([k, c]) => {
            const pct = c.total ? Math.round((100 * c.used) / c.total) : 0;
            return (
              <div class="pool-row" key={k} data-kind={k}>
                <span>{k}</span>
                <div class="bar" role="meter" aria-label={`${k} in use`} aria-valuemin="0" aria-valuemax={c.total} aria-valuenow={c.used}>
                  <span style={`width:${pct}%`} />
                </div>
                <span class="muted">{c.used} / {c.total} ({pct}%)</span>
              </div>
            );
          })}
        </section>
        <section class="card" aria-labelledby="recent-title">
          <h2 id="recent-title">Recent events</h2>
          {log.data && !events.length && (
            <p class="empty" data-testid="dash-events-empty">
              No events yet. Composing, changing or decomposing a system, and a device or port whose health changes,
              show up here as they happen.
            </p>
          )}
          <ul class="events-list" data-testid="dash-events" data-complete={log.data ? '1' : undefined}>
            {events.map((e) => (
              <li key={e.Id}>
                <span class="muted">{fmtTime(e.Created)}</span>
                <span><Health value={e.Severity} /></span>
                <span>{e.Origin ? <a href={resourceLink(e.Origin)}>{e.Message}</a> : e.Message}</span>
              </li>
            ))}
          </ul>
          <a href={href('/events')}>All events</a>
        </section>
      </div>
    </Page>
  );
}
