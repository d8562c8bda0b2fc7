// Import and export of the allocation (every composed system and the
// tenants, as one document). Export downloads it; import first previews
// what would change (the service places the document and changes
// nothing), and only the Apply button imports.

import { useState } from 'preact/hooks';
import { api, session } from './api.js';
import { Page, ErrorMessage } from './components.jsx';

const importPath = '/redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation';

export function Transfer() {
  const [doc, setDoc] = useState('');
  const [preview, setPreview] = useState(null);
  const [done, setDone] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState('');
  if (!session.canManage) {
    return (
      <Page id="transfer" title="Import and export">
        <p>Exporting and importing the allocation is for administrators (the ConfigureManager privilege); your role is {session.info?.role}.</p>
      </Page>
    );
  }
  async function run(what, fn) {
    setBusy(what);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy('');
    }
  }
  const exportDoc = () => run('export', async () => {
    const a = await api.post('/redfish/v1/CompositionService/Actions/Oem/Rackpool.ExportAllocation', {});
    const text = JSON.stringify(a, null, 2);
    setDoc(text);
    setPreview(null);
    setDone(null);
    const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    const link = document.createElement('a');
    link.href = url;
    link.download = `rackpool-allocation-${a.topology}-${a.exported_at.replace(/[:.]/g, '-')}.json`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  });
  function parsed() {
    try {
      return JSON.parse(doc);
    } catch (err) {
      throw new Error(`The document is not JSON: ${err.message}`);
    }
  }
  const previewDoc = () => run('preview', async () => {
    setDone(null);
    setPreview(null);
    setPreview(await api.post(importPath, { ...parsed(), RequestType: 'Preview' }));
  });
  const applyDoc = () => run('apply', async () => {
    const res = await api.act('POST', importPath, { ...parsed(), RequestType: 'Apply' });
    setDone(res.Systems || []);
    setPreview(null);
  });
  async function readFile(e) {
    const f = e.target.files[0];
    if (f) {
      setDoc(await f.text());
      setPreview(null);
      setDone(null);
    }
  }
  return (
    <Page id="transfer" title="Import and export">
      <section class="card" aria-labelledby="export-title">
        <h2 id="export-title">Export</h2>
        <p class="help">Every composed system (name, host, blocks, tenant) and the tenants with their quotas. Accounts are not exported.</p>
        <button type="button" onClick={exportDoc} disabled={!!busy}>Export the allocation</button>
      </section>
      <section class="card" aria-labelledby="import-title" style="margin-top:14px">
        <h2 id="import-title">Import</h2>
        <p class="help">Load a document, preview what it would compose, then apply: all of it or nothing.</p>
        <div class="field">
          <label for="import-file">Document file</label>
          <input id="import-file" type="file" accept="application/json,.json" onChange={readFile} />
        </div>
        <div class="field">
          <label for="import-doc">Document</label>
          <textarea id="import-doc" class="doc" value={doc} onInput={(e) => (setDoc(e.target.value), setPreview(null))} spellcheck={false} />
        </div>
        <div class="actions">
          <button type="button" onClick={previewDoc} disabled={!doc || !!busy}>Preview import</button>
          <button type="button" class="primary" onClick={applyDoc} disabled={!preview || !!busy}>Apply import</button>
          {busy && <span class="busy" role="status">{busy === 'apply' ? 'Importing…' : busy === 'preview' ? 'Checking…' : 'Exporting…'}</span>}
        </div>
        <div aria-live="polite">
          <ErrorMessage error={error} id="import-error" />
          {preview && <Preview p={preview} />}
          {done && (
            <p class="notice" role="status" data-testid="import-done">
              Imported {done.length} systems: {done.map((r) => r['@odata.id'].split('/').pop()).join(', ') || 'none'}.
            </p>
          )}
        </div>
      </section>
    </Page>
  );
}

function Preview({ p }) {
  return (
    <div data-testid="import-preview">
      <h3>An import would</h3>
      <table class="plain">
        <caption class="sr-only">Systems the import would compose</caption>
        <thead><tr><th scope="col">Change</th><th scope="col">System</th><th scope="col">Host</th><th scope="col">Blocks</th><th scope="col">Tenant</th></tr></thead>
        <tbody>
          {p.Systems.map((s) => (
            <tr key={s.Name}><td>{s.Action}</td><td>{s.Name}</td><td>{s.Host}</td><td>{s.Blocks.join(', ')}</td><td>{s.Tenant || '–'}</td></tr>
          ))}
          {p.NewTenants.map((t) => (
            <tr key={`t-${t}`}><td>Create tenant</td><td colSpan={4}>{t}</td></tr>
          ))}
        </tbody>
      </table>
      {p.Unchanged.length > 0 && <p class="muted">Left as they are: {p.Unchanged.map((u) => u.Name || u.Id).join(', ')}.</p>}
      {p.Systems.length === 0 && <p>The document composes nothing.</p>}
    </div>
  );
}
