// Compose: a system from constraints ("2 gpu model=V100, 64GiB memory") or
// from named blocks. Preview asks the service's Explain action where the
// request would go or, when it cannot fit, why not on every candidate
// host; Reserve holds the placement (a CompositionReservation); Apply
// composes. Nothing changes until Reserve or Apply is pressed. What was
// typed is kept in sessionStorage, so an expired session or a reload does
// not lose it.

import { useEffect, useState } from 'preact/hooks';
import { api, session, useResource } from './api.js';
import { navigate } from './router.js';
import { Page, ErrorMessage, Loading, last } from './components.jsx';

const DRAFT = 'rackpool.compose.draft';
const kinds = ['gpu', 'fpga', 'nvme', 'ssd', 'hdd', 'nic', 'memory'];
const emptyNeed = () => ({ Kind: 'gpu', Count: '1', Capacity: '', Model: '', MaxLatencyNS: '' });
const emptyDraft = () => ({ mode: 'constrained', Name: '', Description: '', Host: '', MinCores: '', MinMemoryGiB: '', Blocks: '', Needs: [emptyNeed()] });

function loadDraft() {
  try {
    return { ...emptyDraft(), ...JSON.parse(sessionStorage.getItem(DRAFT) || '{}') };
  } catch {
    return emptyDraft();
  }
}

// body turns the form into the Redfish request (POST /redfish/v1/Systems,
// the Explain action and a ComposeSystem stanza all take it).
export function body(d) {
  const b = {};
  if (d.Name.trim()) b.Name = d.Name.trim();
  if (d.Description.trim()) b.Description = d.Description.trim();
  const oem = {};
  if (d.Host.trim()) oem.Host = d.Host.trim();
  if (d.mode === 'specific') {
    const ids = d.Blocks.split(/[\s,]+/).filter(Boolean);
    if (ids.length) b.Links = { ResourceBlocks: ids.map((id) => ({ '@odata.id': `/redfish/v1/CompositionService/ResourceBlocks/${id}` })) };
  } else {
    if (d.MinCores !== '') oem.MinCores = num(d.MinCores);
    if (d.MinMemoryGiB !== '') oem.MinMemoryGiB = num(d.MinMemoryGiB);
    const needs = d.Needs.filter((n) => n.Kind).map((n) => {
      const o = { Kind: n.Kind, Count: num(n.Count || '1') };
      if (n.Capacity.trim()) o.Capacity = n.Capacity.trim();
      if (n.Model.trim()) o.Model = n.Model.trim();
      if (n.MaxLatencyNS !== '') o.MaxLatencyNS = num(n.MaxLatencyNS);
      return o;
    });
    if (needs.length) oem.Needs = needs;
  }
  if (Object.keys(oem).length) b.Oem = { Rackpool: oem };
  return b;
}

// num keeps what is not a number as typed, so the service, not the page,
// says what is wrong with it.
function num(v) {
  const n = Number(v);
  return v !== '' && Number.isFinite(n) ? n : v;
}

// messagesFor returns the service's messages about the property at path
// (RelatedProperties such as "#/Oem/Rackpool/Needs/0/Capacity"). A type
// error names no index (#/Oem/Rackpool/Needs/Count): it shows on every row.
function messagesFor(error, path) {
  if (!error?.extended) return [];
  const noIndex = path.replace(/\/\d+(?=\/|$)/g, '');
  return error.extended.filter((e) => (e.RelatedProperties ?? []).some((p) => {
    const q = p.replace(/^#\//, '');
    return q === path || q.startsWith(`${path}/`) || q === noIndex;
  }));
}

function Field({ id, label, error, path, children, hint }) {
  const msgs = messagesFor(error, path);
  return (
    <div class={`field${msgs.length ? ' invalid' : ''}`}>
      <label for={id}>{label}</label>
      {children}
      {hint && <div class="hint" id={`${id}-hint`}>{hint}</div>}
      {msgs.map((m, i) => (
        <div key={i} class="field-error" role="alert" id={`${id}-error`}>{m.Message}</div>
      ))}
    </div>
  );
}

export function Compose({ params }) {
  const [d, setD] = useState(loadDraft);
  const [result, setResult] = useState(null); // {kind: 'preview'|'reserved', data}
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState('');
  const hosts = useResource('/redfish/v1/Oem/Rackpool/Topology');
  useEffect(() => {
    if (params.blocks || params.host) {
      setD((x) => ({ ...x, mode: params.blocks ? 'specific' : x.mode, Blocks: params.blocks || x.Blocks, Host: params.host || x.Host }));
    }
  }, [params.blocks, params.host]);
  useEffect(() => sessionStorage.setItem(DRAFT, JSON.stringify(d)), [d]);

  if (!session.canCompose) {
    return (
      <Page id="compose" title="Compose">
        <p>Your role ({session.info?.role}) may look but not compose. Ask an operator of your tenant.</p>
      </Page>
    );
  }
  const set = (k) => (e) => setD({ ...d, [k]: e.target.value });
  const setNeed = (i, k) => (e) => setD({ ...d, Needs: d.Needs.map((n, j) => (j === i ? { ...n, [k]: e.target.value } : n)) });

  async function run(kind, fn) {
    setBusy(kind);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err instanceof Error ? err : new Error(String(err)));
      setResult(null);
    } finally {
      setBusy('');
    }
  }
  const preview = () => run('preview', async () => {
    const data = await api.post('/redfish/v1/CompositionService/Actions/Oem/Rackpool.Explain', body(d));
    setResult({ kind: 'preview', data });
  });
  const reserve = () => run('reserve', async () => {
    const data = await api.post('/redfish/v1/CompositionService/Actions/CompositionService.Compose', {
      RequestFormat: 'Manifest',
      RequestType: 'PreviewReserve',
      Manifest: { Stanzas: [{ StanzaType: 'ComposeSystem', StanzaId: d.Name.trim() || 'console', Request: body(d) }] },
    });
    setResult({ kind: 'reserved', data });
  });
  const applyReservation = (id) => run('apply', async () => {
    const data = await api.act('POST', '/redfish/v1/CompositionService/Actions/CompositionService.Compose', { RequestFormat: 'Manifest', RequestType: 'Apply', ReservationId: id });
    done(data.Manifest?.Stanzas?.[0]?.Response?.Id);
  });
  const apply = () => run('apply', async () => {
    const data = await api.act('POST', '/redfish/v1/Systems', body(d));
    done(data?.Id);
  });
  function done(id) {
    sessionStorage.removeItem(DRAFT);
    setD(emptyDraft());
    navigate(id ? `/systems/${id}` : '/systems');
  }

  const hostIDs = hosts.data?.Hosts?.map((h) => h.ID) ?? [];
  return (
    <Page id="compose" title="Compose a system">
      <form class="compose" onSubmit={(e) => (e.preventDefault(), preview())} aria-describedby="compose-help">
        <p id="compose-help" class="help">
          Describe what the system needs, or name the blocks. <b>Preview</b> shows where it would go (or why it cannot go anywhere) and changes nothing;
          <b> Reserve</b> holds the blocks for a while; <b>Apply</b> composes.
        </p>
        <fieldset class="mode">
          <legend>How</legend>
          <label><input type="radio" name="mode" value="constrained" checked={d.mode === 'constrained'} onChange={set('mode')} /> By constraints</label>
          <label><input type="radio" name="mode" value="specific" checked={d.mode === 'specific'} onChange={set('mode')} /> Specific blocks</label>
        </fieldset>
        <div class="grid2">
          <Field id="compose-name" label="Name" error={error} path="Name" hint="Optional; the service names the system otherwise.">
            <input id="compose-name" value={d.Name} onInput={set('Name')} aria-describedby="compose-name-hint" />
          </Field>
          <Field id="compose-host" label="Host" error={error} path="Oem/Rackpool/Host" hint="Optional: leave empty to let the placement choose.">
            <input id="compose-host" list="compose-hosts" value={d.Host} onInput={set('Host')} aria-describedby="compose-host-hint" />
            <datalist id="compose-hosts">{hostIDs.map((h) => <option key={h} value={h} />)}</datalist>
          </Field>
          <Field id="compose-description" label="Description" error={error} path="Description">
            <input id="compose-description" value={d.Description} onInput={set('Description')} />
          </Field>
        </div>
        {d.mode === 'specific' ? (
          <Field id="compose-blocks" label="Resource blocks" error={error} path="Links/ResourceBlocks" hint="Block IDs separated by commas or spaces, e.g. gpu1, hdd2.">
            <input id="compose-blocks" value={d.Blocks} onInput={set('Blocks')} aria-describedby="compose-blocks-hint" />
          </Field>
        ) : (
          <>
            <div class="grid2">
              <Field id="compose-cores" label="At least cores" error={error} path="Oem/Rackpool/MinCores">
                <input id="compose-cores" inputMode="numeric" value={d.MinCores} onInput={set('MinCores')} />
              </Field>
              <Field id="compose-memory" label="At least local memory (GiB)" error={error} path="Oem/Rackpool/MinMemoryGiB">
                <input id="compose-memory" inputMode="numeric" value={d.MinMemoryGiB} onInput={set('MinMemoryGiB')} />
              </Field>
            </div>
            <fieldset class="needs">
              <legend>Needs</legend>
              {d.Needs.map((n, i) => (
                <div class="need" key={i} role="group" aria-label={`Need ${i + 1}`}>
                  <Field id={`need-${i}-kind`} label="Kind" error={error} path={`Oem/Rackpool/Needs/${i}/Kind`}>
                    <select id={`need-${i}-kind`} value={n.Kind} onChange={setNeed(i, 'Kind')}>
                      {kinds.map((k) => <option key={k} value={k}>{k}</option>)}
                    </select>
                  </Field>
                  <Field id={`need-${i}-count`} label="Count" error={error} path={`Oem/Rackpool/Needs/${i}/Count`}>
                    <input id={`need-${i}-count`} inputMode="numeric" size="4" value={n.Count} onInput={setNeed(i, 'Count')} />
                  </Field>
                  <Field id={`need-${i}-capacity`} label="Capacity" error={error} path={`Oem/Rackpool/Needs/${i}/Capacity`}>
                    <input id={`need-${i}-capacity`} placeholder="e.g. 64GiB" size="8" value={n.Capacity} onInput={setNeed(i, 'Capacity')} />
                  </Field>
                  <Field id={`need-${i}-model`} label="Model" error={error} path={`Oem/Rackpool/Needs/${i}/Model`}>
                    <input id={`need-${i}-model`} size="10" value={n.Model} onInput={setNeed(i, 'Model')} />
                  </Field>
                  <Field id={`need-${i}-latency`} label="Max latency (ns)" error={error} path={`Oem/Rackpool/Needs/${i}/MaxLatencyNS`}>
                    <input id={`need-${i}-latency`} inputMode="numeric" size="6" value={n.MaxLatencyNS} onInput={setNeed(i, 'MaxLatencyNS')} />
                  </Field>
                  <button type="button" class="icon" aria-label={`Remove need ${i + 1}`} onClick={() => setD({ ...d, Needs: d.Needs.filter((_, j) => j !== i) })}>✕</button>
                </div>
              ))}
              <button type="button" onClick={() => setD({ ...d, Needs: [...d.Needs, emptyNeed()] })}>Add a need</button>
            </fieldset>
          </>
        )}
        <div class="actions">
          <button type="submit" disabled={!!busy}>Preview</button>
          <button type="button" onClick={reserve} disabled={!!busy}>Reserve</button>
          <button type="button" class="primary" onClick={apply} disabled={!!busy}>Apply</button>
          <button type="button" onClick={() => (setD(emptyDraft()), setResult(null), setError(null))} disabled={!!busy}>Clear</button>
          {busy && <span role="status" class="busy">{busy === 'apply' ? 'Composing…' : busy === 'reserve' ? 'Reserving…' : 'Placing…'}</span>}
        </div>
      </form>
      <div aria-live="polite">
        {error && <ErrorMessage error={error} id="compose-error" />}
        {error?.body?.error?.['@Message.ExtendedInfo']?.[0]?.Oem?.Rackpool?.Rejections && (
          <WhyNot details={error.body.error['@Message.ExtendedInfo'][0].Oem.Rackpool} />
        )}
        {result?.kind === 'preview' && <PreviewResult data={result.data} onApply={apply} busy={busy} />}
        {result?.kind === 'reserved' && <Reserved data={result.data} onApply={applyReservation} busy={busy} />}
      </div>
      {hosts.loading && !hosts.data && <Loading what="hosts" />}
    </Page>
  );
}

function PreviewResult({ data, onApply, busy }) {
  if (!data.Fits) {
    return (
      <section class="result refused" data-testid="compose-whynot" aria-labelledby="whynot-title">
        <h2 id="whynot-title">It does not fit</h2>
        <p class="reason">{data.Reason}</p>
        <WhyNot details={data.Details} />
      </section>
    );
  }
  return (
    <section class="result fits" data-testid="compose-preview" aria-labelledby="preview-title">
      <h2 id="preview-title">It fits on {data.Host}</h2>
      <p>
        Total round trip {Math.round(data.TotalRoundTripNs)} ns over {data.TotalHops} hops, touching {data.Groups} groups.
      </p>
      <table class="plain">
        <caption class="sr-only">Placement</caption>
        <thead><tr><th scope="col">Block</th><th scope="col">Kind</th><th scope="col">Host port</th><th scope="col">Round trip (ns)</th><th scope="col">Hops</th></tr></thead>
        <tbody>
          {data.Blocks.map((b) => (
            <tr key={b.Id}><td><a href={`#/blocks/${b.Id}`}>{b.Id}</a></td><td>{b.Kind}</td><td>{b.HostPort || '–'}</td><td>{b.RoundTripNs ? b.RoundTripNs.toFixed(1) : '–'}</td><td>{b.Hops ?? '–'}</td></tr>
          ))}
        </tbody>
      </table>
      <button type="button" class="primary" onClick={onApply} disabled={!!busy}>Apply this</button>
      <p class="hint">Apply places again on the state at that moment; Reserve first to hold exactly these blocks.</p>
    </section>
  );
}

// WhyNot lists the service's rejections: for each candidate host, why it
// could not take the request.
function WhyNot({ details }) {
  const rej = details?.Rejections ?? [];
  const byHost = new Map();
  for (const r of rej) {
    const k = r.host || '(any host)';
    if (!byHost.has(k)) byHost.set(k, []);
    byHost.get(k).push(r);
  }
  return (
    <div class="whynot">
      {details?.CanNeverFit && <p><strong>This request cannot fit on this topology even when it is empty.</strong></p>}
      <table class="plain" data-testid="whynot-table">
        <caption>Why not, per candidate host</caption>
        <thead><tr><th scope="col">Host</th><th scope="col">Reason</th><th scope="col">Detail</th></tr></thead>
        <tbody>
          {[...byHost].map(([h, rs]) => rs.map((r, i) => (
            <tr key={`${h}-${i}`}>
              {i === 0 && <th scope="row" rowSpan={rs.length}>{h}</th>}
              <td><span class="badge reason">{r.reason}</span>{r.block && <> {r.block}</>}</td>
              <td>{r.detail}</td>
            </tr>
          )))}
        </tbody>
      </table>
    </div>
  );
}

function Reserved({ data, onApply, busy }) {
  const id = data.ReservationId;
  const st = data.Manifest?.Stanzas?.[0]?.Response;
  const blocks = st?.Links?.ResourceBlocks?.map((r) => last(r['@odata.id'])) ?? [];
  return (
    <section class="result fits" data-testid="compose-reserved" aria-labelledby="reserved-title">
      <h2 id="reserved-title">Reserved as {id}</h2>
      <p>Held: {blocks.join(', ')}. The reservation expires on its own unless applied; see Reservations.</p>
      <button type="button" class="primary" onClick={() => onApply(id)} disabled={!!busy}>Apply reservation {id}</button>
    </section>
  );
}
