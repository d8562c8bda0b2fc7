// Builds the console into ../internal/console/dist, which the Go package
// embeds. The output is committed so that `make run` needs no Node; `make
// ui-check` (run by make test) rebuilds it and fails if it differs.
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';

const out = '../internal/console/dist';
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: { app: 'src/main.jsx' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome110', 'firefox110', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: out,
  legalComments: 'linked',
  logLevel: 'warning',
});
copyFileSync('index.html', `${out}/index.html`);
