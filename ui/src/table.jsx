// VirtualTable: a table of any number of rows that renders only those in
// view (plus a few either side) inside its own scroll area. Rows have one
// fixed height, so the rows above and below the window are two spacer rows
// of known height and a scroll needs no measuring. It is a real <table>:
// aria-rowcount and each row's aria-rowindex tell assistive technology how
// many rows there are and where a rendered one sits; the sortable headers
// are buttons carrying aria-sort on their cell.

import { useEffect, useRef, useState } from 'preact/hooks';

const OVERSCAN = 10;

// sortRows returns rows ordered by column's sort value (its value(row),
// else row[key]); numbers compare as numbers and strings naturally (gpu2
// before gpu10), empty values last. The sort is stable.
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
export function sortRows(rows, column, descending) {
  if (!column) return rows;
  const value = column.value ?? ((r) => r[column.key]);
  const keyed = rows.map((r) => [value(r), r]);
  const sign = descending ? -1 : 1;
  keyed.sort(([a], [b]) => {
    const emptyA = a == null || a === '';
    const emptyB = b == null || b === '';
    if (emptyA || emptyB) return emptyA - emptyB;
    if (typeof a === 'number' && typeof b === 'number') return sign * (a - b);
    return sign * collator.compare(String(a), String(b));
  });
  return keyed.map(([, r]) => r);
}

// columns: [{ key, label, width, value(row) for sorting, render(row),
// sortable (default true) }]; sort: { key, descending }; onSort(key);
// empty: what to say, once complete, when there are no rows.
export function VirtualTable({ name, label, columns, rows, rowKey, sort, onSort, complete, empty, rowHeight = 36 }) {
  const scroller = useRef();
  const [view, setView] = useState({ top: 0, height: 0 });
  useEffect(() => {
    const el = scroller.current;
    let frame = 0;
    const measure = () => {
      frame = 0;
      setView({ top: el.scrollTop, height: el.clientHeight });
    };
    const schedule = () => {
      frame ||= requestAnimationFrame(measure);
    };
    el.addEventListener('scroll', schedule, { passive: true });
    const resize = new ResizeObserver(schedule);
    resize.observe(el);
    measure();
    return () => {
      el.removeEventListener('scroll', schedule);
      resize.disconnect();
      cancelAnimationFrame(frame);
    };
  }, []);

  // The scroll position as last seen may be past the end of fewer rows.
  const top = Math.min(view.top, Math.max(0, rows.length * rowHeight - view.height));
  const first = Math.max(0, Math.floor(top / rowHeight) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((top + view.height) / rowHeight) + OVERSCAN);
  const spacer = (n) => (
    <tr class="vt-spacer" aria-hidden="true" style={{ height: `${n * rowHeight}px` }}>
      <td colSpan={columns.length} />
    </tr>
  );
  return (
    <div class="vt" ref={scroller} tabIndex={0} role="region" aria-label={`${label} table`}>
      <table data-testid={`${name}-table`} data-complete={complete ? '1' : undefined} aria-label={label}
        aria-rowcount={rows.length + 1} style={{ '--vt-row': `${rowHeight}px` }}>
        <colgroup>
          {columns.map((c) => <col key={c.key} style={c.width ? { width: c.width } : undefined} />)}
        </colgroup>
        <thead>
          <tr aria-rowindex={1}>
            {columns.map((c) => {
              const active = sort?.key === c.key;
              return (
                <th key={c.key} scope="col" aria-sort={active ? (sort.descending ? 'descending' : 'ascending') : undefined}>
                  {c.sortable === false ? c.label : (
                    <button type="button" class="vt-sort" onClick={() => onSort(c.key)}>
                      {c.label}
                      <span class="vt-arrow" aria-hidden="true">{active ? (sort.descending ? '▼' : '▲') : '↕'}</span>
                    </button>
                  )}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {first > 0 && spacer(first)}
          {rows.slice(first, last).map((r, i) => {
            const id = rowKey(r);
            return (
              <tr key={id} data-row={id} aria-rowindex={first + i + 2}>
                {columns.map((c) => <td key={c.key}>{c.render ? c.render(r) : r[c.key]}</td>)}
              </tr>
            );
          })}
          {last < rows.length && spacer(rows.length - last)}
        </tbody>
      </table>
      {complete && rows.length === 0 && <p class="vt-empty empty" data-testid={`${name}-empty`}>{empty}</p>}
    </div>
  );
}
