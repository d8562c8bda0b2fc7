// Small pieces every view uses: the page frame, errors shown the way the
// service wrote them, health badges, a confirmation dialog and formatters.

import { useEffect, useRef } from 'preact/hooks';

export function Page({ title, actions, children, id }) {
  return (
    <section class="page" aria-labelledby={`${id || 'page'}-title`}>
      <header class="page-head">
        <h1 id={`${id || 'page'}-title`}>{title}</h1>
        {actions && <div class="page-actions">{actions}</div>}
      </header>
      {children}
    </section>
  );
}

// ErrorMessage shows an ApiError (or any Error) as the service wrote it:
// its message, then its resolution.
export function ErrorMessage({ error, id }) {
  if (!error) return null;
  return (
    <div class="error" role="alert" id={id}>
      <strong>{error.message}</strong>
      {error.resolution && <div class="resolution">{error.resolution}</div>}
      {error.extended?.slice(1).map((e, i) => (
        <div key={i} class="more">{e.Message}</div>
      ))}
    </div>
  );
}

// FieldError shows, next to a form field, the messages of error that name
// property (RelatedProperties), so bad input is explained where it was
// typed.
export function FieldError({ error, property, id }) {
  if (!error?.extended) return null;
  const mine = error.extended.filter((e) => (e.RelatedProperties ?? []).some((p) => p.replace(/^#\//, '').split('/')[0] === property));
  if (!mine.length) return null;
  return (
    <div class="field-error" role="alert" id={id}>
      {mine.map((e, i) => (
        <div key={i}>{e.Message}</div>
      ))}
    </div>
  );
}

export function Health({ value }) {
  const v = value || 'Unknown';
  return <span class={`badge health-${v.toLowerCase()}`}>{v}</span>;
}

export function State({ value }) {
  const v = value || 'Unknown';
  return <span class={`badge state-${v.toLowerCase()}`}>{v}</span>;
}

// Confirm is a modal dialog; nothing happens until the user presses the
// confirming button.
export function Confirm({ title, children, confirmLabel, onConfirm, onCancel, busy }) {
  const ref = useRef();
  useEffect(() => {
    const d = ref.current;
    d.showModal();
    return () => d.open && d.close();
  }, []);
  return (
    <dialog ref={ref} class="dialog" aria-labelledby="confirm-title" onCancel={(e) => (e.preventDefault(), onCancel())}>
      <h2 id="confirm-title">{title}</h2>
      <div class="dialog-body">{children}</div>
      <div class="dialog-actions">
        <button type="button" onClick={onCancel}>Cancel</button>
        <button type="button" class="danger" onClick={onConfirm} disabled={busy}>
          {confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

export function Loading({ what }) {
  return (
    <p class="loading" role="status">
      Loading {what}…
    </p>
  );
}

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
export function fmtBytes(n) {
  if (n == null) return '';
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`;
}

export function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleString();
}

export const last = (id) => (id || '').split('/').pop();

// systemsSplit says what a Systems collection holds, given its members'
// SystemTypes: "2 composed systems · 4 hosts" (Redfish lists the physical
// hosts under /Systems beside the composed systems). The dashboard and the
// Systems view both say it.
export function systemsSplit(types) {
  const n = (type) => types.filter((t) => t === type).length;
  const plural = (k, one, many) => `${k} ${k === 1 ? one : many}`;
  const composed = n('Composed');
  const hosts = n('Physical');
  const other = types.length - composed - hosts;
  return [plural(composed, 'composed system', 'composed systems'), plural(hosts, 'host', 'hosts'),
    ...(other ? [`${other} other`] : [])].join(' · ');
}
