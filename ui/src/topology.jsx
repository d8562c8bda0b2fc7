// The topology view: the fabric model drawn as SVG, with the composed
// systems' devices highlighted. It reads the compact topology document
// once, the composed systems for the attachments (an indexed $filter;
// again, debounced, whenever the event stream reports a composition
// change) and, after the first paint, the blocks whose health is not OK
// (indexed too: every other block is OK). Racks, ranges of hosts and
// switches and device groups open and close; only what is open is laid
// out (topology-layout.js), and only what lies in the viewport is drawn,
// so the P4 pod's 245,760 blocks stay a few hundred SVG elements.

import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, fetchMembers, useEvents, lastSegment } from './api.js';
import { Page, ErrorMessage, Health, Loading, fmtBytes } from './components.jsx';
import { href } from './router.js';
import {
  buildModel, attachments, layoutMemo, locate, matches, reveal, deviceSystems, rangeSpan, switchHostPorts, worse, DEVICE_KINDS, FABRIC_KINDS, SHARED,
} from './topology-layout.js';
import './topology.css';

const SYSTEM_SELECT = ['Id', 'Name', 'SystemType', 'Oem/Rackpool/Host', 'Oem/Rackpool/Blocks', 'Oem/Rackpool/CompositionState'];
const COMPOSED = "SystemType eq 'Composed'"; // indexed: the hosts are not read
const BLOCK_SELECT = ['Id', 'Status/Health', 'Oem/Rackpool/Device'];
const NOT_OK = ['Warning', 'Critical']; // Status/Health eq is indexed; ne is not
const LIST_MAX = 200; // the most items a details list shows
const EDGE_MAX = 200; // beyond this many links crossing the view, only those with an end in view are drawn
const MIN_K = 0.05;
const MAX_K = 3;
const TEXT_K = 0.4; // below this zoom, nodes are drawn without their text
const READABLE_K = 0.6; // the opening view is drawn at least this large when it can be
const PAD = 24; // screen pixels around a fitted drawing
const MARGIN = 100; // screen pixels beyond the viewport still drawn
const PAN_STEP = 80;
const MIN_CANVAS_H = 320;

const plural = (n, one) => `${n.toLocaleString()} ${n === 1 ? one : `${one}s`}`;

// HealthKnown is what the view knows of the devices' and hosts' health: the
// ones read as not OK, and (known) whether the rest have been read, which
// makes them OK.
class HealthKnown {
  constructor(bad = new Map(), known = false) {
    this.bad = bad;
    this.known = known;
  }

  get(id) {
    return this.bad.get(id) || (this.known ? 'OK' : undefined);
  }

  has(id) {
    return this.known || this.bad.has(id);
  }

  // with is a copy with id's health set to h.
  with(id, h) {
    const bad = new Map(this.bad);
    if (h === 'OK') bad.delete(id);
    else bad.set(id, h);
    return new HealthKnown(bad, this.known);
  }
}

const clampK = (k) => Math.min(MAX_K, Math.max(MIN_K, k));

// defaultExpanded opens every rack of a small topology (and the device
// groups when there are few devices); of a big one, the first rack only.
// It is what a link to one node (?focus=) opens around it; the plain view
// opens on openingView's choice.
function defaultExpanded(model) {
  const open = new Set();
  const racks = [...model.racks.values()];
  for (const r of racks.length <= 4 ? racks : racks.slice(0, 1)) open.add(r.key);
  if (model.devices.size <= 100) for (const g of model.groups.keys()) open.add(g);
  return open;
}

// detailLevels lists what the view could open with, the most detailed
// first: every rack and device group open (a small rack), every rack open
// with its groups closed, the first rack open, every rack closed (when
// there are several: one closed rack alone says too little).
function detailLevels(model) {
  const racks = [...model.racks.values()].map((r) => r.key);
  const levels = [];
  if (racks.length <= 4) {
    if (model.devices.size <= 100) levels.push(new Set([...racks, ...model.groups.keys()]));
    levels.push(new Set(racks));
  }
  if (racks.length > 1) levels.push(new Set(racks.slice(0, 1)), new Set());
  return levels;
}

// wholeK is the zoom at which the whole drawing fits size (at most 1).
const wholeK = (lay, size) => Math.min(1, (size.w - PAD) / Math.max(lay.width, 1), (size.h - PAD) / Math.max(lay.height, 1));

// placed puts the drawing at zoom k, centred across and at the top.
const placed = (lay, size, k) => ({ k, x: (size.w - lay.width * k) / 2, y: PAD / 2 });

// openingView chooses how the view opens: the most detailed level whose
// whole drawing fits the canvas at a readable zoom, fitted. When none does
// (many racks), the first rack open, fitted as fitted() does. It returns
// {expanded, view}; layout is layoutMemo()'s.
function openingView(layout, model, att, health, filters, size) {
  const levels = detailLevels(model);
  for (const expanded of levels) {
    const lay = layout(model, { expanded, ...filters }, att, health);
    const k = wholeK(lay, size);
    if (k >= READABLE_K) return { expanded, view: placed(lay, size, k) };
  }
  const expanded = new Set([...model.racks.values()].slice(0, 1).map((r) => r.key));
  return { expanded, view: fitted(layout(model, { expanded, ...filters }, att, health), size) };
}

// fitted is the view after a change of filters or Collapse all: the whole
// drawing when it can be read that small; else the first band (rack) whole
// when it can; else as wide as the canvas, the rest below to pan to. The
// device columns are never cut off at the side.
function fitted(lay, size) {
  const k = wholeK(lay, size);
  if (k >= READABLE_K) return placed(lay, size, k);
  const first = lay.bands[0];
  const across = Math.min(1, (size.w - PAD) / Math.max(lay.width, 1));
  const band = first ? Math.min(across, (size.h - PAD) / Math.max(first.bottom, 1)) : 0;
  return placed(lay, size, clampK(band >= READABLE_K ? band : across));
}

// fitView (the Fit button, and 0) fits the whole drawing however small.
function fitView(lay, size) {
  return placed(lay, size, clampK(wholeK(lay, size)));
}

// edgePath is a horizontal S-curve from the right of one node to the left
// of another, at the height of their first text line for tall nodes.
function edgePath(e) {
  const x1 = e.from.x + e.from.w;
  const y1 = e.from.y + Math.min(e.from.h, 44) / 2;
  const x2 = e.to.x;
  const y2 = e.to.y + Math.min(e.to.h, 44) / 2;
  const mx = (x1 + x2) / 2;
  return { d: `M${x1} ${y1}C${mx} ${y1} ${mx} ${y2} ${x2} ${y2}`, x1, y1, x2, y2 };
}

export function TopologyView({ params }) {
  const [model, setModel] = useState(null);
  const [error, setError] = useState(null);
  const [systems, setSystems] = useState(null);
  const [sysError, setSysError] = useState(null);
  const [health, setHealth] = useState(() => new HealthKnown());
  const [expanded, setExpanded] = useState(null);
  const [kind, setKind] = useState('');
  const [rack, setRack] = useState('');
  const [selected, setSelected] = useState('');
  const [found, setFound] = useState('');
  const [query, setQuery] = useState('');
  const [search, setSearch] = useState(null); // {note, others}
  const [view, setView] = useState(null); // {x, y, k}: screen = layout × k + (x, y)
  const [size, setSize] = useState({ w: 0, h: 0 });
  const [centreOn, setCentreOn] = useState('');
  const canvas = useRef();
  const svg = useRef();
  const drag = useRef(null);
  const dragged = useRef(false);
  const focusedParam = useRef('');
  const opened = useRef(false); // the first view has been chosen
  const reloadTimer = useRef();
  const sysCtl = useRef();

  // The topology and the attachments, together: the first drawing already
  // shows what is attached.
  useEffect(() => {
    const ctl = new AbortController();
    Promise.all([
      api.get('/redfish/v1/Oem/Rackpool/Topology?format=compact', { signal: ctl.signal }),
      fetchMembers('/redfish/v1/Systems', { select: SYSTEM_SELECT, filter: COMPOSED, signal: ctl.signal }).catch((err) => {
        if (err.name === 'AbortError') throw err;
        setSysError(err);
        return [];
      }),
    ]).then(([topo, sys]) => {
      const m = buildModel(topo);
      setModel(m);
      setExpanded(defaultExpanded(m));
      setSystems(sys);
    }, (err) => err.name !== 'AbortError' && setError(err));
    return () => ctl.abort();
  }, []);

  // Health is extra: read after the first drawing, the blocks not OK only
  // (Warning, Critical), kept up to date by the stream's
  // ResourceStatusChanged events. Should a read fail, the nodes just show
  // no health.
  useEffect(() => {
    if (!model) return undefined;
    const ctl = new AbortController();
    Promise.all(NOT_OK.map((h) => fetchMembers('/redfish/v1/CompositionService/ResourceBlocks', {
      select: BLOCK_SELECT, filter: `Status/Health eq '${h}'`, signal: ctl.signal,
    }))).then((lists) => {
      const m = new Map();
      for (const b of lists.flat()) {
        const h = b.Status?.Health;
        const id = b.Oem?.Rackpool?.Device || b.Id; // a host's compute block is the host
        if (h) m.set(id, worse(m.get(id), h));
      }
      setHealth(new HealthKnown(m, true));
    }, () => {});
    return () => ctl.abort();
  }, [model]);

  const reloadSystems = useCallback(() => {
    clearTimeout(reloadTimer.current);
    reloadTimer.current = setTimeout(() => {
      sysCtl.current?.abort();
      const ctl = new AbortController();
      sysCtl.current = ctl;
      fetchMembers('/redfish/v1/Systems', { select: SYSTEM_SELECT, filter: COMPOSED, signal: ctl.signal }).then((sys) => {
        setSystems(sys);
        setSysError(null);
      }, (err) => err.name !== 'AbortError' && setSysError(err));
    }, 300);
  }, []);
  useEffect(() => () => {
    clearTimeout(reloadTimer.current);
    sysCtl.current?.abort();
  }, []);

  useEvents((payload) => {
    let compositions = false;
    for (const ev of payload?.Events || []) {
      const origin = ev.OriginOfCondition?.['@odata.id'] || '';
      if (/^\/redfish\/v1\/(Systems|CompositionService\/ResourceBlocks)(\/|$)/.test(origin)) compositions = true;
      // A device's (or host's) health: origin its endpoint (or system),
      // MessageArgs [name, health].
      const m = /^\/redfish\/v1\/(?:Fabrics\/[^/]+\/Endpoints|Systems)\/([^/]+)$/.exec(origin);
      const h = ev.MessageArgs?.[1];
      if (m && /ResourceStatusChanged/.test(ev.MessageId || '') && h) {
        const id = decodeURIComponent(m[1]);
        setHealth((prev) => prev.with(id, h));
      }
    }
    if (compositions) reloadSystems();
  });

  const att = useMemo(() => model && systems && attachments(model, systems), [model, systems]);
  const totals = useMemo(() => model && {
    blocks: [...model.devices.values()].reduce((n, d) => n + d.blocks, model.hosts.size),
    kinds: FABRIC_KINDS.filter((k) => [...model.fabrics.values()].some((f) => f.kind === k)),
  }, [model]);
  const layout = useMemo(layoutMemo, []);
  const lay = useMemo(
    () => att && expanded && layout(model, { expanded, kind, rack }, att, health),
    [model, att, expanded, kind, rack, health],
  );

  // The canvas reaches down to the bottom of the window (the help and the
  // legend are below it), so the drawing can open fitted; its size is
  // what fitting and drawing only what is in view go by.
  useLayoutEffect(() => {
    const el = canvas.current;
    if (!el) return undefined;
    const box = el.parentElement;
    const measure = () => {
      const top = box.getBoundingClientRect().top + window.scrollY;
      const height = `${Math.max(MIN_CANVAS_H, Math.floor(window.innerHeight - top - 12))}px`;
      if (box.style.height !== height) box.style.height = height;
      const w = el.clientWidth;
      const h = el.clientHeight;
      setSize((s) => (s.w === w && s.h === h ? s : { w, h }));
    };
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    window.addEventListener('resize', measure);
    return () => {
      ro.disconnect();
      window.removeEventListener('resize', measure);
    };
  }, [!!lay]);

  useEffect(() => {
    if (!lay || !size.w) return;
    if (centreOn) {
      const n = lay.byKey.get(centreOn);
      if (n) {
        // The canvas' size now: opening the details panel may just have
        // narrowed it, before the ResizeObserver says so.
        const w = canvas.current?.clientWidth || size.w;
        const h = canvas.current?.clientHeight || size.h;
        setView((v) => {
          const k = Math.max(v?.k || 1, 1);
          const cx = n.x + Math.min(n.w, 400) / 2;
          const cy = n.y + Math.min(n.h, 200) / 2;
          return { k, x: w / 2 - cx * k, y: h / 2 - cy * k };
        });
        opened.current = true;
      }
      setCentreOn('');
    } else if (!view && !opened.current) {
      // The first view: as much detail as can be read whole.
      opened.current = true;
      const open = openingView(layout, model, att, health, { kind, rack }, size);
      setExpanded(open.expanded);
      setView(open.view);
    } else if (!view) {
      setView(fitted(lay, size));
    }
  }, [lay, size, centreOn, view]);

  const ready = !!(lay && view);
  useEffect(() => {
    if (ready) document.body.dataset.topologyReady = '1';
  }, [ready]);
  useEffect(() => () => {
    delete document.body.dataset.topologyReady;
  }, []);

  // show expands, unfilters and centres what target (reveal()'s answer)
  // names, and selects it.
  function show(target) {
    if (rack && target.rack !== rack) setRack('');
    if (kind && target.kind && target.kind !== kind) setKind('');
    setExpanded((prev) => new Set([...prev, ...target.open]));
    setSelected(target.key);
    setFound(target.key);
    setCentreOn(target.key);
  }

  function find(q) {
    if (!model || !q.trim()) return;
    const hit = locate(model, att, q);
    const others = matches(model, att, q, 9).filter((m) => `${m.type}:${m.id}` !== hit?.key);
    if (!hit) {
      setSearch({ note: `Nothing in the topology matches “${q.trim()}”.`, others: [] });
      return;
    }
    show(hit);
    setSearch({ note: `Showing ${hit.key.replace(':', ' ')}.`, others: others.slice(0, 8) });
  }

  useEffect(() => {
    if (lay && params?.focus && focusedParam.current !== params.focus) {
      focusedParam.current = params.focus;
      setQuery(params.focus);
      find(params.focus);
    }
  }, [lay, params?.focus]);

  // closeDetails gives the keyboard focus back to the node the details
  // were for.
  function closeDetails() {
    const key = selected;
    setSelected('');
    svg.current?.querySelector(`[data-node="${CSS.escape(key)}"]`)?.focus();
  }

  // activate is a click or Enter on a node: racks, ranges and groups open
  // or close; everything shows its details.
  function activate(key) {
    const n = lay.byKey.get(key);
    if (n?.type === 'rack' || n?.type === 'range' || n?.type === 'group') {
      setExpanded((prev) => {
        const next = new Set(prev);
        if (next.has(key)) next.delete(key);
        else next.add(key);
        return next;
      });
    }
    setSelected(key);
    setFound('');
  }

  const zoomAt = useCallback((f, cx, cy) => {
    setView((v) => {
      const k = clampK(v.k * f);
      return { k, x: cx - ((cx - v.x) * k) / v.k, y: cy - ((cy - v.y) * k) / v.k };
    });
  }, []);
  const zoom = (f) => zoomAt(f, size.w / 2, size.h / 2);
  const fit = () => lay && size.w && setView(fitView(lay, size));
  const pan = (dx, dy) => setView((v) => ({ ...v, x: v.x + dx, y: v.y + dy }));

  // The wheel zooms about the pointer; the listener is not passive so that
  // the page does not scroll too.
  useEffect(() => {
    const el = svg.current;
    if (!el) return undefined;
    const onWheel = (e) => {
      e.preventDefault();
      const r = el.getBoundingClientRect();
      const dy = e.deltaMode === 1 ? e.deltaY * 40 : e.deltaY;
      zoomAt(Math.exp(-dy * 0.002), e.clientX - r.left, e.clientY - r.top);
    };
    el.addEventListener('wheel', onWheel, { passive: false });
    return () => el.removeEventListener('wheel', onWheel);
  }, [!!lay, zoomAt]);

  // Dragging pans; a press that hardly moves stays a click on the node.
  function onPointerDown(e) {
    if (e.button !== 0 || !view) return;
    dragged.current = false;
    drag.current = { id: e.pointerId, sx: e.clientX, sy: e.clientY, x: view.x, y: view.y, moving: false };
  }
  function onPointerMove(e) {
    const d = drag.current;
    if (!d || d.id !== e.pointerId) return;
    const dx = e.clientX - d.sx;
    const dy = e.clientY - d.sy;
    if (!d.moving) {
      if (Math.hypot(dx, dy) < 4) return;
      d.moving = true;
      svg.current.setPointerCapture(e.pointerId);
    }
    setView((v) => ({ ...v, x: d.x + dx, y: d.y + dy }));
  }
  function onPointerUp() {
    dragged.current = !!drag.current?.moving;
    drag.current = null;
  }

  function onClick(e) {
    const el = e.target.closest?.('[data-node]');
    if (el && !dragged.current) activate(el.dataset.node);
  }

  function onKeyDown(e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const node = e.target.closest?.('[data-node]');
    const keys = {
      ArrowLeft: () => pan(PAN_STEP, 0),
      ArrowRight: () => pan(-PAN_STEP, 0),
      ArrowUp: () => pan(0, PAN_STEP),
      ArrowDown: () => pan(0, -PAN_STEP),
      '+': () => zoom(1.25),
      '=': () => zoom(1.25),
      '-': () => zoom(0.8),
      0: fit,
      Escape: closeDetails,
      Enter: () => node && activate(node.dataset.node),
      ' ': () => node && activate(node.dataset.node),
    };
    const fn = keys[e.key];
    if (fn) {
      e.preventDefault();
      fn();
    }
  }

  if (error) {
    return (
      <Page id="topology" title="Topology">
        <ErrorMessage error={error} />
      </Page>
    );
  }
  if (!lay) {
    return (
      <Page id="topology" title="Topology">
        <Loading what="the topology" />
      </Page>
    );
  }

  // Nothing is drawn until the first view is chosen (its size measured).
  const v = view || { x: 0, y: 0, k: 1 };
  // The part of the plane in view (plus a margin), in layout units.
  const x0 = (-v.x - MARGIN) / v.k;
  const y0 = (-v.y - MARGIN) / v.k;
  const x1 = (size.w - v.x + MARGIN) / v.k;
  const y1 = (size.h - v.y + MARGIN) / v.k;
  const inView = (n) => n.x < x1 && n.x + n.w > x0 && n.y < y1 && n.y + n.h > y0;
  const text = v.k >= TEXT_K;
  // The links that cross the view; when there are very many (an open
  // range of the pod's hosts fans out to its switches), those with an end
  // in view.
  let edgesInView = lay.edges.map((e) => [e, edgePath(e)])
    .filter(([, p]) => !(Math.max(p.x1, p.x2) < x0 || Math.min(p.x1, p.x2) > x1 || Math.max(p.y1, p.y2) < y0 || Math.min(p.y1, p.y2) > y1));
  if (edgesInView.length > EDGE_MAX) {
    const at = (x, y) => x >= x0 && x <= x1 && y >= y0 && y <= y1;
    edgesInView = edgesInView.filter(([, p]) => at(p.x1, p.y1) || at(p.x2, p.y2));
  }

  // SVG attributes are set as written and are case-sensitive: tabindex,
  // not tabIndex.
  const node = (n) => (
    <g key={n.key} class={`tnode t-${n.type} ${n.cls}${n.key === selected ? ' selected' : ''}${n.key === found ? ' found' : ''}`}
      data-node={n.key} transform={`translate(${n.x},${n.y})`} tabindex="0" role="button" aria-label={n.label}
      aria-expanded={n.expanded}>
      <rect width={n.w} height={n.h} rx={n.type === 'fabric' ? 10 : 6} />
      {text && n.lines.map((l, i) => (
        // The space keeps the lines apart in the text read out (and in
        // textContent); SVG drops it from the drawing.
        <text key={i} x={10} y={17 + i * 15} class={i ? 'sub' : ''}>{i ? ` ${l}` : l}</text>
      ))}
    </g>
  );

  return (
    <Page id="topology" title="Topology">
      <div class="topology-tools">
        <form role="search" class="topology-search" onSubmit={(e) => {
          e.preventDefault();
          find(query);
        }}>
          <label for="topology-search">Search topology</label>
          <input id="topology-search" type="search" value={query} autocomplete="off" spellcheck={false}
            placeholder="host, device, block, fabric or system ID" aria-describedby="topology-search-note"
            onInput={(e) => setQuery(e.currentTarget.value)} />
          <button type="submit">Find</button>
        </form>
        <label for="topology-kind">Fabric kind</label>
        <select id="topology-kind" value={kind} onChange={(e) => {
          setKind(e.currentTarget.value);
          setView(null);
        }}>
          <option value="">All kinds</option>
          {totals.kinds.map((k) => <option key={k} value={k}>{k}</option>)}
        </select>
        <label for="topology-rack">Rack</label>
        <select id="topology-rack" value={rack} onChange={(e) => {
          setRack(e.currentTarget.value);
          setView(null);
        }}>
          <option value="">All racks</option>
          {[...model.racks.keys()].map((r) => <option key={r} value={r}>{r === SHARED ? 'Shared fabrics' : r}</option>)}
        </select>
        <div class="topology-zoom" role="group" aria-label="Zoom">
          <button type="button" aria-label="Zoom in" title="Zoom in (+)" onClick={() => zoom(1.25)}>+</button>
          <button type="button" aria-label="Zoom out" title="Zoom out (−)" onClick={() => zoom(0.8)}>−</button>
          <button type="button" title="Fit the drawing in view (0)" onClick={fit}>Fit</button>
          <button type="button" onClick={() => {
            setExpanded(new Set());
            setView(null);
          }}>Collapse all</button>
        </div>
      </div>
      <div id="topology-search-note" class="topology-note" role="status">
        {search?.note}
        {search?.others.length > 0 && (
          <span class="topology-others">
            {' '}Also matching:{' '}
            {search.others.map((m) => (
              <button key={`${m.type}:${m.id}`} type="button" class="topo-link" onClick={() => {
                setQuery(m.id);
                find(m.id);
              }}>{m.id}</button>
            ))}
          </span>
        )}
      </div>
      {sysError && <ErrorMessage error={sysError} />}
      <p class="topology-stats">
        {model.name}: {[plural(model.hosts.size, 'host'), plural(model.fabrics.size, 'fabric'), plural(model.devices.size, 'device'),
          plural(totals.blocks, 'block'), plural(att.systems.length, 'composed system'), `${plural(att.byDevice.size, 'device')} attached`].join(' · ')}
      </p>
      <div class={`topology-main${selected ? ' with-details' : ''}`}>
        <div class="topology-canvas" ref={canvas}>
          <svg ref={svg} data-testid="topology-svg" data-ready={ready ? '1' : undefined} width="100%" height="100%"
            role="group" aria-label={`Topology diagram of ${model.name}`} aria-describedby="topology-help" tabindex="0"
            onClick={onClick} onKeyDown={onKeyDown} onPointerDown={onPointerDown} onPointerMove={onPointerMove}
            onPointerUp={onPointerUp} onPointerCancel={onPointerUp}>
            {view && <g transform={`translate(${v.x},${v.y}) scale(${v.k})`}>
              {lay.frames.filter(inView).map(node)}
              <g class="edges" aria-hidden="true">
                {edgesInView.map(([e, p]) => <path key={e.key} d={p.d} class={e.attached ? 'edge attached' : 'edge'} />)}
              </g>
              {lay.nodes.filter(inView).map(node)}
            </g>}
          </svg>
        </div>
        {selected && (
          <Details nodeKey={selected} model={model} att={att} health={health} onClose={closeDetails}
            onShow={(key) => {
              const t = reveal(model, key);
              if (t) show(t);
            }} />
        )}
      </div>
      <p id="topology-help" class="topology-help">
        Drag or use the arrow keys to pan; the mouse wheel, + and − zoom; 0 fits. Tab to a node and press Enter for its
        details; racks and groups open and close the same way.
      </p>
      <Legend />
    </Page>
  );
}

function Legend() {
  const swatch = (cls, extra) => (
    <svg class="swatch" width="28" height="16" aria-hidden="true">
      <g class={`tnode ${cls}`}><rect x="1" y="1" width="26" height="14" rx="3" /></g>
      {extra}
    </svg>
  );
  return (
    <section class="topology-legend" aria-labelledby="topology-legend-title">
      <h2 id="topology-legend-title">Legend</h2>
      <ul>
        <li>{swatch('t-host host')} host</li>
        <li>{swatch('t-switch')} switch</li>
        <li>{swatch('t-drawer drawer')} chassis drawer (with its mode and host ports)</li>
        {DEVICE_KINDS.map((k) => <li key={k}>{swatch(`t-device kind-${k}`)} {k}</li>)}
        <li>{swatch('t-group kind-gpu')} ▸ closed group of devices, ▾ open group (click to toggle)</li>
        <li>{swatch('t-range')} ▸ range of a rack's hosts or a fabric's switches, when there are more than 64, ▾ open range (click to toggle)</li>
        <li>{swatch('t-device kind-gpu attached')} attached to a composed system: thick outline and the word “attached”</li>
        <li>
          <svg class="swatch" width="28" height="16" aria-hidden="true"><path class="edge attached" d="M1 8H27" /></svg>{' '}
          thick dashed link: a host port carrying an attached device
        </li>
        <li>{swatch('t-device kind-gpu health-warning')} ⚠ health Warning or Critical</li>
        <li>{swatch('t-device kind-gpu selected')} selected or found</li>
      </ul>
    </section>
  );
}

// Details is the side panel for one node.
function Details({ nodeKey, model, att, health, onClose, onShow }) {
  const i = nodeKey.indexOf(':');
  const type = nodeKey.slice(0, i);
  const id = nodeKey.slice(i + 1);
  let title = id;
  let body = null;
  // A switch's host ports are found among every host's: once a switch.
  const hostPorts = useMemo(() => (model.switches.has(nodeKey) ? switchHostPorts(model, model.switches.get(nodeKey)) : []), [model, nodeKey]);
  const showButton = (key, label) => (
    <button type="button" class="topo-link" onClick={() => onShow(key)}>{label}</button>
  );
  const deviceList = (devs) => (
    <CappedList items={devs} what="device" render={(d) => {
      const sys = deviceSystems(att, d.id);
      return (
        <li key={d.id}>
          {showButton(d.key, d.id)} {d.model}
          {sys.length > 0 && <span class="attached-text"> · attached to {sys.join(', ')}</span>}
        </li>
      );
    }} />
  );

  if (type === 'device' && model.devices.has(id)) {
    const d = model.devices.get(id);
    title = `${d.kind} ${d.id}`;
    body = <DeviceDetails d={d} att={att} health={health.get(d.id)} zones={model.zones} showButton={showButton} />;
  } else if (type === 'host' && model.hosts.has(id)) {
    const h = model.hosts.get(id);
    const systems = att.byHost.get(id) || [];
    title = `Host ${h.id}`;
    body = (
      <>
        <dl>
          <dt>Rack</dt><dd>{showButton(`rack:${h.rack}`, h.rack)}</dd>
          <dt>Compute</dt><dd>{h.cores} cores, {h.memoryGiB} GiB</dd>
          {health.has(id) && <><dt>Health</dt><dd><Health value={health.get(id)} /></dd></>}
          <dt>Zones</dt><dd>{model.zones.filter((z) => z.Hosts?.includes(id)).map((z) => z.ID).join(', ') || 'none'}</dd>
          <dt>Block</dt><dd><a href={href(`/blocks/${encodeURIComponent(id)}`)}>{id}</a></dd>
        </dl>
        <h3>Ports</h3>
        <table class="topology-table">
          <thead><tr><th scope="col">Port</th><th scope="col">Fabric</th><th scope="col">Switch port</th><th scope="col">In use</th></tr></thead>
          <tbody>
            {h.ports.map((p) => (
              <tr key={p.ID}>
                <th scope="row">{p.ID}</th>
                <td>{showButton(`fabric:${p.Fabric}`, p.Fabric)}</td>
                <td>{showButton(`switch:${p.Fabric}/${p.Switch}`, `${p.Switch} ${p.Port}`)}</td>
                <td>{att.ports.has(`${id}|${p.ID}`) ? 'attached device' : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <h3>Composed systems</h3>
        {systems.length ? (
          <ul class="topology-list">
            {systems.map((s) => (
              <li key={s.id}>
                <a href={href(`/systems/${encodeURIComponent(s.id)}`)}>{s.name || s.id}</a> · {s.state} ·{' '}
                {s.blocks.filter((b) => b.Id !== id).map((b) => b.Id).join(', ') || 'no devices'}
              </li>
            ))}
          </ul>
        ) : <p>None.</p>}
      </>
    );
  } else if ((type === 'switch' || type === 'drawer') && (model.switches.has(nodeKey) || model.drawers.has(nodeKey))) {
    const x = model.switches.get(nodeKey) || model.drawers.get(nodeKey);
    const devs = type === 'switch' ? x.devices : x.fabric.devices.filter((d) => d.drawer === x);
    title = `${type === 'switch' ? 'Switch' : 'Drawer'} ${x.id}`;
    body = (
      <>
        <dl>
          <dt>Fabric</dt><dd>{showButton(x.fabric.key, x.fabric.id)} ({x.fabric.kind})</dd>
          {type === 'switch' ? (
            <>
              <dt>Ports</dt><dd>{x.ports}</dd>
              <dt>Latency</dt><dd>{x.latencyNs} ns port to port</dd>
              <dt>Host ports</dt>
              <dd>
                {hostPorts.slice(0, LIST_MAX).map((p, n) => <span key={n}>{n > 0 && ', '}{showButton(p.host.key, p.host.id)} → {p.port.Port}</span>)}
                {hostPorts.length > LIST_MAX && ` and ${(hostPorts.length - LIST_MAX).toLocaleString()} more`}
                {!hostPorts.length && 'none'}
              </dd>
            </>
          ) : (
            <>
              <dt>Mode</dt><dd>{x.mode}</dd>
              <dt>Slots</dt><dd>{x.slots}</dd>
              <dt>Host ports</dt><dd>{x.hostPorts.join(', ') || 'none'}</dd>
            </>
          )}
        </dl>
        <h3>Devices ({devs.length})</h3>
        {deviceList(devs)}
      </>
    );
  } else if (type === 'group' && model.groups.has(nodeKey)) {
    const g = model.groups.get(nodeKey);
    title = `${g.devices.length} ${g.kind} on ${g.fabric.id} ${g.drawer ? g.drawer.id : g.switch.id}`;
    body = (
      <>
        <dl>
          <dt>Fabric</dt><dd>{showButton(g.fabric.key, g.fabric.id)} ({g.fabric.kind})</dd>
          {g.drawer && <><dt>Drawer</dt><dd>{showButton(g.drawer.key, g.drawer.id)} ({g.drawer.mode})</dd></>}
          <dt>Attached</dt><dd>{g.devices.filter((d) => att.byDevice.has(d.id)).length} of {g.devices.length}</dd>
        </dl>
        {deviceList(g.devices)}
      </>
    );
  } else if (type === 'fabric' && model.fabrics.has(id)) {
    const f = model.fabrics.get(id);
    title = `Fabric ${f.id}`;
    body = (
      <>
        <dl>
          <dt>Kind</dt><dd>{f.kind}</dd>
          <dt>Reconfiguration</dt><dd>{f.reconfigMs} ms</dd>
          <dt>Switches</dt>
          <dd>
            {f.switches.slice(0, LIST_MAX).map((s, n) => <span key={s.key}>{n > 0 && ', '}{showButton(s.key, s.id)}</span>)}
            {f.switches.length > LIST_MAX && ` and ${(f.switches.length - LIST_MAX).toLocaleString()} more`}
          </dd>
          {f.drawers.length > 0 && (
            <><dt>Drawers</dt><dd>{f.drawers.map((d, n) => <span key={d.key}>{n > 0 && ', '}{showButton(d.key, d.id)} ({d.mode})</span>)}</dd></>
          )}
          <dt>Rack</dt><dd>{f.rack === SHARED ? 'shared by several racks' : showButton(`rack:${f.rack}`, f.rack)}</dd>
          <dt>Devices</dt><dd>{f.devices.length}, {f.devices.filter((d) => att.byDevice.has(d.id)).length} attached</dd>
        </dl>
      </>
    );
  } else if (type === 'range' && model.ranges.has(nodeKey)) {
    const rg = model.ranges.get(nodeKey);
    const last = rg.first + rg.items.length - 1;
    if (rg.what === 'hosts') {
      const r = rg.owner;
      title = `Hosts ${rangeSpan(rg)}`;
      body = (
        <>
          <dl>
            <dt>Rack</dt><dd>{showButton(r.key, r.id === SHARED ? 'shared fabrics' : r.id)}</dd>
            <dt>Hosts</dt><dd>{rg.first.toLocaleString()} to {last.toLocaleString()} of the rack's {r.hosts.length.toLocaleString()}</dd>
          </dl>
          <CappedList items={rg.items} what="host" render={(h) => (
            <li key={h.id}>{showButton(h.key, h.id)}{att.byHost.has(h.id) && ` · ${att.byHost.get(h.id).length} composed`}</li>
          )} />
        </>
      );
    } else {
      const f = rg.owner;
      const devs = rg.items.flatMap((sw) => sw.devices);
      title = `Switches ${rangeSpan(rg)}`;
      body = (
        <>
          <dl>
            <dt>Fabric</dt><dd>{showButton(f.key, f.id)} ({f.kind})</dd>
            <dt>Switches</dt><dd>{rg.first.toLocaleString()} to {last.toLocaleString()} of the fabric's {f.switches.length.toLocaleString()}</dd>
            <dt>Devices</dt><dd>{devs.length.toLocaleString()}, {devs.filter((d) => att.byDevice.has(d.id)).length.toLocaleString()} attached</dd>
          </dl>
          <CappedList items={rg.items} what="switch" render={(sw) => (
            <li key={sw.key}>{showButton(sw.key, sw.id)} · {sw.devices.length} devices</li>
          )} />
        </>
      );
    }
  } else if (type === 'rack' && model.racks.has(id)) {
    const r = model.racks.get(id);
    title = id === SHARED ? 'Shared fabrics' : `Rack ${id}`;
    body = (
      <>
        {r.hosts.length > 0 && (
          <>
            <h3>Hosts ({r.hosts.length.toLocaleString()})</h3>
            <CappedList items={r.hosts} what="host" render={(h) => (
              <li key={h.id}>{showButton(h.key, h.id)}{att.byHost.has(h.id) && ` · ${att.byHost.get(h.id).length} composed`}</li>
            )} />
          </>
        )}
        <h3>Fabrics ({r.fabrics.length})</h3>
        <ul class="topology-list">
          {r.fabrics.map((f) => <li key={f.id}>{showButton(f.key, f.id)} · {f.kind} · {f.devices.length} devices</li>)}
        </ul>
      </>
    );
  }

  return (
    <aside class="topology-details" data-testid="topology-details" aria-labelledby="topology-details-title">
      <header>
        <h2 id="topology-details-title">{title}</h2>
        <button type="button" aria-label="Close details" onClick={onClose}>×</button>
      </header>
      {body || <p>{nodeKey} is not in the topology.</p>}
    </aside>
  );
}

// CappedList is a details list of items, at most LIST_MAX of them, saying
// how many more there are (search finds any of them by ID).
function CappedList({ items, what, render }) {
  return (
    <>
      <ul class="topology-list">{items.slice(0, LIST_MAX).map(render)}</ul>
      {items.length > LIST_MAX && (
        <p>and {(items.length - LIST_MAX).toLocaleString()} more {what === 'switch' ? 'switches' : `${what}s`}: search for one by its ID.</p>
      )}
    </>
  );
}

// DeviceDetails reads the device's endpoint (telemetry, and the list of
// its blocks) and its block (the first, for a memory node), again when the
// attachments change.
function DeviceDetails({ d, att, health, zones, showButton }) {
  const [ep, setEp] = useState(null);
  const [block, setBlock] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => {
    const ctl = new AbortController();
    const opts = { signal: ctl.signal };
    setErr(null);
    const fail = (e) => e.name !== 'AbortError' && setErr(e);
    const epReq = api.get(`/redfish/v1/Fabrics/${encodeURIComponent(d.fabric.id)}/Endpoints/${encodeURIComponent(d.id)}`, opts);
    epReq.then(setEp, fail);
    const blockID = d.blocks === 1 ? Promise.resolve(d.id)
      : epReq.then((e) => lastSegment(e.Oem?.Rackpool?.ResourceBlocks?.[0]?.['@odata.id']));
    blockID.then((b) => b && api.get(`/redfish/v1/CompositionService/ResourceBlocks/${encodeURIComponent(b)}`, opts)).then(setBlock, fail);
    return () => ctl.abort();
  }, [d.id, att]);

  const systems = deviceSystems(att, d.id);
  const t = ep?.Oem?.Rackpool?.Telemetry;
  const o = block?.Oem?.Rackpool;
  const blockIDs = (ep?.Oem?.Rackpool?.ResourceBlocks || []).map((r) => lastSegment(r['@odata.id']));
  const attachedBlocks = att.byDevice.get(d.id);
  const blockLink = (b) => <a href={href(`/blocks/${encodeURIComponent(b)}`)}>{b}</a>;
  return (
    <>
      <dl>
        <dt>Model</dt><dd>{[o?.Vendor, d.model].filter(Boolean).join(' ') || '—'}</dd>
        {o?.VendorId && <><dt>PCI ID</dt><dd>{o.VendorId}:{o.DeviceId}</dd></>}
        {d.capacity > 0 && <><dt>Capacity</dt><dd>{fmtBytes(d.capacity)}</dd></>}
        <dt>Fabric</dt><dd>{showButton(d.fabric.key, d.fabric.id)} ({d.fabric.kind})</dd>
        <dt>Switch</dt><dd>{showButton(d.switch.key, d.switch.id)} {d.ports.length > 0 && `port ${d.ports.join(', ')}`}</dd>
        {d.drawer && <><dt>Drawer</dt><dd>{showButton(d.drawer.key, d.drawer.id)} ({d.drawer.mode}), slot {d.slot}</dd></>}
        <dt>Health</dt><dd><Health value={block?.Status?.Health || health} /></dd>
        <dt>Attached to</dt>
        <dd>
          {systems.length ? systems.map((s, n) => (
            <span key={s}>{n > 0 && ', '}<a href={href(`/systems/${encodeURIComponent(s)}`)}>{s}</a></span>
          )) : 'nothing'}
        </dd>
        <dt>Zones</dt><dd>{zones.filter((z) => z.Devices?.includes(d.id)).map((z) => z.ID).join(', ') || 'none'}</dd>
        {d.blocks === 1 && <><dt>Block</dt><dd>{blockLink(d.id)}{block && ` · ${block.CompositionStatus?.CompositionState}`}</dd></>}
      </dl>
      {d.blocks > 1 && (
        <details open={d.blocks <= 16}>
          <summary>{d.blocks} blocks, {attachedBlocks?.size || 0} attached</summary>
          <ul class="topology-list">
            {blockIDs.map((b) => (
              <li key={b}>{blockLink(b)}{attachedBlocks?.has(b) && <span class="attached-text"> · {attachedBlocks.get(b).join(', ')}</span>}</li>
            ))}
          </ul>
        </details>
      )}
      <ErrorMessage error={err} />
      {o?.LinkWidth > 0 && (
        <>
          <h3>Link</h3>
          <p>x{o.LinkWidth} at {o.LinkSpeed}</p>
        </>
      )}
      {t && (
        <>
          <h3>Telemetry</h3>
          <dl>
            <dt>Temperature</dt><dd>{Math.round(t.TemperatureC * 10) / 10} °C</dd>
            {t.LinkWidth > 0 && <><dt>Link now</dt><dd>x{t.LinkWidth} at {t.LinkSpeed}</dd></>}
            <dt>Correctable errors</dt><dd>{t.CorrectableErrors}</dd>
            <dt>Uncorrectable errors</dt><dd>{t.UncorrectableErrs}</dd>
            <dt>Utilisation</dt><dd>{Math.round(t.UtilisationPercent)} %</dd>
          </dl>
        </>
      )}
    </>
  );
}
