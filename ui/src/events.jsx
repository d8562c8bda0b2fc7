// Events and audit. Events: the service's event log (composition changes,
// task life cycles, device and port health, thresholds), filled live from
// the event stream and filtered by severity, kind of message and text.
// Audit: every change and every refusal with who, when, what and the
// outcome, filtered on the service (user, outcome, time) — a tenant's
// accounts see only their tenant's entries, because the service says so.

import { useEffect, useMemo, useState } from 'preact/hooks';
import { useResource, useEvents } from './api.js';
import { href, navigate } from './router.js';
import { Page, ErrorMessage, Loading, Health, fmtTime } from './components.jsx';

export function EventsView({ params }) {
  const tab = params.tab === 'audit' ? 'audit' : 'events';
  return (
    <Page id="events" title="Events and audit">
      <div class="tabs" role="tablist" aria-label="Log">
        <button type="button" role="tab" id="tab-events" aria-selected={tab === 'events'} aria-controls="log-panel" onClick={() => navigate('/events')}>Events</button>
        <button type="button" role="tab" id="tab-audit" aria-selected={tab === 'audit'} aria-controls="log-panel" onClick={() => navigate('/events', { tab: 'audit' })}>Audit log</button>
      </div>
      <div id="log-panel" role="tabpanel" aria-labelledby={`tab-${tab}`}>
        {tab === 'audit' ? <Audit params={params} /> : <Events params={params} />}
      </div>
    </Page>
  );
}

function setParam(params, k, v) {
  navigate('/events', { ...params, [k]: v });
}

function Events({ params }) {
  const log = useResource('/redfish/v1/Managers/rackpool/LogServices/Events/Entries');
  const [live, setLive] = useState([]);
  useEvents((payload) => {
    const recs = eventRecords(payload);
    if (recs.length) setLive((l) => [...recs, ...l].slice(0, 2000));
  });
  const sev = params.severity || '';
  const text = (params.q || '').toLowerCase();
  const rows = useMemo(() => {
    const seen = new Set();
    const fromLog = logRecords(log.data).reverse();
    return [...live, ...fromLog].filter((r) => {
      if (seen.has(r.Id)) return false;
      seen.add(r.Id);
      if (sev && r.Severity !== sev) return false;
      if (text && !`${r.Message} ${r.MessageId} ${r.Origin}`.toLowerCase().includes(text)) return false;
      return true;
    });
  }, [log.data, live, sev, text]);
  return (
    <>
      <div class="filters">
        <div class="field">
          <label for="events-severity">Severity</label>
          <select id="events-severity" value={sev} onChange={(e) => setParam(params, 'severity', e.target.value)}>
            <option value="">Any</option>
            <option>OK</option>
            <option>Warning</option>
            <option>Critical</option>
          </select>
        </div>
        <div class="field">
          <label for="events-search">Search</label>
          <input id="events-search" type="search" value={params.q || ''} placeholder="message, ID or resource"
            onChange={(e) => setParam(params, 'q', e.target.value)} />
        </div>
        <span class="muted" data-testid="events-count">{rows.length} events</span>
      </div>
      <ErrorMessage error={log.error} />
      {log.loading && !log.data && <Loading what="events" />}
      <table class="plain" data-testid="events-table" data-complete={log.data ? '1' : undefined}>
        <caption class="sr-only">Events, newest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col">Severity</th><th scope="col">Message</th><th scope="col">Resource</th></tr></thead>
        <tbody>
          {rows.slice(0, 500).map((r) => (
            <tr key={r.Id} data-event={r.Id}>
              <td>{fmtTime(r.Created)}</td>
              <td><Health value={r.Severity} /></td>
              <td>{r.Message}<div class="hint">{r.MessageId}</div></td>
              <td>{r.Origin ? <a href={resourceLink(r.Origin)}>{r.Origin.split('/').slice(-2).join('/')}</a> : '–'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {log.data && !rows.length && (
        <p class="empty" data-testid="events-empty">
          {sev || text ? `No events match ${[sev && `severity ${sev}`, text && `“${params.q}”`].filter(Boolean).join(' and ')}; clear the filters to see every event.`
            : 'No events yet. Events appear here as they happen, without reloading: a system composed, changed or decomposed, '
              + 'a task starting and finishing, a device\'s or port\'s health changing, a telemetry threshold crossed.'}
        </p>
      )}
      {rows.length > 500 && <p class="muted">Showing the newest 500; narrow the filter to see others.</p>}
    </>
  );
}

// eventRecords turns an event stream payload into rows, newest first.
export function eventRecords(payload) {
  return (payload.Events || []).map((e) => ({
    Id: e.EventId,
    Created: e.EventTimestamp,
    Severity: e.Severity || e.MessageSeverity,
    Message: e.Message,
    MessageId: e.MessageId,
    Origin: e.OriginOfCondition?.['@odata.id'],
  })).reverse();
}

// logRecords turns the event log's entries into the same rows, oldest
// first.
export function logRecords(log) {
  return (log?.Members || []).map((m) => ({
    Id: m.Id, Created: m.Created, Severity: m.Severity, Message: m.Message, MessageId: m.MessageId,
    Origin: m.Links?.OriginOfCondition?.['@odata.id'],
  }));
}

// resourceLink points a Redfish resource at the console's view of it.
export function resourceLink(odataID) {
  const p = odataID.split('/');
  if (odataID.startsWith('/redfish/v1/Systems/')) return href(`/systems/${p[4]}`);
  if (odataID.startsWith('/redfish/v1/CompositionService/ResourceBlocks/')) return href(`/blocks/${p[5]}`);
  if (odataID.startsWith('/redfish/v1/Fabrics/')) return href('/topology', { focus: p[p.length - 1] });
  return href('/events');
}

function Audit({ params }) {
  const q = new URLSearchParams({ limit: '500' });
  for (const k of ['user', 'outcome', 'since', 'until']) if (params[k]) q.set(k, k === 'since' || k === 'until' ? new Date(params[k]).toISOString().replace(/\.\d+Z$/, 'Z') : params[k]);
  const log = useResource(`/redfish/v1/Managers/rackpool/LogServices/Audit/Entries?${q}`);
  const [n, setN] = useState(0);
  // Changes happen as events; re-read the audit log after one.
  useEvents(() => setN((x) => x + 1));
  const reload = log.reload;
  useEffect(() => {
    if (!n) return undefined;
    const t = setTimeout(reload, 300);
    return () => clearTimeout(t);
  }, [n]);
  const rows = (log.data?.Members || []).slice().reverse();
  const filtered = ['user', 'outcome', 'since', 'until'].some((k) => params[k]);
  return (
    <>
      <div class="filters">
        <div class="field">
          <label for="audit-user">User</label>
          <input id="audit-user" value={params.user || ''} onChange={(e) => setParam(params, 'user', e.target.value)} />
        </div>
        <div class="field">
          <label for="audit-outcome">Outcome</label>
          <select id="audit-outcome" value={params.outcome || ''} onChange={(e) => setParam(params, 'outcome', e.target.value)}>
            <option value="">Any</option>
            <option value="success">success</option>
            <option value="failure">failure</option>
            <option value="denied">denied</option>
          </select>
        </div>
        <div class="field">
          <label for="audit-since">Since</label>
          <input id="audit-since" type="datetime-local" value={params.since || ''} onChange={(e) => setParam(params, 'since', e.target.value)} />
        </div>
        <div class="field">
          <label for="audit-until">Until</label>
          <input id="audit-until" type="datetime-local" value={params.until || ''} onChange={(e) => setParam(params, 'until', e.target.value)} />
        </div>
        <span class="muted" data-testid="audit-count">{rows.length} entries</span>
      </div>
      <ErrorMessage error={log.error} />
      {log.loading && !log.data && <Loading what="the audit log" />}
      <table class="plain" data-testid="audit-table" data-complete={log.data ? '1' : undefined}>
        <caption class="sr-only">Audit log, newest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col">User</th><th scope="col">Action</th><th scope="col">Outcome</th><th scope="col">Detail</th></tr></thead>
        <tbody>
          {rows.map((m) => {
            const o = m.Oem?.Rackpool || {};
            return (
              <tr key={m.Id}>
                <td>{fmtTime(m.Created)}</td>
                <td>{o.User || '–'}{o.Tenant ? <div class="hint">tenant {o.Tenant}</div> : null}<div class="hint">{o.Remote}</div></td>
                <td>{o.Method} {o.Target}</td>
                <td><Health value={m.Severity} /> {o.Outcome} ({o.Status})</td>
                <td>{o.Detail || ''}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {log.data && !rows.length && (
        <p class="empty" data-testid="audit-empty">
          {filtered ? 'No audit entries match these filters; clear them to see every entry.'
            : 'No audit entries yet. Every change made through the API or this console (compose, decompose, reservations, '
              + 'accounts, logins) and every refused request is recorded here: who, from where, when, and the outcome.'}
        </p>
      )}
    </>
  );
}
