// The list views (blocks, systems, hosts, pooled drives, memory leases,
// reservations) and the details of a block and of a system.
//
// A list reads its whole collection with $expand=.&$select: a small first
// page so rows paint at once, then the rest in larger pages a few at a
// time. Filters, sort and search run in the browser over what has arrived
// and are kept in the hash query, so a view is a link. Events re-read only
// the members they concern.

import { Fragment } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, fetchMembers, session, useEvents, useResource, ApiError } from './api.js';
import { href, navigate } from './router.js';
import { Page, ErrorMessage, Health, State, Confirm, Loading, fmtBytes, fmtTime, last, systemsSplit } from './components.jsx';
import { VirtualTable, sortRows } from './table.jsx';
import './lists.css';

const BLOCKS = '/redfish/v1/CompositionService/ResourceBlocks';
const SYSTEMS = '/redfish/v1/Systems';
const DRIVES = '/redfish/v1/Oem/Rackpool/Drives';
const LEASES = '/redfish/v1/Oem/Rackpool/MemoryLeases';
const RESERVATIONS = '/redfish/v1/CompositionService/CompositionReservations';

// Re-reads of the members events name run this many at a time (whole
// collections are read by fetchMembers: a small first page, then pages in
// parallel).
const PARALLEL = 3;
// While pages arrive the list repaints at most this often.
const PAINT_MS = 400;
// Events are gathered this long before the members they name are re-read.
const EVENT_MS = 300;

// What each list would show, and how it gets there, said when it is empty.
const EMPTY = {
  blocks: 'No resource blocks. The service makes one of every device, memory region and host in the topology it '
    + 'serves (serve --topology); a tenant sees the free pool and its own.',
  systems: 'No systems. The topology\'s hosts are listed here as physical systems, and every composed system as it is '
    + 'made (Compose, rackpool compose, or POST /redfish/v1/Systems).',
  hosts: 'No hosts. They come from the topology this service serves (serve --topology), each with its compute block.',
  drives: 'No pooled drives yet. A drive is listed once a blocknode serves it: rackpool blocknode on a host with a port '
    + 'into the SAS switch (docs/storage.md).',
  leases: 'No memory leases. A lease is listed while a client holds pooled memory: rackpool lease --size 4GiB, a '
    + 'rackpool cache spilling to pooled memory, or POST /redfish/v1/Oem/Rackpool/MemoryLeases. It goes when released '
    + 'or expired.',
  reservations: 'No composition reservations. Reserve on the Compose view (a Compose action with RequestType '
    + 'PreviewReserve) holds a placement\'s blocks for a while; it is listed here until it is applied, released or expires.',
};

const blockLink = (id) => <a href={href(`/blocks/${encodeURIComponent(id)}`)}>{id}</a>;
const systemLink = (id) => <a href={href(`/systems/${encodeURIComponent(id)}`)}>{id}</a>;
const links = (ids, link) => ids.map((id, i) => (
  <Fragment key={id}>
    {i > 0 && ', '}
    {link(id)}
  </Fragment>
));
const count = (n) => (n ?? 0).toLocaleString();
const origin = (rec) => rec.OriginOfCondition?.['@odata.id'] || '';

// useCollection keeps a collection's members, as rows (toRow(member),
// each with an id), in a Map that only this hook changes; version counts
// its changes. keep(member) drops members the view does not show.
// affected(eventRecord, rows) names the ids an event concerns, or true
// when the whole collection is to be read again; poll re-reads it every
// poll ms. The first read paints page by page; later whole reads replace
// the rows when complete.
function useCollection({ path, select, toRow, keep, affected, poll }) {
  const store = useRef(new Map());
  const everComplete = useRef(false);
  const [state, setState] = useState({ version: 0, loaded: 0, total: 0, complete: false, error: null });
  const [generation, setGeneration] = useState(0);
  const paint = (extra) => setState((s) => ({ ...s, version: s.version + 1, ...extra }));

  useEffect(() => {
    const ctl = new AbortController();
    const rows = new Map();
    const progressive = !everComplete.current;
    const progress = { loaded: 0, total: 0 };
    let timer = 0;
    if (progressive) {
      store.current = rows;
      paint({ loaded: 0, total: 0, complete: false, error: null });
    }
    fetchMembers(path, { select, signal: ctl.signal, onPage: (members, total) => {
      for (const m of members) {
        if (!keep || keep(m)) {
          const r = toRow(m);
          rows.set(r.id, r);
        }
      }
      progress.loaded += members.length;
      progress.total = total;
      if (progressive && !timer) {
        const first = progress.loaded === members.length;
        timer = setTimeout(() => {
          timer = 0;
          paint({ ...progress });
        }, first ? 0 : PAINT_MS);
      }
    } }).then(
      () => {
        clearTimeout(timer);
        everComplete.current = true;
        store.current = rows;
        paint({ ...progress, complete: true, error: null });
      },
      (error) => {
        clearTimeout(timer);
        if (!ctl.signal.aborted) paint({ error });
      },
    );
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [path, generation]);

  useEffect(() => {
    if (!poll) return undefined;
    const t = setInterval(() => setGeneration((g) => g + 1), poll);
    return () => clearInterval(t);
  }, [poll]);

  // Events: gather the ids they name, then re-read those members (or the
  // whole collection) once they stop coming for EVENT_MS.
  const pending = useRef({ ids: new Set(), all: false, timer: 0 });
  useEffect(() => () => clearTimeout(pending.current.timer), []);
  useEvents((data) => {
    if (!affected) return;
    const p = pending.current;
    for (const rec of data.Events ?? []) {
      const hit = affected(rec, store.current);
      if (hit === true) p.all = true;
      else for (const id of hit ?? []) p.ids.add(id);
    }
    if (!p.all && !p.ids.size) return;
    clearTimeout(p.timer);
    p.timer = setTimeout(async () => {
      const { all, ids } = p;
      p.all = false;
      p.ids = new Set();
      if (all) {
        setGeneration((g) => g + 1);
        return;
      }
      const rows = store.current;
      // Until the first read is complete, a member not yet in is still to come.
      const todo = [...ids].filter((id) => everComplete.current || rows.has(id));
      const sel = select ? `?$select=${select.join(',')}` : '';
      const worker = async () => {
        for (let id = todo.pop(); id !== undefined; id = todo.pop()) {
          try {
            const m = await api.get(`${path}/${encodeURIComponent(id)}${sel}`);
            if (!keep || keep(m)) rows.set(id, toRow(m));
            else rows.delete(id);
          } catch (err) {
            if (err instanceof ApiError && err.status === 404) rows.delete(id);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(PARALLEL * 2, todo.length) }, worker));
      if (rows === store.current) paint();
    }, EVENT_MS);
  });

  const rows = useMemo(() => [...store.current.values()], [state.version]);
  const reload = () => setGeneration((g) => g + 1);
  return { ...state, rows, reload };
}

// useQuery is the view's hash query: initially params, set again when the
// route changes them; update(patch) changes it and the hash in place
// (history.replaceState: no history entry, no hashchange).
function useQuery(path, params) {
  const [q, setQ] = useState(params);
  const current = useRef(q);
  current.current = q;
  useEffect(() => setQ(params), [params]);
  const update = (patch) => {
    const next = Object.fromEntries(Object.entries({ ...current.current, ...patch }).filter(([, v]) => v !== '' && v != null));
    current.current = next;
    history.replaceState(history.state, '', href(path, next));
    setQ(next);
  };
  return [q, update];
}

// ListView is a list page: filter selects, a search box, the row count and
// loading progress, and the virtual table. filters: [{ key, label,
// value(row) }] (value defaults to row[key]); the search box looks in each
// row's text (lower case). rows, when given, replaces coll.rows (a view
// that derives its rows from more than one collection). empty says what
// would be listed and how it gets there, for an empty collection; summary
// (rows), when given, follows the count once the list is complete.
function ListView({ name, title, params, coll, rows = coll.rows, columns, filters, noun, empty, summary, disabled, children }) {
  const [q, update] = useQuery(`/${name}`, params);
  const [search, setSearch] = useState(q.q ?? '');
  useEffect(() => setSearch(q.q ?? ''), [q.q]);
  useEffect(() => {
    if (search === (q.q ?? '')) return undefined;
    const t = setTimeout(() => update({ q: search }), 200);
    return () => clearTimeout(t);
  }, [search]);

  const sortColumn = columns.find((c) => c.key === q.sort && c.sortable !== false);
  const descending = q.order === 'desc';
  const sorted = useMemo(() => sortRows(rows, sortColumn, descending), [rows, sortColumn?.key, descending]);
  const valueOf = (f) => f.value ?? ((r) => r[f.key]);
  const options = useMemo(() => filters.map((f) => {
    const seen = new Set();
    const v = valueOf(f);
    for (const r of rows) seen.add(String(v(r) ?? ''));
    seen.delete('');
    if (q[f.key]) seen.add(q[f.key]);
    return [...seen].sort(new Intl.Collator(undefined, { numeric: true }).compare);
  }), [rows, ...filters.map((f) => q[f.key])]);
  const needle = (q.q ?? '').trim().toLowerCase();
  const active = filters.filter((f) => q[f.key]);
  const shown = useMemo(() => {
    if (!needle && !active.length) return sorted;
    return sorted.filter((r) => active.every((f) => String(valueOf(f)(r) ?? '') === q[f.key]) && (!needle || r.text.includes(needle)));
  }, [sorted, needle, ...filters.map((f) => q[f.key])]);

  const onSort = (key) => update({ sort: key, order: q.sort === key && !descending ? 'desc' : '' });

  let body;
  if (coll.error instanceof ApiError && coll.error.status === 404 && disabled) {
    body = (
      <div class="notice" role="status" data-testid={`${name}-disabled`}>
        {disabled}
      </div>
    );
  } else {
    body = (
      <>
        <div class="list-controls">
          {filters.map((f, i) => (
            <div class="field" key={f.key}>
              <label for={`${name}-${f.key}`}>{f.label}</label>
              <select id={`${name}-${f.key}`} value={q[f.key] ?? ''} onChange={(e) => update({ [f.key]: e.target.value })}>
                <option value="">All</option>
                {options[i].map((o) => <option key={o} value={o}>{o}</option>)}
              </select>
            </div>
          ))}
          <div class="field search">
            <label for={`${name}-search`}>Search</label>
            <input id={`${name}-search`} type="search" value={search} onInput={(e) => setSearch(e.target.value)}
              placeholder={`Search ${noun}`} autocomplete="off" />
          </div>
        </div>
        <div class="list-status">
          <span data-testid={`${name}-count`} aria-live={coll.complete ? 'polite' : 'off'}>
            {count(shown.length)} of {count(rows.length)} {noun}
          </span>
          {summary && coll.complete && <span class="muted" data-testid={`${name}-split`}>{summary(rows)}</span>}
          {!coll.complete && !coll.error && (
            <span class="list-progress">
              {coll.total ? `Loading ${count(coll.loaded)} of ${count(coll.total)}…` : `Loading ${noun}…`}
              <progress max={coll.total || 1} value={coll.loaded} aria-label={`${title} loaded`} />
            </span>
          )}
        </div>
        <ErrorMessage error={coll.error} />
        <VirtualTable name={name} label={title} columns={columns} rows={shown} rowKey={(r) => r.id}
          sort={sortColumn && { key: sortColumn.key, descending }} onSort={onSort} complete={coll.complete}
          empty={rows.length ? `No ${noun} match the search and filters; ${count(rows.length)} ${noun} are listed without them.` : empty} />
      </>
    );
  }
  return (
    <Page id={name} title={title}>
      {body}
      {children}
    </Page>
  );
}

// Blocks.

const blockSelect = ['Id', 'CompositionStatus', 'Status', 'Oem/Rackpool/Kind', 'Oem/Rackpool/Model', 'Oem/Rackpool/CapacityBytes',
  'Oem/Rackpool/Fabric', 'Oem/Rackpool/Drawer', 'Oem/Rackpool/Slot', 'Oem/Rackpool/Device', 'Links/ComputerSystems'];

// compositionState is a block's CompositionState, or Reserved for an
// unused block held by a reservation.
const compositionState = (cs = {}) => (cs.Reserved && cs.CompositionState === 'Unused' ? 'Reserved' : cs.CompositionState || 'Unknown');

function blockRow(m) {
  const o = m.Oem?.Rackpool ?? {};
  const systems = (m.Links?.ComputerSystems ?? []).map((r) => last(r['@odata.id']));
  const r = {
    id: m.Id,
    kind: o.Kind ?? '',
    model: o.Model ?? '',
    capacity: o.CapacityBytes,
    state: compositionState(m.CompositionStatus),
    health: m.Status?.Health ?? 'Unknown',
    fabric: o.Fabric ?? '',
    drawer: o.Drawer ?? '',
    slot: o.Slot,
    device: o.Device ?? '',
    systems,
  };
  r.text = [r.id, r.kind, r.model, r.fabric, r.drawer, ...systems].join(' ').toLowerCase();
  return r;
}

// blocksAffected: the blocks a composition event names (Oem.Rackpool.Blocks
// and Host), the blocks of the system it is about, the host block of a
// host's event, and the blocks of a device whose endpoint's health changed.
function blocksAffected(rec, rows) {
  const o = rec.Oem?.Rackpool ?? {};
  const ids = [...(o.Blocks ?? []), ...(o.Host ? [o.Host] : [])];
  const at = origin(rec);
  const id = last(at);
  if (at.startsWith(`${SYSTEMS}/`)) {
    if (rows.has(id)) ids.push(id);
    for (const r of rows.values()) if (r.systems.includes(id)) ids.push(r.id);
  } else if (at.startsWith(`${BLOCKS}/`)) {
    ids.push(id);
  } else if (/^\/redfish\/v1\/Fabrics\/[^/]+\/Endpoints\//.test(at)) {
    for (const r of rows.values()) if (r.device === id) ids.push(r.id);
  }
  return ids;
}

const blockColumns = [
  { key: 'id', label: 'Block', width: '10rem', render: (r) => blockLink(r.id) },
  { key: 'kind', label: 'Kind', width: '6rem' },
  { key: 'model', label: 'Model' },
  { key: 'capacity', label: 'Capacity', width: '7rem', render: (r) => fmtBytes(r.capacity) },
  { key: 'state', label: 'State', width: '12rem', render: (r) => <State value={r.state} /> },
  { key: 'health', label: 'Health', width: '6.5rem', render: (r) => <Health value={r.health} /> },
  { key: 'fabric', label: 'Fabric', width: '8rem' },
  { key: 'drawer', label: 'Drawer', width: '6rem' },
  { key: 'slot', label: 'Slot', width: '4rem' },
  { key: 'systems', label: 'Systems', value: (r) => r.systems.join(' '), render: (r) => links(r.systems, systemLink) },
];

const blockFilters = [
  { key: 'kind', label: 'Kind' },
  { key: 'state', label: 'State' },
  { key: 'health', label: 'Health' },
  { key: 'fabric', label: 'Fabric' },
];

export function BlocksList({ params }) {
  const coll = useCollection({ path: BLOCKS, select: blockSelect, toRow: blockRow, affected: blocksAffected });
  return <ListView name="blocks" title="Resource blocks" noun="blocks" params={params} coll={coll} columns={blockColumns}
    filters={blockFilters} empty={EMPTY.blocks} />;
}

// Systems: composed systems and the physical hosts.

const systemSelect = ['Id', 'Name', 'SystemType', 'Status', 'ProcessorSummary/CoreCount', 'MemorySummary/TotalSystemMemoryGiB',
  'Links/ResourceBlocks', 'Links/Chassis', 'Oem/Rackpool/Host', 'Oem/Rackpool/CompositionState', 'Oem/Rackpool/ComposedInto',
  'Oem/Rackpool/Tenant', 'Oem/Rackpool/Created'];

function systemRow(m) {
  const o = m.Oem?.Rackpool ?? {};
  const physical = m.SystemType === 'Physical';
  const r = {
    id: m.Id,
    name: m.Name ?? '',
    type: m.SystemType ?? '',
    host: physical ? m.Id : o.Host ?? '',
    rack: last(m.Links?.Chassis?.[0]?.['@odata.id']),
    state: o.CompositionState ?? m.Status?.State ?? '',
    health: m.Status?.Health ?? 'Unknown',
    blocks: (m.Links?.ResourceBlocks ?? []).length,
    cores: m.ProcessorSummary?.CoreCount,
    memory: m.MemorySummary?.TotalSystemMemoryGiB,
    composedInto: o.ComposedInto ?? [],
    tenant: o.Tenant ?? '',
    created: o.Created ?? '',
  };
  r.text = [r.id, r.name, r.host, r.tenant, ...r.composedInto].join(' ').toLowerCase();
  return r;
}

// systemsAffected: the system an event is about and its host.
function systemsAffected(rec) {
  const at = origin(rec);
  const host = rec.Oem?.Rackpool?.Host;
  return at.startsWith(`${SYSTEMS}/`) ? [last(at), ...(host ? [host] : [])] : [];
}

const gib = (n) => (n == null ? '' : `${Number.isInteger(n) ? n : n.toFixed(1)} GiB`);

const systemColumns = [
  { key: 'id', label: 'System', width: '11rem', render: (r) => systemLink(r.id) },
  { key: 'name', label: 'Name' },
  { key: 'type', label: 'Type', width: '6.5rem' },
  { key: 'host', label: 'Host', width: '7rem', render: (r) => r.host && systemLink(r.host) },
  { key: 'state', label: 'State', width: '8rem', render: (r) => <State value={r.state} /> },
  { key: 'health', label: 'Health', width: '6rem', render: (r) => <Health value={r.health} /> },
  { key: 'blocks', label: 'Blocks', width: '4.5rem' },
  { key: 'cores', label: 'Cores', width: '4.5rem' },
  { key: 'memory', label: 'Memory', width: '6rem', render: (r) => gib(r.memory) },
  { key: 'created', label: 'Created', width: '10rem', render: (r) => fmtTime(r.created) },
];

const systemFilters = [
  { key: 'type', label: 'Type' },
  { key: 'state', label: 'State' },
  { key: 'host', label: 'Host' },
];

export function SystemsList({ params }) {
  const coll = useCollection({ path: SYSTEMS, select: systemSelect, toRow: systemRow, affected: systemsAffected });
  return <ListView name="systems" title="Systems" noun="systems" params={params} coll={coll} columns={systemColumns}
    filters={systemFilters} empty={EMPTY.systems} summary={(rows) => systemsSplit(rows.map((r) => r.type))} />;
}

// Hosts: the physical systems (each a compute block), with the systems
// composed on them; a host in a reservation is Reserved.

const reservationsAffected = (rec) => {
  const at = origin(rec);
  return at.startsWith(`${RESERVATIONS}/`) || at.startsWith(`${SYSTEMS}/`) || undefined;
};

function reservationRow(m) {
  const stanzas = m.Manifest?.Stanzas ?? [];
  const r = {
    id: m.Id,
    client: m.Client ?? '',
    blocks: (m.ReservedResourceBlocks ?? []).map((b) => last(b['@odata.id'])),
    systems: stanzas.map((s) => s.StanzaId ?? ''),
    description: m.Manifest?.Description ?? '',
    reserved: m.ReservationTime ?? '',
    expires: m.Oem?.Rackpool?.ExpiresAt ?? '',
  };
  r.text = [r.id, r.client, r.description, ...r.blocks, ...r.systems].join(' ').toLowerCase();
  return r;
}

const hostColumns = [
  { key: 'id', label: 'Host', width: '8rem', render: (r) => systemLink(r.id) },
  { key: 'rack', label: 'Rack', width: '6rem' },
  { key: 'state', label: 'State', width: '7.5rem', render: (r) => <State value={r.state} /> },
  { key: 'health', label: 'Health', width: '6rem', render: (r) => <Health value={r.health} /> },
  { key: 'cores', label: 'Cores', width: '4.5rem' },
  { key: 'memory', label: 'Local memory', width: '7rem', render: (r) => gib(r.memory) },
  { key: 'composedInto', label: 'Composed into', value: (r) => r.composedInto.join(' '), render: (r) => links(r.composedInto, systemLink) },
  { key: 'block', label: 'Compute block', width: '8rem', value: (r) => r.id, render: (r) => blockLink(r.id) },
];

const hostFilters = [
  { key: 'rack', label: 'Rack' },
  { key: 'state', label: 'State' },
  { key: 'health', label: 'Health' },
];

export function HostsList({ params }) {
  const hosts = useCollection({ path: SYSTEMS, select: systemSelect, toRow: systemRow, keep: (m) => m.SystemType === 'Physical',
    affected: systemsAffected });
  const reservations = useCollection({ path: RESERVATIONS, toRow: reservationRow, affected: reservationsAffected });
  const rows = useMemo(() => {
    const reserved = new Set(reservations.rows.flatMap((r) => r.blocks));
    return hosts.rows.map((h) => ({ ...h, state: h.composedInto.length ? 'Composed' : reserved.has(h.id) ? 'Reserved' : 'Unused' }));
  }, [hosts.rows, reservations.rows]);
  return <ListView name="hosts" title="Hosts" noun="hosts" params={params} coll={hosts} rows={rows} columns={hostColumns}
    filters={hostFilters} empty={EMPTY.hosts} />;
}

// Pooled drives.

function driveRow(m) {
  const r = {
    id: m.Id,
    kind: m.Kind ?? '',
    model: m.Model ?? '',
    capacity: m.CapacityBytes,
    fabric: m.Fabric ?? '',
    state: m.State ?? '',
    node: m.BlockNode ?? '',
    inService: m.InService ? 'Yes' : 'No',
    reason: m.Reason ?? '',
    since: m.Since ?? '',
  };
  r.text = [r.id, r.kind, r.model, r.fabric, r.node, r.reason].join(' ').toLowerCase();
  return r;
}

// drivesAffected: the drive an event is about, or every drive of its
// blocknode.
function drivesAffected(rec, rows) {
  const at = origin(rec);
  if (at.startsWith(`${DRIVES}/`)) return [last(at)];
  if (at.startsWith('/redfish/v1/Oem/Rackpool/BlockNodes/')) {
    const node = last(at);
    return [...rows.values()].filter((r) => r.node === node).map((r) => r.id);
  }
  return [];
}

const driveColumns = [
  { key: 'id', label: 'Drive', width: '9rem', render: (r) => blockLink(r.id) },
  { key: 'kind', label: 'Kind', width: '5rem' },
  { key: 'model', label: 'Model' },
  { key: 'capacity', label: 'Capacity', width: '6rem', render: (r) => fmtBytes(r.capacity) },
  { key: 'fabric', label: 'Fabric', width: '6rem' },
  { key: 'state', label: 'State', width: '7rem', render: (r) => <State value={r.state} /> },
  { key: 'node', label: 'Blocknode', width: '7rem', render: (r) => r.node && systemLink(r.node) },
  { key: 'inService', label: 'In service', width: '5.5rem' },
  { key: 'reason', label: 'Reason' },
  { key: 'since', label: 'Since', width: '10rem', render: (r) => fmtTime(r.since) },
];

const driveFilters = [
  { key: 'state', label: 'State' },
  { key: 'kind', label: 'Kind' },
  { key: 'node', label: 'Blocknode' },
];

export function DrivesList({ params }) {
  const coll = useCollection({ path: DRIVES, toRow: driveRow, affected: drivesAffected });
  const note = session.info?.tenant && coll.complete && !coll.rows.length
    ? <p class="notice">Pooled drives are the operators' (accounts in no tenant); a tenant's accounts see none.</p> : null;
  return (
    <ListView name="drives" title="Pooled drives" noun="drives" params={params} coll={coll} columns={driveColumns}
      filters={driveFilters} empty={EMPTY.drives} disabled="Pooled drives are not enabled on this service.">
      {note}
    </ListView>
  );
}

// Memory leases. The service publishes no lease events, and leases end on
// their own, so the list is read again every LEASE_POLL_MS.

const LEASE_POLL_MS = 15000;

function leaseRow(m) {
  const r = {
    id: m.Id,
    node: m.MemoryNode ?? '',
    capacity: m.CapacityBytes,
    rights: m.Rights ?? '',
    tenant: m.Tenant ?? '',
    owner: m.Owner ?? '',
    host: m.Host ?? '',
    state: m.State ?? '',
    mapped: m.Mapped ? 'Yes' : 'No',
    expires: m.Expires ?? '',
  };
  r.text = [r.id, r.node, r.tenant, r.owner, r.host].join(' ').toLowerCase();
  return r;
}

const leaseColumns = [
  { key: 'id', label: 'Lease', width: '13rem' },
  { key: 'node', label: 'Memory node', width: '8rem' },
  { key: 'capacity', label: 'Capacity', width: '6rem', render: (r) => fmtBytes(r.capacity) },
  { key: 'rights', label: 'Rights', width: '4.5rem' },
  { key: 'state', label: 'State', width: '6.5rem', render: (r) => <State value={r.state} /> },
  { key: 'host', label: 'Host', width: '6rem', render: (r) => r.host && systemLink(r.host) },
  { key: 'mapped', label: 'Mapped', width: '5.5rem' },
  { key: 'tenant', label: 'Tenant', width: '6rem' },
  { key: 'owner', label: 'Owner' },
  { key: 'expires', label: 'Expires', width: '10rem', render: (r) => fmtTime(r.expires) },
];

const leaseFilters = [
  { key: 'state', label: 'State' },
  { key: 'node', label: 'Memory node' },
  { key: 'host', label: 'Host' },
  { key: 'tenant', label: 'Tenant' },
];

export function LeasesList({ params }) {
  const coll = useCollection({ path: LEASES, toRow: leaseRow, poll: LEASE_POLL_MS });
  return <ListView name="leases" title="Memory leases" noun="leases" params={params} coll={coll} columns={leaseColumns}
    filters={leaseFilters} empty={EMPTY.leases} disabled="The memory service is not enabled on this service." />;
}

// Reservations, which a session with ConfigureComponents may release.

export function ReservationsList({ params }) {
  const coll = useCollection({ path: RESERVATIONS, toRow: reservationRow, affected: reservationsAffected });
  const [releasing, setReleasing] = useState(null);
  const columns = useMemo(() => [
    { key: 'id', label: 'Reservation', width: '10rem' },
    { key: 'client', label: 'Tenant', width: '7rem' },
    { key: 'blocks', label: 'Blocks', value: (r) => r.blocks.length, render: (r) => links(r.blocks, blockLink) },
    { key: 'systems', label: 'Systems', width: '5.5rem', value: (r) => r.systems.length, render: (r) => r.systems.length },
    { key: 'reserved', label: 'Reserved', width: '10rem', render: (r) => fmtTime(r.reserved) },
    { key: 'expires', label: 'Expires', width: '10rem', render: (r) => fmtTime(r.expires) },
    ...(session.canCompose ? [{
      key: 'release', label: 'Actions', width: '6.5rem', sortable: false,
      render: (r) => <button type="button" onClick={() => setReleasing(r)}>Release</button>,
    }] : []),
  ], []);
  return (
    <ListView name="reservations" title="Composition reservations" noun="reservations" params={params} coll={coll}
      columns={columns} filters={[{ key: 'client', label: 'Tenant' }]} empty={EMPTY.reservations}>
      {releasing && <ReleaseDialog reservation={releasing} onClose={() => setReleasing(null)} onReleased={coll.reload} />}
    </ListView>
  );
}

// useAction runs one change at a time: busy while it runs, error when the
// service refuses it.
function useAction() {
  const [state, setState] = useState({ busy: false, error: null });
  const run = async (fn) => {
    setState({ busy: true, error: null });
    try {
      await fn();
      setState({ busy: false, error: null });
      return true;
    } catch (error) {
      setState({ busy: false, error });
      return false;
    }
  };
  return [state, run];
}

function ReleaseDialog({ reservation: r, onClose, onReleased }) {
  const [{ busy, error }, run] = useAction();
  const release = async () => {
    if (await run(() => api.del(`${RESERVATIONS}/${encodeURIComponent(r.id)}`))) {
      onReleased();
      onClose();
    }
  };
  return (
    <Confirm title={`Release reservation ${r.id}?`} confirmLabel={`Release ${r.id}`} busy={busy} onConfirm={release} onCancel={onClose}>
      <p>The reserved blocks go back to the free pool: {r.blocks.join(', ')}.</p>
      {busy && <p role="status">Releasing {r.id}…</p>}
      <ErrorMessage error={error} />
    </Confirm>
  );
}

// Details.

// Props is a definition list of [label, value] pairs; empty values
// (null, false, '', []) are left out.
function Props({ items }) {
  return (
    <dl class="props">
      {items.filter(([, v]) => v != null && v !== false && v !== '' && !(Array.isArray(v) && !v.length)).map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

// useRefetchOn re-reads (reload) when an event concerns this page, as
// concerns(record) says, once events stop coming for EVENT_MS.
function useRefetchOn(concerns, reload) {
  const timer = useRef(0);
  useEffect(() => () => clearTimeout(timer.current), []);
  useEvents((data) => {
    if (!(data.Events ?? []).some(concerns)) return;
    clearTimeout(timer.current);
    timer.current = setTimeout(reload, EVENT_MS);
  });
}

// A 404 is shown as the service's message with a way back to the list.
function Missing({ error, list, noun }) {
  return (
    <>
      <ErrorMessage error={error} />
      {error.status === 404 && <p><a href={href(list)}>All {noun}</a></p>}
    </>
  );
}

const TELEMETRY_MS = 3000;

// useTelemetry polls a device's fabric endpoint every TELEMETRY_MS.
function useTelemetry(path) {
  const [state, setState] = useState({ data: null, error: null, at: null });
  useEffect(() => {
    const ctl = new AbortController();
    let timer = 0;
    const read = async () => {
      try {
        const data = await api.get(path, { signal: ctl.signal });
        setState({ data, error: null, at: new Date() });
      } catch (error) {
        if (ctl.signal.aborted) return;
        setState((s) => ({ ...s, error }));
      }
      timer = setTimeout(read, TELEMETRY_MS);
    };
    read();
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [path]);
  return state;
}

function Telemetry({ fabric, device }) {
  const path = `/redfish/v1/Fabrics/${encodeURIComponent(fabric)}/Endpoints/${encodeURIComponent(device)}`;
  const { data, error, at } = useTelemetry(path);
  const t = data?.Oem?.Rackpool?.Telemetry;
  return (
    <section class="details-part" aria-labelledby="block-telemetry-title">
      <h2 id="block-telemetry-title">Live telemetry</h2>
      <ErrorMessage error={error} />
      {!data && !error && <Loading what="telemetry" />}
      {data && !t && <p>The fabric {fabric} reports no telemetry for {device}.</p>}
      {data && (
        <Props items={[
          ['Endpoint health', <Health value={data.Status?.Health} />],
          ...(t ? [
            ['Temperature', `${t.TemperatureC.toFixed(1)} °C`],
            ['Negotiated link', t.LinkWidth ? `x${t.LinkWidth} at ${t.LinkSpeed}` : 'Down'],
            ['Correctable errors', count(t.CorrectableErrors)],
            ['Uncorrectable errors', count(t.UncorrectableErrs)],
            ['Utilisation', `${t.UtilisationPercent.toFixed(1)} %`],
          ] : []),
          ['Updated', at?.toLocaleTimeString()],
        ]} />
      )}
    </section>
  );
}

export function BlockDetails({ id }) {
  const path = `${BLOCKS}/${encodeURIComponent(id)}`;
  const { data: b, error, reload } = useResource(path);
  const o = b?.Oem?.Rackpool ?? {};
  const systems = (b?.Links?.ComputerSystems ?? []).map((r) => last(r['@odata.id']));
  useRefetchOn((rec) => {
    const e = rec.Oem?.Rackpool ?? {};
    const at = origin(rec);
    return e.Blocks?.includes(id) || e.Host === id || at === path || systems.includes(last(at))
      || (o.Device && at.endsWith(`/Endpoints/${o.Device}`));
  }, reload);

  let body;
  if (error) body = <Missing error={error} list="/blocks" noun="blocks" />;
  else if (!b) body = <Loading what={`block ${id}`} />;
  else {
    const cs = b.CompositionStatus ?? {};
    const attrs = Object.entries(o.Attributes ?? {}).map(([k, v]) => `${k}=${v}`).join(', ');
    body = (
      <>
        <section class="details-part" aria-labelledby="block-device-title">
          <h2 id="block-device-title">{o.Device ? 'Device' : 'Host'}</h2>
          <Props items={[
            ['Kind', o.Kind],
            ['Model', o.Model],
            ['Vendor', o.Vendor],
            ['Vendor ID / Device ID', o.VendorId && `${o.VendorId} / ${o.DeviceId}`],
            ['Link', o.LinkWidth && `x${o.LinkWidth} at ${o.LinkSpeed}`],
            ['Capacity', o.CapacityBytes != null && fmtBytes(o.CapacityBytes)],
            ['Cores', o.Cores],
            ['Local memory', o.LocalMemoryGiB != null && `${o.LocalMemoryGiB} GiB`],
            ['Host system', !o.Device && systemLink(b.Id)],
            ['Device', o.Device],
            ['Fabric', o.Fabric],
            ['Switch', o.Switch && `${o.Switch} (${(o.SwitchPorts ?? []).join(', ')})`],
            ['Drawer', o.Drawer && `${o.Drawer}, ${o.DrawerMode} mode, slot ${o.Slot}`],
            ['Attributes', attrs],
          ]} />
        </section>
        <section class="details-part" aria-labelledby="block-composition-title">
          <h2 id="block-composition-title">Composition</h2>
          <Props items={[
            ['Health', <Health value={b.Status?.Health} />],
            ['Composition state', <State value={compositionState(cs)} />],
            ['Reserved', cs.Reserved ? 'Yes' : 'No'],
            ['Compositions', `${cs.NumberOfCompositions ?? 0} of at most ${cs.MaxCompositions ?? 1}`],
            ['Systems', systems.length ? links(systems, systemLink) : 'None'],
            ['Held by', o.HeldBy],
            ['Zones', (b.Links?.Zones ?? []).map((z) => last(z['@odata.id'])).join(', ')],
          ]} />
        </section>
        {o.Device && o.Fabric && <Telemetry fabric={o.Fabric} device={o.Device} />}
      </>
    );
  }
  const focus = o.Device || (b && b.Id);
  return (
    <Page id="block" title={`Block ${id}`}
      actions={focus && <a href={href('/topology', { focus })}>Show in topology</a>}>
      <div class="details" data-testid="block-details">{body}</div>
    </Page>
  );
}

export function SystemDetails({ id }) {
  const path = `${SYSTEMS}/${encodeURIComponent(id)}`;
  const { data: s, error, reload } = useResource(path);
  const [confirming, setConfirming] = useState(false);
  const [{ busy, error: refused }, run] = useAction();
  useRefetchOn((rec) => origin(rec) === path || rec.Oem?.Rackpool?.Host === id, reload);

  const o = s?.Oem?.Rackpool ?? {};
  const composed = s?.SystemType === 'Composed';
  const blockIds = (s?.Links?.ResourceBlocks ?? []).map((r) => last(r['@odata.id']));
  const decompose = async () => {
    const headers = s['@odata.etag'] ? { 'If-Match': s['@odata.etag'] } : undefined;
    if (await run(() => api.del(path, { headers }))) navigate('/systems');
    else reload();
  };

  let body;
  if (error) body = <Missing error={error} list="/systems" noun="systems" />;
  else if (!s) body = <Loading what={`system ${id}`} />;
  else {
    const blocks = o.Blocks ?? blockIds.map((b) => ({ Id: b }));
    body = (
      <>
        <Props items={[
          ['Id', s.Id],
          ['Name', s.Name],
          ['Description', s.Description],
          ['Type', composed ? 'Composed system' : 'Physical host'],
          ['Host', composed ? o.Host && systemLink(o.Host) : blockLink(s.Id)],
          ['State', <State value={o.CompositionState ?? s.Status?.State} />],
          ['Health', <Health value={s.Status?.Health} />],
          ['Tenant', o.Tenant],
          ['Cores', s.ProcessorSummary?.CoreCount],
          ['Processors', s.ProcessorSummary?.Count],
          ['Memory', gib(s.MemorySummary?.TotalSystemMemoryGiB)],
          ['Composed into', o.ComposedInto && (o.ComposedInto.length ? links(o.ComposedInto, systemLink) : 'None')],
          ['Adding', (o.Adding ?? []).join(', ')],
          ['Removing', (o.Removing ?? []).join(', ')],
          ['Created', fmtTime(o.Created)],
          ['Updated', fmtTime(o.Updated)],
        ]} />
        {composed && (
          <section class="details-part" aria-labelledby="system-blocks-title">
            <h2 id="system-blocks-title">Blocks</h2>
            <table class="plain" data-testid="system-blocks">
              <thead>
                <tr>
                  <th scope="col">Block</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Fabric</th>
                  <th scope="col">Host port</th>
                  <th scope="col">Round trip</th>
                  <th scope="col">Hops</th>
                </tr>
              </thead>
              <tbody>
                {blocks.map((b) => (
                  <tr key={b.Id} data-row={b.Id}>
                    <td>{blockLink(b.Id)}</td>
                    <td>{b.Kind}</td>
                    <td>{b.Fabric}</td>
                    <td>{b.HostPort}</td>
                    <td>{b.RoundTripNs != null && `${b.RoundTripNs.toFixed(1)} ns`}</td>
                    <td>{b.Hops}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        )}
      </>
    );
  }
  const actions = (
    <>
      <a href={href('/telemetry', { system: id })}>Telemetry</a>
      {composed && session.canCompose && (
        <button type="button" class="danger" onClick={() => setConfirming(true)}>Decompose</button>
      )}
    </>
  );
  return (
    <Page id="system" title={`System ${id}`} actions={actions}>
      <div class="details" data-testid="system-details">{body}</div>
      {confirming && s && (
        <Confirm title={`Decompose ${id}?`} confirmLabel={`Decompose ${id}`} busy={busy} onConfirm={decompose}
          onCancel={() => setConfirming(false)}>
          <p>
            {s.Name && s.Name !== id ? `${s.Name} (${id})` : id} on host {o.Host} is taken apart: its devices are detached and
            go back to the free pool.
          </p>
          <p>Blocks: {blockIds.join(', ')}.</p>
          {busy && <p role="status">Decomposing {id}…</p>}
          <ErrorMessage error={refused} />
        </Confirm>
      )}
    </Page>
  );
}
