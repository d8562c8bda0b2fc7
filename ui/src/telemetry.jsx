// Telemetry: the fabric telemetry report (per device kind: utilisation,
// hottest temperature, link errors per poll, links down), its retained
// history first and then each new report as the service streams it
// (EventService SSE with EventFormatType=MetricReport); and, for a
// composed system, the usage its agent reports (memory, I/O throughput).
// Charts are uPlot on canvas, each with a table of its latest values for
// screen readers.

import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, openStream, useResource } from './api.js';
import { navigate } from './router.js';
import { Page, ErrorMessage, fmtBytes } from './components.jsx';

const REPORT = '/redfish/v1/TelemetryService/MetricReports/FabricTelemetry';
const MAX_POINTS = 600;
const palette = ['#0b5cad', '#b42318', '#1a7f37', '#8a5a00', '#6f2dbd', '#0e7490', '#9d174d', '#4d7c0f'];

// kindOf reads the device kind from a group's MetricProperty
// (/redfish/v1/Fabrics/{fabric}/Endpoints?DeviceKind={kind}).
const kindOf = (prop) => (prop || '').split('DeviceKind=')[1] || '';

// fold adds MetricValues to series: per timestamp, per metric, per kind,
// summed over fabrics (utilisation means weighted by device counts).
function fold(state, values) {
  const byTime = new Map();
  for (const v of values) {
    const kind = kindOf(v.MetricProperty);
    if (!kind) continue;
    const t = Date.parse(v.Timestamp) / 1000;
    if (!byTime.has(t)) byTime.set(t, []);
    byTime.get(t).push({ ...v, kind });
  }
  for (const [t, vs] of [...byTime].sort((a, b) => a[0] - b[0])) {
    if (state.times.length && t <= state.times[state.times.length - 1]) continue;
    const agg = {};
    const devices = {};
    for (const v of vs) if (v.MetricId === 'FabricDevices') devices[`${v.MetricProperty}`] = Number(v.MetricValue);
    for (const v of vs) {
      const a = (agg[v.kind] ??= { util: 0, utilN: 0, temp: -Infinity, errors: 0, down: 0 });
      const n = Number(v.MetricValue);
      switch (v.MetricId) {
        case 'FabricUtilisationMean': {
          const d = devices[v.MetricProperty] || 1;
          a.util += n * d;
          a.utilN += d;
          break;
        }
        case 'FabricTemperatureMax':
          a.temp = Math.max(a.temp, n);
          break;
        case 'FabricLinkErrors':
          a.errors += n;
          break;
        case 'FabricLinksDown':
          a.down += n;
          break;
      }
    }
    state.times.push(t);
    for (const k of Object.keys(agg)) if (!state.kinds.includes(k)) state.kinds.push(k);
    for (const k of state.kinds) {
      const a = agg[k];
      for (const [m, val] of [['util', a && a.utilN ? a.util / a.utilN : null], ['temp', a && a.temp > -Infinity ? a.temp : null], ['errors', a ? a.errors : null], ['down', a ? a.down : null]]) {
        const key = `${m}:${k}`;
        state.series[key] ??= new Array(state.times.length - 1).fill(null);
        state.series[key].push(val);
      }
    }
    if (state.times.length > MAX_POINTS) {
      state.times.shift();
      for (const s of Object.values(state.series)) s.shift();
    }
  }
  state.hot = values.filter((v) => v.MetricId === 'FabricHotDeviceTemperature').slice(-10);
  return state;
}

// yRange fits the value axis to the data: from 0 (or the lowest value,
// when below 0) to a round number above the highest. All-zero data gets
// 0 to 1, not uPlot's 0 to 100, which would read as a scale of percent.
function yRange(u, min, max) {
  const lo = Math.min(0, Number.isFinite(min) ? min : 0);
  const hi = Number.isFinite(max) ? max : 0;
  if (hi <= lo) return [lo, lo + 1];
  return [lo, roundUp(lo + (hi - lo) * 1.05)];
}

// roundUp is the first of 1, 2, 2.5, 5 and 10 times a power of ten at or
// above v (v > 0).
function roundUp(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((x) => x >= v * (1 - 1e-9));
}

// Whole-number tick steps: the charts count percent, degrees, errors,
// devices, blocks and bytes.
const INCRS = Array.from({ length: 16 }, (_, e) => [1, 2, 5].map((m) => m * 10 ** e)).flat();

// Chart draws a line per kind of series[`${metric}:${kind}`] over times.
// empty says why there is nothing to draw yet; zero, what an all-zero
// chart means. The drawing carries its value axis' range (data-y-min,
// data-y-max) for the browser tests.
function Chart({ title, id, times, kinds, series, metric, unit, fmt = (v) => v, empty, zero }) {
  const el = useRef();
  const plot = useRef();
  const data = [times, ...kinds.map((k) => series[`${metric}:${k}`] || [])];
  const mark = (u) => {
    const { min, max } = u.scales.y;
    if (u.data?.[0]?.length && min != null && max != null) {
      el.current.dataset.yMin = String(min);
      el.current.dataset.yMax = String(max);
    }
  };
  useEffect(() => {
    const width = Math.max(300, el.current.clientWidth);
    const opts = {
      width,
      height: 220,
      series: [{}, ...kinds.map((k, i) => ({ label: k, stroke: palette[i % palette.length], width: 1.5, value: (u, v) => (v == null ? '–' : fmt(v)) }))],
      axes: [{}, { label: unit, size: 60, incrs: INCRS, values: (u, vals) => vals.map(fmt) }],
      scales: { x: { time: true }, y: { range: yRange } },
      legend: { live: true },
      hooks: { setScale: [(u, key) => key === 'y' && mark(u)] },
    };
    plot.current?.destroy();
    plot.current = new uPlot(opts, data, el.current);
    mark(plot.current);
    return () => plot.current?.destroy();
  }, [kinds.join(',')]);
  useEffect(() => {
    plot.current?.setData(data);
  });
  const latest = kinds.map((k) => [k, (series[`${metric}:${k}`] || []).at(-1)]);
  const values = data.slice(1).flat().filter((v) => v != null);
  let note = null;
  if (!times.length) note = empty;
  else if (values.length && values.every((v) => v === 0)) note = zero?.(times.length) ?? `All ${times.length} reports read 0.`;
  return (
    <section class="chart" aria-labelledby={`${id}-title`} data-testid={`chart-${id}`}>
      <h2 id={`${id}-title`}>{title}</h2>
      {note && <p class="muted empty" data-testid={`chart-${id}-note`}>{note}</p>}
      <div ref={el} role="img" aria-label={`${title}: a line per device kind over the last ${times.length} reports`} />
      <table class="sr-only">
        <caption>{title}, latest report</caption>
        <tbody>{latest.map(([k, v]) => <tr key={k}><th scope="row">{k}</th><td>{v == null ? '–' : fmt(v)}</td></tr>)}</tbody>
      </table>
    </section>
  );
}

const noReports = 'No telemetry reports yet. The fabric monitor sends one every --monitor-interval (2 s by default) '
  + 'while serve runs, and keeps the newest 300.';

export function Telemetry({ params }) {
  const [state, setState] = useState({ times: [], kinds: [], series: {}, hot: [], reports: 0 });
  const [error, setError] = useState(null);
  const st = useRef({ times: [], kinds: [], series: {}, hot: [] });
  useEffect(() => {
    const ctl = new AbortController();
    const push = (values) => {
      fold(st.current, values);
      setState({ ...st.current, reports: st.current.times.length });
    };
    api.get(`${REPORT}?history`, { signal: ctl.signal }).then(
      (r) => push(r.MetricValues || []),
      (e) => e.name !== 'AbortError' && setError(e),
    );
    openStream('/redfish/v1/EventService/SSE?EventFormatType=MetricReport&MetricReportDefinition=FabricTelemetry',
      (r) => r.MetricValues && push(r.MetricValues), ctl.signal);
    return () => ctl.abort();
  }, []);
  return (
    <Page id="telemetry" title="Telemetry">
      <p class="help">
        Fabric telemetry from the fabric monitor, per device kind over all fabrics, live: {state.reports} reports.
        Pick a composed system to see the usage its agent reports.
      </p>
      <ErrorMessage error={error} />
      <SystemPicker value={params.system || ''} />
      {params.system && <SystemUsage id={params.system} />}
      {params.system && <Forecast id={params.system} />}
      <div class="charts">
        <Chart id="util" title="Utilisation (mean)" unit="%" metric="util" {...state} fmt={(v) => `${Math.round(v)}%`} empty={noReports}
          zero={(n) => `Every device read 0% in all ${n} reports: nothing has put any load on them yet.`} />
        <Chart id="temp" title="Hottest device temperature" unit="°C" metric="temp" {...state} fmt={(v) => `${Math.round(v)}°C`}
          empty={noReports} />
        <Chart id="errors" title="Link errors per report" unit="errors" metric="errors" {...state} empty={noReports}
          zero={(n) => `No link errors in the last ${n} reports.`} />
        <Chart id="down" title="Links down" unit="devices" metric="down" {...state} empty={noReports}
          zero={(n) => `No link has been down in the last ${n} reports.`} />
      </div>
      {state.hot.length > 0 && (
        <section class="card" style="margin-top:14px" aria-labelledby="hot-title">
          <h2 id="hot-title">Hottest devices</h2>
          <table class="plain">
            <thead><tr><th scope="col">Device</th><th scope="col">Temperature</th></tr></thead>
            <tbody>
              {state.hot.map((h) => {
                const dev = h.MetricProperty.split('/Endpoints/')[1]?.split('#')[0];
                return <tr key={h.MetricProperty}><td><a href={`#/topology?focus=${dev}`}>{dev}</a></td><td>{h.MetricValue} °C</td></tr>;
              })}
            </tbody>
          </table>
        </section>
      )}
    </Page>
  );
}

function SystemPicker({ value }) {
  const systems = useResource('/redfish/v1/Systems?$expand=.&$select=Members/Id,Members/Name,Members/SystemType');
  const list = (systems.data?.Members || []).filter((m) => m.SystemType === 'Composed');
  return (
    <div class="filters">
      <div class="field">
        <label for="telemetry-system">System usage</label>
        <select id="telemetry-system" value={value} onChange={(e) => navigate('/telemetry', { system: e.target.value })}>
          <option value="">None</option>
          {list.map((s) => <option key={s.Id} value={s.Id}>{s.Name && s.Name !== s.Id ? `${s.Name} (${s.Id})` : s.Id}</option>)}
        </select>
      </div>
      {systems.data && !list.length && (
        <p class="muted empty" data-testid="telemetry-systems-empty">
          No composed systems to pick yet: compose one, and run rackpool agent on its host to report its usage.
        </p>
      )}
    </div>
  );
}

const usageMetrics = [
  ['memory_used_bytes', 'Memory used', fmtBytes],
  ['io_read_bytes_per_second', 'Read throughput', (v) => `${fmtBytes(v)}/s`],
  ['io_write_bytes_per_second', 'Write throughput', (v) => `${fmtBytes(v)}/s`],
];

// SystemUsage charts a composed system's usage series, re-read every 10 s
// (agents report every --interval, 10 s by default).
function SystemUsage({ id }) {
  const [series, setSeries] = useState({});
  useEffect(() => {
    const ctl = new AbortController();
    const read = () => Promise.all(usageMetrics.map(([m]) => api.get(`/redfish/v1/TelemetryService/Oem/Rackpool/Series/System/${encodeURIComponent(id)}/${m}`, { signal: ctl.signal })
      .then((r) => [m, r.Samples || []], () => [m, null])))
      .then((rs) => !ctl.signal.aborted && setSeries(Object.fromEntries(rs)));
    read();
    const t = setInterval(read, 10000);
    return () => (ctl.abort(), clearInterval(t));
  }, [id]);
  const any = usageMetrics.some(([m]) => series[m]?.length);
  if (!any) {
    return <p class="muted" role="status">No usage reported for {id} yet: its host runs no `rackpool agent --system {id}`.</p>;
  }
  return (
    <div class="charts" style="margin-bottom:14px">
      {usageMetrics.filter(([m]) => series[m]?.length).map(([m, title, fmt]) => {
        const s = series[m];
        return <Chart key={m} id={m} title={`${title} of ${id}`} unit="" metric="v" kinds={[m]} times={s.map((x) => Date.parse(x.Timestamp) / 1000)}
          series={{ [`v:${m}`]: s.map((x) => x.Value) }} fmt={fmt} zero={(n) => `${title} read 0 in all ${n} samples.`} />;
      })}
    </div>
  );
}

// Forecast shows what the provisioning loop decided for the system (when
// it manages it): the blocks held against the forecast peak and its upper
// bound, collected while the view is open, and the last decision's
// explanation.
function Forecast({ id }) {
  const [points, setPoints] = useState([]);
  const [last, setLast] = useState(null);
  const [missing, setMissing] = useState(false);
  useEffect(() => {
    const ctl = new AbortController();
    const read = () => api.get(`/redfish/v1/Oem/Rackpool/Provisioning/${encodeURIComponent(id)}`, { signal: ctl.signal }).then((p) => {
      const d = p.LastDecision;
      setLast(d || null);
      if (d) {
        const t = Date.parse(d.Time) / 1000;
        setPoints((ps) => (ps.length && ps[ps.length - 1].t === t ? ps : [...ps, { t, held: d.ToBlocks, peak: d.ForecastPeakBlocks, upper: d.ForecastUpperBlocks }].slice(-MAX_POINTS)));
      }
    }, (e) => e.status === 404 && setMissing(true));
    read();
    const timer = setInterval(read, 10000);
    return () => (ctl.abort(), clearInterval(timer));
  }, [id]);
  if (missing) return <p class="muted" role="status">{id} is not under predictive provisioning.</p>;
  if (!last) {
    return (
      <p class="muted empty" role="status" data-testid="forecast-empty">
        {id} is under predictive provisioning; its first decision comes at the end of a provisioning step
        (--provisioning-interval, 30 s by default), and is drawn here from then on.
      </p>
    );
  }
  const series = { 'f:held': points.map((p) => p.held), 'f:peak': points.map((p) => p.peak), 'f:upper': points.map((p) => p.upper) };
  return (
    <div class="charts" style="margin-bottom:14px" data-testid="forecast">
      <Chart id="forecast" title={`Provisioning of ${id}: blocks held and forecast`} unit="blocks" metric="f" kinds={['held', 'peak', 'upper']}
        times={points.map((p) => p.t)} series={series} zero={(n) => `No blocks held or forecast in the last ${n} decisions.`} />
      <section class="chart" aria-labelledby="decision-title">
        <h2 id="decision-title">Last decision</h2>
        <p>{last.Action} {last.FromBlocks} → {last.ToBlocks} blocks ({last.Model}{last.Fallback ? ', fallback' : ''}){last.Applied ? '' : ', not applied'}.</p>
        <p class="muted">{last.Explanation || last.Reason}</p>
      </section>
    </div>
  );
}
