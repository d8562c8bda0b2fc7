// The topology view's model and layout, kept apart from the component so
// that they are plain functions of their inputs.
//
// buildModel indexes the compact topology document (GET /redfish/v1/Oem/
// Rackpool/Topology?format=compact) once; layout places what is expanded
// on a plane, in bands: one per rack (its hosts, then the fabrics only its
// hosts reach) and one for the fabrics several racks (or none) share.
// Within a band, columns run hosts → switches → drawers → device groups. A
// collapsed band is one summary node; a collapsed group is one node with
// its counts. A rack of more than RANGE_MAX hosts (the P4 pod: 49,152) or
// a fabric of more than RANGE_MAX switches (4,100 a plane) shows them as
// ranges of consecutive members, which open like groups. Nothing collapsed
// is placed, so the drawing grows with what the user opened, not with the
// rack.
//
// Node keys double as the nodes' data-node attributes: host:ID,
// fabric:ID, switch:FABRIC/SWITCH, drawer:FABRIC/DRAWER, device:ID,
// group:FABRIC/SWITCH[/DRAWER]/KIND, range:hosts/RACK/N,
// range:switches/FABRIC/N (N from 1) and rack:ID (rack:* for the shared
// fabrics).

export const DEVICE_KINDS = ['gpu', 'fpga', 'nvme', 'ssd', 'hdd', 'nic', 'memory'];
export const FABRIC_KINDS = ['pcie-switch', 'sas-circuit', 'optical-circuit', 'ethernet-vlan', 'cxl-memory'];
export const SHARED = '*';

const kindOrder = (k) => {
  const i = DEVICE_KINDS.indexOf(k);
  return i < 0 ? DEVICE_KINDS.length : i;
};

// RANGE_MAX is the longest list of hosts (of a rack) or switches (of a
// fabric) drawn one node each; a longer one is cut into ranges of
// RANGE_MAX consecutive members (of more when that would make more than
// RANGE_MAX ranges: the pod's 49,152 hosts are 64 ranges of 768), each a
// node that opens like a group.
export const RANGE_MAX = 64;

// ranges cuts list into ranges, registering each in into under its key
// (range:WHAT/OWNER/N) and telling each member its range; it returns null
// when the list is short enough to draw whole.
function ranges(list, what, owner, into) {
  if (list.length <= RANGE_MAX) return null;
  const size = Math.max(RANGE_MAX, Math.ceil(list.length / RANGE_MAX));
  const out = [];
  for (let i = 0; i < list.length; i += size) {
    const items = list.slice(i, i + size);
    const rg = { key: `range:${what}/${owner.id}/${out.length + 1}`, what, owner, items, first: i + 1 };
    for (const x of items) x.range = rg;
    out.push(rg);
    into.set(rg.key, rg);
  }
  return out;
}

// Host is a host of the model. Its ports ({ID, Fabric, Switch, Port})
// are decoded from the document's array when first asked for: the drawing
// needs those of the hosts it places, not the pod's 393,216.
class Host {
  constructor(id, rack, cores, memoryGiB, raw, fabrics) {
    this.key = `host:${id}`;
    this.id = id;
    this.rack = rack;
    this.cores = cores;
    this.memoryGiB = memoryGiB;
    this.raw = raw; // [PortID, fabric#, switch#, Port, ...]
    this.fabrics = fabrics;
    this.decoded = null;
  }

  get ports() {
    if (!this.decoded) {
      this.decoded = [];
      for (let i = 0; i + 3 < this.raw.length; i += 4) {
        const fab = this.fabrics[this.raw[i + 1]];
        const sw = fab?.switches[this.raw[i + 2]];
        if (sw) this.decoded.push({ ID: this.raw[i], Fabric: fab.id, Switch: sw.id, Port: this.raw[i + 3] });
      }
    }
    return this.decoded;
  }
}

// switchHostPorts lists the host ports cabled to sw: [{host, port}].
export function switchHostPorts(model, sw) {
  const out = [];
  for (const h of model.hosts.values()) {
    for (let i = 0; i + 3 < h.raw.length; i += 4) {
      if (h.fabrics[h.raw[i + 1]] === sw.fabric && sw.fabric.switches[h.raw[i + 2]] === sw) {
        out.push({ host: h, port: { ID: h.raw[i], Fabric: sw.fabric.id, Switch: sw.id, Port: h.raw[i + 3] } });
      }
    }
  }
  return out;
}

// buildModel turns the compact topology document (GET /redfish/v1/Oem/
// Rackpool/Topology?format=compact: hosts, switches, drawers and devices
// as arrays of values, references as positions) into maps keyed by node
// key.
export function buildModel(topo) {
  const hosts = new Map();
  const fabrics = new Map();
  const switches = new Map();
  const drawers = new Map();
  const devices = new Map();
  const groups = new Map();
  const rangeMap = new Map();
  const fabricList = [];

  for (const f of topo.Fabrics || []) {
    const fab = {
      key: `fabric:${f.ID}`, id: f.ID, kind: f.Kind, reconfigMs: f.ReconfigurationMs, rack: f.Rack ?? SHARED,
      switches: [], drawers: [], devices: [],
    };
    fabrics.set(f.ID, fab);
    fabricList.push(fab);
    for (const [id, ports, latencyNs] of f.Switches || []) {
      const sw = { key: `switch:${f.ID}/${id}`, id, fabric: fab, ports, latencyNs, hostPortCount: 0, drawers: [], groups: [], devices: [] };
      switches.set(sw.key, sw);
      fab.switches.push(sw);
    }
    for (const [id, mode, slots, hostPorts] of f.Drawers || []) {
      const dr = { key: `drawer:${f.ID}/${id}`, id, fabric: fab, mode, slots, hostPorts: hostPorts || [], groups: [] };
      drawers.set(dr.key, dr);
      fab.drawers.push(dr);
    }
    for (const [id, kind, model, swAt, drAt, slot, capacity, blocks, ports] of f.Devices || []) {
      const sw = fab.switches[swAt] || fab.switches[0];
      const dr = drAt >= 0 ? fab.drawers[drAt] : null;
      const dev = {
        key: `device:${id}`, id, kind, model, fabric: fab, switch: sw, drawer: dr, slot, capacity, blocks: blocks || 1, ports: ports || [],
      };
      devices.set(id, dev);
      fab.devices.push(dev);
      sw.devices.push(dev);
      const gkey = `group:${f.ID}/${sw.id}${dr ? `/${dr.id}` : ''}/${kind}`;
      let g = groups.get(gkey);
      if (!g) {
        g = { key: gkey, kind, fabric: fab, switch: sw, drawer: dr, devices: [] };
        groups.set(gkey, g);
        (dr || sw).groups.push(g);
        if (dr && !sw.drawers.includes(dr)) sw.drawers.push(dr);
      }
      g.devices.push(dev);
      dev.group = g;
    }
    // A drawer without devices still shows, under the fabric's first switch.
    for (const dr of fab.drawers) {
      if (!fab.switches.some((sw) => sw.drawers.includes(dr)) && fab.switches[0]) fab.switches[0].drawers.push(dr);
    }
    for (const x of [...fab.switches, ...fab.drawers]) x.groups.sort((a, b) => kindOrder(a.kind) - kindOrder(b.kind));
    fab.switchRanges = ranges(fab.switches, 'switches', fab, rangeMap);
  }

  // Racks: each host's rack, and each fabric in the one rack whose hosts
  // reach it (or in the shared band): the document says which.
  const racks = new Map();
  const rackOf = (id) => {
    let r = racks.get(id);
    if (!r) {
      r = { key: `rack:${id}`, id, hosts: [], fabrics: [] };
      racks.set(id, r);
    }
    return r;
  };
  for (const [id, rack, cores, memoryGiB, ports] of topo.Hosts || []) {
    const host = new Host(id, rack || '', cores, memoryGiB, ports || [], fabricList);
    hosts.set(id, host);
    rackOf(host.rack).hosts.push(host);
    for (let i = 0; i + 3 < host.raw.length; i += 4) {
      const sw = fabricList[host.raw[i + 1]]?.switches[host.raw[i + 2]];
      if (sw) sw.hostPortCount++;
    }
  }
  for (const fab of fabrics.values()) rackOf(fab.rack).fabrics.push(fab);
  const shared = racks.get(SHARED);
  if (shared) {
    racks.delete(SHARED);
    racks.set(SHARED, shared); // last
  }
  for (const r of racks.values()) r.hostRanges = ranges(r.hosts, 'hosts', r, rangeMap);

  const zones = topo.Zones || [];
  return { name: topo.Name, hosts, fabrics, switches, drawers, devices, groups, racks, ranges: rangeMap, zones };
}

// rangeSpan names a range by its first and last members' IDs, the last
// without the prefix they share when only its number differs:
// "p1-intra131 … 195", "t1-cpu1 … t64-cpu12".
export function rangeSpan(rg) {
  const a = rg.items[0].id;
  const b = rg.items[rg.items.length - 1].id;
  const m = /^(.*\D)(\d+)$/.exec(b);
  return m && a.startsWith(m[1]) && /^\d+$/.test(a.slice(m[1].length)) ? `${a} … ${m[2]}` : `${a} … ${b}`;
}

// hostReaches says whether host h has a port on a fabric of kind.
function hostReaches(h, kind) {
  for (let i = 1; i < h.raw.length; i += 4) if (h.fabrics[h.raw[i]]?.kind === kind) return true;
  return false;
}

// blockDevice maps a resource block ID to its device ID: a single-block
// device's block is the device itself; a memory node's blocks are
// DEV-bNN, a CXL device's DEV-ldN and DEV-xNN (internal/topology/load.go).
// A host's compute block is the host's ID, which is no device.
export function blockDevice(model, blockID) {
  if (model.devices.has(blockID)) return blockID;
  const m = /^(.+)-(b\d{2,}|ld\d+|x\d{2,})$/.exec(blockID);
  return m && model.devices.has(m[1]) ? m[1] : '';
}

// attachments indexes the composed systems (from the Systems collection)
// by device, host and host port.
export function attachments(model, systems) {
  const byDevice = new Map(); // device ID → Map block ID → [system IDs]
  const byHost = new Map(); // host ID → [system]
  const ports = new Set(); // "host|port ID" carrying an attached device
  const list = [];
  for (const s of systems) {
    const o = s.Oem?.Rackpool;
    if (s.SystemType !== 'Composed' || !o) continue;
    const sys = { id: s.Id, name: s.Name, host: o.Host, state: o.CompositionState, blocks: o.Blocks || [] };
    list.push(sys);
    if (!byHost.has(sys.host)) byHost.set(sys.host, []);
    byHost.get(sys.host).push(sys);
    for (const b of sys.blocks) {
      const dev = blockDevice(model, b.Id);
      if (!dev) continue;
      if (!byDevice.has(dev)) byDevice.set(dev, new Map());
      const blocks = byDevice.get(dev);
      if (!blocks.has(b.Id)) blocks.set(b.Id, []);
      blocks.get(b.Id).push(sys.id);
      if (b.HostPort) ports.add(`${sys.host}|${b.HostPort}`);
    }
  }
  return { systems: list, byDevice, byHost, ports };
}

// deviceSystems lists the systems a device's blocks are in, once each.
export function deviceSystems(att, id) {
  const blocks = att.byDevice.get(id);
  return blocks ? [...new Set([...blocks.values()].flat())] : [];
}

const HEALTH_RANK = { OK: 0, Warning: 1, Critical: 2 };
// worse returns the worse of two Redfish health values.
export const worse = (a, b) => ((HEALTH_RANK[b] ?? 0) > (HEALTH_RANK[a] ?? 0) ? b : a || b);

// Geometry, in SVG user units.
const HOST_W = 190;
const SW_W = 190;
const DR_W = 200;
const GROUP_W = 190;
const DEV_W = 160;
const NODE_H = 44;
const DEV_H = 40;
const HEAD_H = 28;
const GAP = 10;
const COL_GAP = 70;
const BAND_GAP = 24;
const RACK_W = 340;
const RACK_COLS = 3;
const DEV_COLS = 4;

const clip = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

// counts tallies devices by kind: "16 gpu · 8 nvme".
function kindCounts(devs) {
  const c = new Map();
  for (const d of devs) c.set(d.kind, (c.get(d.kind) || 0) + 1);
  return [...c].sort((a, b) => kindOrder(a[0]) - kindOrder(b[0])).map(([k, n]) => `${n} ${k}`).join(' · ');
}

// layout places everything expanded and visible under the filters.
// state: {expanded: Set of node keys, kind: fabric kind or '', rack: rack
// ID or ''}; att: attachments(); health: Map ID → Redfish health.
// It returns {frames, nodes, edges, bands, width, height, byKey}: each node (and
// frame: a fabric, drawn behind the rest) is {key, type, x, y, w, h, lines,
// label, cls, expanded?}; each edge {key, from, to, attached}. A node's
// label (its accessible name) begins with its visible lines, so that what
// a user sees is what a screen reader or a voice command names it by, and
// goes on with what did not fit. bands lists each rack's vertical extent,
// top to bottom ({key, top, bottom}; a closed rack's is its row's), so a
// view can fit the first band when the whole drawing is too big to read.
export function layout(model, state, att, health) {
  const frames = [];
  const nodes = [];
  const edges = [];
  const bands = [];
  const byKey = new Map();
  const { expanded, kind, rack } = state;
  const add = (n, into = nodes) => {
    into.push(n);
    byKey.set(n.key, n);
    return n;
  };

  const devAttached = (d) => att.byDevice.has(d.id);
  const devHealth = (d) => health.get(d.id) || '';
  const unhealthy = (h) => h && h !== 'OK';

  function deviceNode(d, x, y, w, h) {
    const blocks = att.byDevice.get(d.id);
    const systems = deviceSystems(att, d.id);
    const hl = devHealth(d);
    const what = `${d.kind}${d.model ? ` ${d.model}` : ''}`;
    let status = what;
    if (d.blocks > 1) status = `${d.kind} · ${d.blocks} blocks`;
    if (blocks) status = d.blocks > 1 ? `${blocks.size}/${d.blocks} blocks attached` : 'attached';
    const more = [
      status === what ? '' : what,
      d.drawer ? `${d.drawer.id} slot ${d.slot}` : '',
      blocks && d.blocks > 1 ? `of ${d.blocks} blocks` : '',
      systems.length ? `attached to ${systems.join(', ')}` : 'not attached',
      hl ? `health ${hl}` : '',
    ];
    if (unhealthy(hl)) status = `⚠ ${hl} · ${status}`;
    return add({
      key: d.key, type: 'device', x, y, w, h, lines: [clip(d.id, 22), clip(status, 26)], more,
      cls: `kind-${d.kind}${blocks ? ' attached' : ''}${unhealthy(hl) ? ` health-${hl.toLowerCase()}` : ''}`,
    });
  }

  // rangeNode places the node of range rg (of hosts or switches) at (x,
  // y), w wide: closed, one node with its counts; open, a header the
  // members are placed below. It returns the height it takes.
  function rangeNode(rg, x, y, w, count, status, cls, more) {
    const open = expanded.has(rg.key);
    const span = rangeSpan(rg);
    const total = (rg.what === 'hosts' ? rg.owner.hosts : rg.owner.switches).length;
    const base = { key: rg.key, type: 'range', x, y, w, expanded: open, more: [...more, `${rg.first} to ${rg.first + rg.items.length - 1} of ${total}`], cls };
    if (!open) {
      add({ ...base, h: NODE_H, lines: [`▸ ${clip(span, 24)}`, clip(`${count} · ${status}`, 28)] });
      return NODE_H + GAP;
    }
    const head = `▾ ${span} · ${count}`;
    add({ ...base, h: HEAD_H, lines: [head.length <= w / 7 ? head : clip(`▾ ${span}`, Math.floor(w / 7))] });
    return HEAD_H + GAP;
  }

  // placeGroup places a device group at (x, y) and returns its height and
  // the node edges from its parent end at.
  function placeGroup(g, x, y) {
    if (g.devices.length === 1) {
      const n = deviceNode(g.devices[0], x, y, GROUP_W, NODE_H);
      return { h: NODE_H, node: n };
    }
    const nAtt = g.devices.filter(devAttached).length;
    const bad = g.devices.filter((d) => unhealthy(devHealth(d))).length;
    const models = [...new Set(g.devices.map((d) => d.model).filter(Boolean))];
    const what = `${g.devices.length} ${g.kind}${models.length === 1 ? ` ${models[0]}` : ''}`;
    const status = [nAtt ? `${nAtt} attached` : 'none attached', bad ? `⚠ ${bad} unhealthy` : ''].filter(Boolean).join(' · ');
    const open = expanded.has(g.key);
    const where = g.drawer ? `${g.fabric.id} ${g.drawer.id}` : `${g.fabric.id} ${g.switch.id}`;
    const base = {
      key: g.key, type: 'group', x, y, expanded: open,
      more: [`group of devices on ${where}`],
      cls: `kind-${g.kind}${nAtt ? ' attached' : ''}${bad ? ' health-warning' : ''}`,
    };
    if (!open) {
      return { h: NODE_H, node: add({ ...base, w: GROUP_W, h: NODE_H, lines: [`▸ ${clip(what, 22)}`, clip(status, 26)] }) };
    }
    const cols = Math.min(DEV_COLS, Math.ceil(Math.sqrt(g.devices.length)));
    const rows = Math.ceil(g.devices.length / cols);
    const w = cols * (DEV_W + 8) - 8;
    const node = add({ ...base, w, h: HEAD_H, lines: [clip(`▾ ${what} · ${status}`, Math.floor(w / 7))] });
    g.devices.forEach((d, i) => {
      deviceNode(d, x + (i % cols) * (DEV_W + 8), y + HEAD_H + 6 + Math.floor(i / cols) * (DEV_H + 8), DEV_W, DEV_H);
    });
    return { h: HEAD_H + 6 + rows * (DEV_H + 8) - 8, node };
  }

  let y = 0;
  let width = 0;
  let rowX = 0; // collapsed racks flow in rows of RACK_COLS
  const endRow = () => {
    if (rowX) y += NODE_H + BAND_GAP;
    rowX = 0;
  };

  for (const r of model.racks.values()) {
    if (rack && r.id !== rack) continue;
    const fabs = r.fabrics.filter((f) => !kind || f.kind === kind);
    if (kind && !fabs.length && !r.hosts.some((h) => hostReaches(h, kind))) continue;
    const devs = fabs.flatMap((f) => f.devices);
    const nAtt = devs.filter(devAttached).length;
    const nSys = r.hosts.reduce((n, h) => n + (att.byHost.get(h.id)?.length || 0), 0);
    const name = r.id === SHARED ? 'Shared fabrics' : r.id;
    const summary = [r.hosts.length ? plural(r.hosts.length, 'host') : '', plural(fabs.length, 'fabric'), plural(devs.length, 'device')]
      .filter(Boolean).join(' · ');
    const attached = [nAtt ? `${nAtt} attached` : '', nSys ? plural(nSys, 'composed system') : ''].filter(Boolean).join(' · ');
    const open = expanded.has(r.key) || !!rack;
    const rbase = {
      key: r.key, type: 'rack', expanded: open,
      more: [r.id === SHARED ? 'fabrics several racks share' : 'rack'],
      cls: nAtt || nSys ? 'attached' : '',
    };
    if (!open) {
      if (rowX >= RACK_COLS * (RACK_W + GAP)) endRow();
      const counts = [attached, kindCounts(devs)].filter(Boolean).join(' · ') || 'no devices';
      add({ ...rbase, x: rowX, y, w: RACK_W, h: NODE_H, lines: [`▸ ${clip(`${name} · ${summary}`, 46)}`, clip(counts, 52)] });
      bands.push({ key: r.key, top: y, bottom: y + NODE_H });
      rowX += RACK_W + GAP;
      width = Math.max(width, rowX - GAP);
      continue;
    }
    endRow();

    // An open band: its header, the hosts' column, and the fabrics.
    const head = add({ ...rbase, x: 0, y, w: RACK_W, h: HEAD_H, lines: [] });
    const top = y + HEAD_H + 16;
    const hasDrawers = fabs.some((f) => f.drawers.length);
    const xSw = HOST_W + 100; // also in the shared band, whose edges come from hosts above
    const xDr = xSw + SW_W + COL_GAP;
    const xDev = hasDrawers ? xDr + DR_W + COL_GAP : xDr;

    // The hosts' column: each host, or (a long list) its ranges, the
    // open ones with their hosts below them.
    let hy = top;
    const placedHosts = [];
    const hostNode = (h) => {
      const systems = att.byHost.get(h.id) || [];
      const hl = health.get(h.id) || '';
      const status = systems.length ? plural(systems.length, 'system') : `${h.cores} cores · ${h.memoryGiB} GiB`;
      placedHosts.push(add({
        key: h.key, type: 'host', x: 0, y: hy, w: HOST_W, h: NODE_H,
        lines: [clip(h.id, 24), clip(`${unhealthy(hl) ? `⚠ ${hl} · ` : ''}${status}`, 28)],
        more: ['host', systems.length ? `${h.cores} cores, ${h.memoryGiB} GiB` : '', systems.length ? `composed systems ${systems.map((s) => s.id).join(', ')}` : 'no composed systems', hl ? `health ${hl}` : ''],
        cls: `host${systems.length ? ' attached' : ''}${unhealthy(hl) ? ` health-${hl.toLowerCase()}` : ''}`,
      }));
      hy += NODE_H + GAP;
    };
    for (const rg of r.hostRanges || []) {
      const nSysR = rg.items.reduce((n, h) => n + (att.byHost.get(h.id)?.length || 0), 0);
      const bad = rg.items.filter((h) => unhealthy(health.get(h.id) || '')).length;
      const status = [nSysR ? plural(nSysR, 'system') : 'no systems', bad ? `⚠ ${bad} unhealthy` : ''].filter(Boolean).join(' · ');
      hy += rangeNode(rg, 0, hy, HOST_W, plural(rg.items.length, 'host'), status, `host${nSysR ? ' attached' : ''}${bad ? ' health-warning' : ''}`,
        [`range of hosts of ${name}`]);
      if (expanded.has(rg.key)) for (const h of rg.items) hostNode(h);
    }
    if (!r.hostRanges) for (const h of r.hosts) hostNode(h);

    let ry = top;
    let right = xSw + SW_W;
    const bandFrames = [];
    for (const f of fabs) {
      const ftop = ry;
      ry += HEAD_H;
      // placeSwitch places a switch with its drawers and device groups.
      const placeSwitch = (sw) => {
        const swAtt = sw.devices.some(devAttached);
        const swNode = add({
          key: sw.key, type: 'switch', x: xSw, y: ry, w: SW_W, h: NODE_H,
          lines: [clip(sw.id, 24), clip(`${f.kind} · ${sw.ports} ports`, 28)],
          more: [`switch of fabric ${f.id}`, plural(sw.hostPortCount, 'host port')],
          cls: `fabric-${f.kind}${swAtt ? ' attached' : ''}`,
        });
        let sy = ry;
        const child = (parent, g, gy) => {
          const { h, node } = placeGroup(g, xDev, gy);
          right = Math.max(right, node.x + node.w);
          edges.push({ key: `${parent.key}>${g.key}`, from: parent, to: node, attached: node.cls.includes('attached') });
          return gy + Math.max(h, NODE_H) + GAP;
        };
        for (const dr of sw.drawers) {
          const drAtt = dr.groups.some((g) => g.devices.some(devAttached));
          const drNode = add({
            key: dr.key, type: 'drawer', x: xDr, y: sy, w: DR_W, h: NODE_H,
            lines: [clip(`${dr.id} · ${dr.slots} slots`, 26), clip(`${dr.mode}${dr.hostPorts.length ? ` · ${dr.hostPorts.join(' ')}` : ''}`, 29)],
            more: [`drawer of fabric ${f.id}`, `host ports ${dr.hostPorts.join(', ') || 'none'}`],
            cls: `drawer mode-${dr.mode}${drAtt ? ' attached' : ''}`,
          });
          right = Math.max(right, xDr + DR_W);
          edges.push({ key: `${sw.key}>${dr.key}`, from: swNode, to: drNode, attached: drAtt });
          let dy = sy;
          for (const g of dr.groups) dy = child(drNode, g, dy);
          sy = Math.max(dy, sy + NODE_H + GAP);
        }
        for (const g of sw.groups) sy = child(swNode, g, sy);
        ry = Math.max(sy, ry + NODE_H + GAP);
      };
      for (const rg of f.switchRanges || []) {
        const devsR = rg.items.flatMap((sw) => sw.devices);
        const nAttR = devsR.filter(devAttached).length;
        const status = [kindCounts(devsR) || 'no devices', nAttR ? `${nAttR} attached` : ''].filter(Boolean).join(' · ');
        ry += rangeNode(rg, xSw, ry, SW_W, plural(rg.items.length, 'switch', 'switches'), status, `fabric-${f.kind}${nAttR ? ' attached' : ''}`,
          [`range of switches of fabric ${f.id}`]);
        if (expanded.has(rg.key)) rg.items.forEach(placeSwitch);
      }
      if (!f.switchRanges) f.switches.forEach(placeSwitch);
      const fAtt = f.devices.some(devAttached);
      add({
        key: f.key, type: 'fabric', x: xSw - 12, y: ftop, w: right - xSw + 24, h: ry - ftop + 2,
        lines: [clip(`${f.id} · ${f.kind}`, 40)],
        more: ['fabric', plural(f.switches.length, 'switch', 'switches'), plural(f.devices.length, 'device'), fAtt ? 'with attached devices' : ''],
        cls: `frame fabric-${f.kind}${fAtt ? ' attached' : ''}`,
      }, bandFrames);
      ry += 16;
    }
    // A band's fabric frames are all as wide as its widest content.
    for (const fr of bandFrames) fr.w = right - xSw + 24;
    frames.push(...bandFrames);
    head.w = Math.max(head.w, right);
    head.lines = [clip(`▾ ${[name, summary, attached].filter(Boolean).join(' · ')}`, Math.floor(head.w / 7))];

    for (const hn of placedHosts) {
      const h = model.hosts.get(hn.key.slice(5));
      const seen = new Map();
      for (const p of h.ports) {
        const sw = byKey.get(`switch:${p.Fabric}/${p.Switch}`);
        if (!sw) continue;
        const key = `${h.key}>${sw.key}`;
        const on = att.ports.has(`${h.id}|${p.ID}`);
        if (seen.has(key)) seen.get(key).attached ||= on;
        else seen.set(key, { key, from: hn, to: sw, attached: on });
      }
      edges.push(...seen.values());
    }
    width = Math.max(width, right);
    bands.push({ key: r.key, top: head.y, bottom: Math.max(hy, ry) });
    y = Math.max(hy, ry) + BAND_GAP;
  }
  endRow();

  // Hosts reaching a shared fabric: edges across bands, when both are open.
  for (const h of model.hosts.values()) {
    if (!byKey.has(h.key)) continue;
    for (const p of h.ports) {
      const sw = byKey.get(`switch:${p.Fabric}/${p.Switch}`);
      if (sw && model.fabrics.get(p.Fabric)?.rack === SHARED) {
        edges.push({ key: `${h.key}>${sw.key}|${p.ID}`, from: byKey.get(h.key), to: sw, attached: att.ports.has(`${h.id}|${p.ID}`) });
      }
    }
  }

  for (const n of [...frames, ...nodes]) n.label = [...n.lines, ...n.more].filter(Boolean).join(', ');
  return { frames, nodes, edges, bands, width, height: Math.max(0, y - BAND_GAP), byKey };
}

// layoutMemo returns layout() remembering its last few answers for one
// model, attachments and health: the opening view tries the states the
// first drawing is laid out in, and on the P4 pod each layout takes tens
// of milliseconds.
export function layoutMemo(keep = 8) {
  let of = [];
  const cache = new Map();
  return (model, state, att, health) => {
    if (of[0] !== model || of[1] !== att || of[2] !== health) {
      of = [model, att, health];
      cache.clear();
    }
    const sig = `${[...state.expanded].sort().join('\n')}\t${state.kind}\t${state.rack}`;
    let lay = cache.get(sig);
    if (!lay) {
      lay = layout(model, state, att, health);
      if (cache.size >= keep) cache.delete(cache.keys().next().value);
      cache.set(sig, lay);
    }
    return lay;
  };
}

// reveal says what showing the node with key takes: {key, rack (the
// band's rack ID), kind (its fabric's kind, '' for hosts and racks), open
// (the keys to expand)}; null when there is no such node.
export function reveal(model, key) {
  const i = key.indexOf(':');
  const type = key.slice(0, i);
  const id = key.slice(i + 1);
  const inFabric = (f, open = []) => ({ key, rack: f.rack, kind: f.kind, open: [`rack:${f.rack}`, ...open] });
  // The range a switch (or the switch a drawer hangs from) is drawn in.
  const rangeOf = (sw) => (sw?.range ? [sw.range.key] : []);
  switch (type) {
    case 'host': {
      const h = model.hosts.get(id);
      return h ? { key, rack: h.rack, kind: '', open: [`rack:${h.rack}`, ...(h.range ? [h.range.key] : [])] } : null;
    }
    case 'device': {
      const d = model.devices.get(id);
      return d ? inFabric(d.fabric, [d.group.key, ...rangeOf(d.switch)]) : null;
    }
    case 'fabric': {
      const f = model.fabrics.get(id);
      return f ? inFabric(f) : null;
    }
    case 'group':
    case 'switch':
    case 'drawer': {
      const x = model.groups.get(key) || model.switches.get(key) || model.drawers.get(key);
      if (!x) return null;
      const sw = type === 'switch' ? x : x.switch || x.fabric.switches.find((s) => s.drawers.includes(x));
      return inFabric(x.fabric, rangeOf(sw));
    }
    case 'range': {
      const rg = model.ranges.get(key);
      if (!rg) return null;
      return rg.what === 'hosts' ? { key, rack: rg.owner.id, kind: '', open: [rg.owner.key] } : inFabric(rg.owner);
    }
    case 'rack':
      return model.racks.has(id) ? { key, rack: id, kind: '', open: [] } : null;
  }
  return null;
}

// locate finds what an ID names (a host, device, block, fabric, switch or
// drawer as FABRIC/ID, rack or composed system): the exact ID first, then
// the first ID containing it. It returns reveal()'s answer or null.
export function locate(model, att, query) {
  const q = query.trim();
  if (!q) return null;
  for (const id of [q, ...matches(model, att, q, 1).map((m) => m.id)]) {
    const sys = att.systems.find((s) => s.id === id);
    const keys = [`host:${id}`, `device:${blockDevice(model, id)}`, `fabric:${id}`, `switch:${id}`, `drawer:${id}`, `rack:${id}`];
    if (sys) keys.push(`host:${sys.host}`);
    for (const k of keys) {
      const hit = reveal(model, k);
      if (hit) return hit;
    }
  }
  return null;
}

// matches lists up to limit IDs containing q (case-insensitive), hosts
// and devices first.
export function matches(model, att, q, limit) {
  const needle = q.trim().toLowerCase();
  const out = [];
  if (!needle) return out;
  const sources = [
    ['host', model.hosts.keys()],
    ['device', model.devices.keys()],
    ['fabric', model.fabrics.keys()],
    ['switch', [...model.switches.values()].map((s) => `${s.fabric.id}/${s.id}`)],
    ['drawer', [...model.drawers.values()].map((d) => `${d.fabric.id}/${d.id}`)],
    ['rack', [...model.racks.keys()].filter((r) => r !== SHARED)],
    ['system', att.systems.map((s) => s.id)],
  ];
  for (const [type, ids] of sources) {
    for (const id of ids) {
      if (id.toLowerCase().includes(needle)) {
        out.push({ type, id });
        if (out.length >= limit) return out;
      }
    }
  }
  return out;
}
