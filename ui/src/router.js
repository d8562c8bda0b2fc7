// Hash routing: #/path?query. The hash keeps every view a link that
// survives a reload, and the service needs to serve only /ui/.

import { useEffect, useState } from 'preact/hooks';

export function parseRoute(hash = location.hash) {
  const h = hash.replace(/^#/, '') || '/';
  const [path, q = ''] = h.split('?');
  return { path: path || '/', params: Object.fromEntries(new URLSearchParams(q)) };
}

export function useRoute() {
  const [route, setRoute] = useState(parseRoute());
  useEffect(() => {
    const on = () => setRoute(parseRoute());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

// href builds a link to path with params.
export function href(path, params) {
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '' && v != null)).toString() : '';
  return `#${path}${q ? `?${q}` : ''}`;
}

export function navigate(path, params) {
  location.hash = href(path, params);
}
