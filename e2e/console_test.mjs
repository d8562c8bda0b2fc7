// The web console in a real browser, run by e2e/console_test.go.
//
// Headless Chromium (Debian's chromium, never a downloaded one) driven by
// playwright-core (ui/node_modules, from make ui) against a real `rackpool
// serve` that the Go test started. Modes:
//
//   console  every view (screenshot + axe-core) and its empty states, the
//            topology opening fitted to the window (at the test's size and
//            at 1280x800), the dashboard counting systems as the Systems
//            view does, an all-zero chart with an axis fitted to zero;
//            compose through the form (a refused request shows its
//            explanation per host; bad input is explained beside its
//            field), live topology and event updates, decompose after a
//            confirmation, export and re-import with a preview, a session
//            that expires under a half-filled form, a wrong password, a
//            tenant who cannot see another tenant's systems and a read-only
//            account without controls. The server's enforcement is checked
//            by calling the API with the page's own session token.
//   ranges   on a topology with a rack of 70 hosts and a fabric of 70
//            switches (console_test.go): each drawn as ranges of 64 that
//            open and close, search opening the range of what it finds, a
//            range's details listing its members.
//   perf     time to the first meaningful paint of one view (printed as JSON).
//
// Environment: RACKPOOL_URL, RACKPOOL_CA_FILE, RACKPOOL_PASSWORD (the
// Administrator's), CHROMIUM (the browser), SHOTS (screenshot folder), and
// CONSOLE_TEST_PARENT=stdin when stdin is a pipe the parent holds open
// (its end means the parent is gone).
//
// No browser outlives this process: each is closed on the way out, also on
// SIGTERM, SIGINT and SIGHUP and when the parent goes; were this process
// killed outright, Chromium sees its DevTools pipe close and exits. Every
// wait has a deadline and says what it waited for.

import { createRequire } from 'node:module';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

const require = createRequire(new URL('../ui/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const BASE = process.env.RACKPOOL_URL;
const CA = fs.readFileSync(process.env.RACKPOOL_CA_FILE);
const ADMIN_PW = process.env.RACKPOOL_PASSWORD;
const SHOTS = process.env.SHOTS || '';
const WAIT_MS = 30000; // the deadline of every wait
const VIEWPORT = { width: 1400, height: 950 };
const LAPTOP = { width: 1280, height: 800 };
// Debian's chromium as root in a container: no sandbox, nothing fetched
// from elsewhere, a fresh profile (launchPersistentContext's
// --user-data-dir) for every browser.
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const TOPOLOGY_READY = "[data-testid=topology-svg][data-ready='1']";
const REPORT = '/redfish/v1/TelemetryService/MetricReports/FabricTelemetry';

const failures = [];
function fail(msg) {
  failures.push(msg);
  console.log('FAIL:', msg);
}

// Leaving: every browser closed, those still starting once they have
// started (within a deadline; Playwright's exit hook kills what is left),
// the profiles removed, then exit.
const launching = new Set();
const browsers = new Set();
const profiles = fs.mkdtempSync(path.join(os.tmpdir(), 'rackpool-console-'));
let leaving = null;
function leave(code, why) {
  if (why) console.log(why);
  leaving ??= (async () => {
    let timer;
    const deadline = new Promise((resolve) => { timer = setTimeout(resolve, 15000); });
    const close = async () => {
      await Promise.allSettled([...launching]);
      await Promise.allSettled([...browsers].map((b) => b.close()));
    };
    await Promise.race([close(), deadline]);
    clearTimeout(timer);
    try {
      fs.rmSync(profiles, { recursive: true, force: true, maxRetries: 5 });
    } catch (e) {
      console.log(`remove ${profiles}: ${e.message}`);
    }
    process.exit(code);
  })();
  return leaving;
}
// A parent that is gone no longer reads our output: writing it must not
// end this process before it has closed the browsers.
process.stdout.on('error', () => {});
process.stderr.on('error', () => {});
for (const [sig, n] of [['SIGTERM', 15], ['SIGINT', 2], ['SIGHUP', 1]]) {
  process.on(sig, () => leave(128 + n, `stopped by ${sig}: closing the browsers`));
}
if (process.env.CONSOLE_TEST_PARENT === 'stdin') {
  process.stdin.on('end', () => leave(1, 'the parent is gone: closing the browsers'));
  process.stdin.on('error', () => leave(1, 'the parent is gone: closing the browsers'));
  process.stdin.resume();
}

// call is the API as a plain client (not the page): {status, data}.
function call(method, p, body, user = 'Administrator', pw = ADMIN_PW) {
  const u = new URL(BASE + p);
  const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = https.request(u, {
      method, ca: CA, timeout: WAIT_MS,
      headers: {
        'Content-Type': 'application/json',
        Authorization: `Basic ${Buffer.from(`${user}:${pw}`).toString('base64')}`,
        ...(payload ? { 'Content-Length': payload.length } : {}),
      },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode, data: text ? JSON.parse(text) : null });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${p}: no answer within ${WAIT_MS / 1000} s`)));
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

async function must(method, p, body, user, pw) {
  const { status, data } = await call(method, p, body, user, pw);
  if (status >= 300 && status !== 202) throw new Error(`${method} ${p}: ${status} ${JSON.stringify(data)}`);
  return data;
}

async function composed() {
  const data = await must('GET', '/redfish/v1/Systems?$expand=.&$select=Members/Id,Members/SystemType');
  return data.Members.filter((m) => m.SystemType === 'Composed').map((m) => m.Id).sort();
}

// holder is the composed system holding block.
async function holder(block) {
  for (const sid of await composed()) {
    const links = (await must('GET', `/redfish/v1/Systems/${sid}`)).Links?.ResourceBlocks ?? [];
    if (links.some((l) => l['@odata.id'].endsWith(`/${block}`))) return sid;
  }
  throw new Error(`no system holds ${block}`);
}

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

// until polls cond until it holds, for at most WAIT_MS; then it fails,
// saying what it waited for.
async function until(cond, what) {
  const end = Date.now() + WAIT_MS;
  while (Date.now() < end) {
    if (await cond()) return true;
    await sleep(100);
  }
  fail(`waited ${WAIT_MS / 1000} s for ${what}`);
  return false;
}

// check runs one group of assertions; an exception fails it, and the
// test goes on with the next.
async function check(what, fn) {
  try {
    await fn();
  } catch (e) {
    fail(`${what}: ${e.message.split('\n')[0]}`);
  }
}

const sameSet = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

class Browser {
  static async open(name) {
    const b = new Browser();
    b.name = name;
    const launch = chromium.launchPersistentContext(fs.mkdtempSync(path.join(profiles, `${name}-`)), {
      executablePath: process.env.CHROMIUM,
      headless: true,
      chromiumSandbox: false,
      args: FLAGS,
      // The service's CA is per test; the browser is told to accept it.
      ignoreHTTPSErrors: true,
      viewport: VIEWPORT,
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
    });
    launching.add(launch);
    try {
      b.ctx = await launch;
    } finally {
      launching.delete(launch);
    }
    browsers.add(b.ctx);
    if (leaving) throw new Error(`${name}: the test is ending`);
    b.ctx.setDefaultTimeout(WAIT_MS);
    b.page = b.ctx.pages()[0] ?? await b.ctx.newPage();
    b.page.on('pageerror', (e) => fail(`${name}: page error: ${e}`));
    return b;
  }

  // wait waits for selector, saying what it is when it does not come.
  async wait(selector, what = selector, opts = {}) {
    try {
      return await this.page.waitForSelector(selector, opts);
    } catch (e) {
      throw new Error(`${this.name}: waited ${(opts.timeout ?? WAIT_MS) / 1000} s for ${what} (${selector}): ${e.message.split('\n')[0]}`);
    }
  }

  async login(user, password) {
    const p = this.page;
    await p.goto(`${BASE}/ui/`);
    await p.fill('#login-user', user);
    await p.fill('#login-password', password);
    await p.click('form.login button[type=submit]');
    await this.wait('nav.sidebar', `the console after ${user} logs in`);
  }

  // open shows route and waits for ready (opts: waitForSelector's).
  async open(route, ready, opts) {
    await this.page.goto(`${BASE}/ui/#${route}`);
    await this.wait(ready, `the view ${route} to be ready`, opts);
  }

  // reopen shows route afresh, from the dashboard, so that a view already
  // open is mounted again.
  async reopen(route, ready) {
    await this.page.goto(`${BASE}/ui/#/`);
    await this.wait('nav.sidebar', 'the console');
    await this.open(route, ready);
  }

  async shot(name) {
    if (!SHOTS) return;
    fs.mkdirSync(SHOTS, { recursive: true });
    await this.page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  }

  // axe runs axe-core on the page: serious and critical violations fail.
  async axe(view) {
    await this.page.evaluate(`${AXE}\n;true`);
    const violations = await this.page.evaluate(() => globalThis.axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations));
    for (const v of violations) {
      if (v.impact === 'serious' || v.impact === 'critical') {
        const where = v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ');
        fail(`${view}: axe ${v.id} (${v.impact}): ${v.help} at ${where}`);
      }
    }
  }

  // fetch calls the API from the page with the page's session token and
  // returns the status.
  fetch(method, p, body = null) {
    return this.page.evaluate(([m, u, b]) => fetch(u, {
      method: m,
      headers: { 'X-Auth-Token': sessionStorage.getItem('rackpool.token'), 'Content-Type': 'application/json' },
      body: b === null ? undefined : JSON.stringify(b),
    }).then((r) => r.status), [method, p, body]);
  }

  async close() {
    browsers.delete(this.ctx);
    await this.ctx.close();
  }
}

// emptyStates: every list on the page that has loaded (data-complete) and
// has no rows says, in a sentence, what would be there and how it gets
// there (its [data-testid=NAME-empty]).
async function emptyStates(b, view) {
  const problems = await b.page.evaluate(() => {
    const out = [];
    for (const list of document.querySelectorAll("main [data-testid][data-complete='1']")) {
      const name = list.dataset.testid.replace(/-table$/, '');
      const rows = list.tagName === 'TABLE' ? list.querySelectorAll('tbody tr:not(.vt-spacer)').length : list.querySelectorAll('li').length;
      if (rows) continue;
      const said = document.querySelector(`[data-testid="${name}-empty"]`)?.innerText.trim() ?? '';
      if (said.split(/\s+/).length < 8) out.push(`${list.dataset.testid} is empty and says ${JSON.stringify(said)}`);
    }
    return out;
  });
  for (const p of problems) fail(`${view}: ${p}, not what would appear there and how`);
}

// fitted: the topology opens with the whole rack in the window: every
// host, every fabric and every device (or the group it is in) drawn, with
// its text, inside the canvas and the viewport.
async function fitted(b, label) {
  const topo = await must('GET', '/redfish/v1/Oem/Rackpool/Topology');
  const want = [
    ...(topo.Hosts ?? []).map((h) => [`host:${h.ID}`]),
    ...(topo.Fabrics ?? []).flatMap((f) => [
      [`fabric:${f.ID}`],
      ...(f.Devices ?? []).map((d) => [`device:${d.ID}`,
        `group:${f.ID}/${d.Switch ?? f.Switches[0].ID}${d.Drawer ? `/${d.Drawer}` : ''}/${d.Kind}`]),
    ]),
  ];
  await b.reopen('/topology', TOPOLOGY_READY);
  const drawn = await b.page.evaluate(() => {
    const svg = document.querySelector('[data-testid=topology-svg]');
    const box = (el) => {
      const r = el.getBoundingClientRect();
      return { l: r.left, t: r.top, r: r.right, b: r.bottom };
    };
    return {
      canvas: box(svg),
      view: { l: 0, t: 0, r: innerWidth, b: innerHeight },
      nodes: [...svg.querySelectorAll('[data-node]')].map((g) => ({ key: g.dataset.node, ...box(g), text: !!g.querySelector('text') })),
    };
  });
  const keys = new Set(drawn.nodes.map((n) => n.key));
  const missing = want.filter((alts) => !alts.some((k) => keys.has(k))).map((alts) => alts[0]);
  if (missing.length) fail(`${label}: the topology opens without ${missing.slice(0, 8).join(', ')}${missing.length > 8 ? ` and ${missing.length - 8} more` : ''} in view`);
  const inside = (n, c) => n.l >= c.l - 1 && n.t >= c.t - 1 && n.r <= c.r + 1 && n.b <= c.b + 1;
  const fmt = (n) => `${n.key} at (${Math.round(n.l)},${Math.round(n.t)})-(${Math.round(n.r)},${Math.round(n.b)})`;
  const out = drawn.nodes.filter((n) => !inside(n, drawn.canvas) || !inside(n, drawn.view));
  if (out.length) {
    const c = drawn.canvas;
    fail(`${label}: the topology opens clipped: ${out.slice(0, 6).map(fmt).join(', ')}${out.length > 6 ? ` and ${out.length - 6} more` : ''} `
      + `lie outside the canvas (${Math.round(c.l)},${Math.round(c.t)})-(${Math.round(c.r)},${Math.round(c.b)}) or the window ${drawn.view.r}x${drawn.view.b}`);
  }
  const mute = drawn.nodes.filter((n) => !n.text);
  if (mute.length) fail(`${label}: the topology opens too small to read: ${mute.slice(0, 6).map((n) => n.key).join(', ')} drawn without text`);
}

async function console_() {
  // A fresh service: the event log is still empty, and says so.
  const b = await Browser.open('admin');
  const p = b.page;
  await b.login('Administrator', ADMIN_PW);
  await check('empty states of a fresh service', async () => {
    await b.open('/', "[data-testid=dash-events][data-complete='1']", { state: 'attached' }); // an empty list has no height
    await emptyStates(b, 'dashboard (fresh)');
    await b.open('/events', "[data-testid=events-table][data-complete='1']");
    await emptyStates(b, 'events (fresh)');
  });

  await must('POST', '/redfish/v1/AccountService/Oem/Rackpool/Tenants', { Id: 'blue' });
  await must('POST', '/redfish/v1/AccountService/Oem/Rackpool/Tenants', { Id: 'red' });
  for (const [user, role, tenant] of [['bea', 'Operator', 'blue'], ['rui', 'Operator', 'red'], ['vic', 'ReadOnly', null]]) {
    const acct = { UserName: user, Password: `${user}-password-1`, RoleId: role };
    if (tenant) acct.Oem = { Rackpool: { Tenant: tenant } };
    await must('POST', '/redfish/v1/AccountService/Accounts', acct);
  }
  let red = (await must('POST', '/redfish/v1/Systems',
    { Links: { ResourceBlocks: [{ '@odata.id': '/redfish/v1/CompositionService/ResourceBlocks/hdd5' }] }, Oem: { Rackpool: { Host: 'host3' } } },
    'rui', 'rui-password-1')).Id;

  const complete = (name) => `[data-testid=${name}-table][data-complete='1']`;
  const views = [
    ['dashboard', '/', "[data-testid=dash-pool] .pool-row"],
    ['topology', '/topology', TOPOLOGY_READY],
    ['blocks', '/blocks', complete('blocks')],
    ['systems', '/systems', complete('systems')],
    ['hosts', '/hosts', complete('hosts')],
    ['drives', '/drives', `${complete('drives')}, [data-testid=drives-disabled]`],
    ['leases', '/leases', `${complete('leases')}, [data-testid=leases-disabled]`],
    ['reservations', '/reservations', complete('reservations')],
    ['compose', '/compose', '#need-0-kind'],
    ['telemetry', '/telemetry', '#telemetry-title'],
    ['events', '/events', complete('events')],
    ['audit', '/events?tab=audit', complete('audit')],
    ['transfer', '/transfer', '#import-doc'],
    ['block-details', '/blocks/gpu1', '[data-testid=block-details]'],
    ['system-details', `/systems/${red}`, '[data-testid=system-details]'],
  ];
  for (const [name, route, ready] of views) {
    await b.open(route, ready);
    await b.shot(name);
    await b.axe(name);
    await emptyStates(b, name);
  }

  // The topology opens fitted: at the test's window and at a laptop's.
  await check(`topology at ${VIEWPORT.width}x${VIEWPORT.height}`, () => fitted(b, `${VIEWPORT.width}x${VIEWPORT.height}`));
  await check(`topology at ${LAPTOP.width}x${LAPTOP.height}`, async () => {
    await p.setViewportSize(LAPTOP);
    try {
      await fitted(b, `${LAPTOP.width}x${LAPTOP.height}`);
      await b.shot('topology-laptop');
    } finally {
      await p.setViewportSize(VIEWPORT);
    }
  });

  // A filter that matches nothing says so, and how to see the rest.
  await check('empty states of filters', async () => {
    for (const [route, ready, name] of [
      ['/events?q=no-such-event', complete('events'), 'events'],
      ['/events?tab=audit&user=no-such-user', complete('audit'), 'audit'],
      ['/blocks?q=no-such-block', complete('blocks'), 'blocks'],
    ]) {
      await b.reopen(route, ready);
      await emptyStates(b, route);
      const said = await p.locator(`[data-testid=${name}-empty]`).innerText({ timeout: WAIT_MS }).catch(() => '');
      if (!/match/.test(said)) fail(`${route}: says ${JSON.stringify(said)}, not that nothing matches the filter`);
    }
  });

  // The dashboard counts the Systems collection as the Systems view does,
  // composed systems and hosts apart.
  await check('dashboard and Systems view counts', async () => {
    const members = (await must('GET', '/redfish/v1/Systems?$expand=.&$select=Members/Id,Members/SystemType')).Members;
    const nComposed = members.filter((m) => m.SystemType === 'Composed').length;
    const nHosts = members.filter((m) => m.SystemType === 'Physical').length;
    const split = `${nComposed} composed system${nComposed === 1 ? '' : 's'} · ${nHosts} host${nHosts === 1 ? '' : 's'}`;
    await b.reopen('/systems', complete('systems'));
    const listed = await p.innerText('[data-testid=systems-count]');
    const listSplit = (await p.$('[data-testid=systems-split]')) ? await p.innerText('[data-testid=systems-split]') : '';
    await b.reopen('/', '[data-testid=dash-systems]');
    await until(async () => /^\d/.test(await p.innerText('[data-testid=dash-systems]')), 'the dashboard to count the systems');
    const dash = await p.innerText('[data-testid=dash-systems]');
    const dashSplit = (await p.$('[data-testid=dash-systems-split]')) ? await p.innerText('[data-testid=dash-systems-split]') : '';
    const listTotal = Number((/of ([\d,]+)/.exec(listed)?.[1] ?? 'NaN').replace(/,/g, ''));
    if (Number(dash.replace(/,/g, '')) !== listTotal || listTotal !== members.length) {
      fail(`the dashboard counts ${dash} systems, the Systems view "${listed}", the API ${members.length}`);
    }
    if (dashSplit !== split || listSplit !== split) {
      fail(`the dashboard says ${JSON.stringify(dashSplit)} and the Systems view ${JSON.stringify(listSplit)}, want ${JSON.stringify(split)}`);
    }
  });

  // A chart of all zeros has an axis fitted to zero (not uPlot's 0 to
  // 100) and says what the zeros mean.
  await check('all-zero telemetry charts', async () => {
    await b.reopen('/telemetry', '[data-testid=chart-down] canvas');
    const charts = { util: 'FabricUtilisationMean', errors: 'FabricLinkErrors', down: 'FabricLinksDown' };
    await b.wait('[data-testid=chart-down] [data-y-max]', "the links-down chart's value axis");
    const history = (await must('GET', `${REPORT}?history`)).MetricValues ?? [];
    let zero = 0;
    for (const [id, metric] of Object.entries(charts)) {
      const values = history.filter((v) => v.MetricId === metric).map((v) => Number(v.MetricValue));
      if (!values.length || values.some((v) => v !== 0)) continue;
      zero++;
      const max = Number(await p.getAttribute(`[data-testid=chart-${id}] [data-y-max]`, 'data-y-max'));
      if (!(max > 0 && max <= 1)) fail(`the ${id} chart reads 0 in every report and its axis goes to ${max}; want one fitted to zero (0 to 1)`);
      const note = (await p.$(`[data-testid=chart-${id}-note]`)) ? await p.innerText(`[data-testid=chart-${id}-note]`) : '';
      if (!note) fail(`the ${id} chart reads 0 in every report and says nothing about it`);
    }
    if (!zero) fail(`no fabric chart reads all zeros in ${history.length} values: nothing to check the zero axis on`);
    await b.shot('telemetry-zero');
  });

  // Telemetry of a system that no agent reports and no provisioning
  // manages: the fabric charts draw, the system's panels say why they are
  // empty.
  await b.open(`/telemetry?system=${red}`, '[data-testid=chart-util] canvas');
  await b.wait('text=is not under predictive provisioning', 'the provisioning panel to say the system is not managed');
  await b.wait(`text=No usage reported for ${red}`, 'the usage panel to say no agent reports');

  // Keyboard: every view is reachable from the navigation by Tab alone.
  await p.goto(`${BASE}/ui/#/`);
  await b.wait('[data-testid=dash-pool]', 'the dashboard');
  const reached = new Set();
  for (let i = 0; i < 40; i++) {
    await p.keyboard.press('Tab');
    reached.add(await p.evaluate(() => document.activeElement.getAttribute('href')));
  }
  for (const [, route] of views.slice(0, 13)) {
    if (route !== '/events?tab=audit' && !reached.has(`#${route.split('?')[0]}`)) {
      fail(`keyboard: the link to ${route} is not reachable by Tab (reached ${[...reached].filter(Boolean).sort().join(', ')})`);
    }
  }

  // A refused request shows the service's explanation, per host.
  await b.open('/compose', '#need-0-count');
  await p.fill('#need-0-count', '40');
  await p.click("button:text-is('Preview')");
  await b.wait('[data-testid=compose-whynot]', 'the why-not explanation');
  const rows = await p.locator('[data-testid=whynot-table] tbody tr').count();
  if (rows < 4) fail(`the why-not table has ${rows} rows, want one per host (4)`);
  const txt = await p.innerText('[data-testid=compose-whynot]');
  if (!txt.includes('host2') || !txt.includes('insufficient')) fail(`why-not says ${JSON.stringify(txt)}`);
  await b.shot('compose-whynot');
  // Bad input: the API's own message beside the field; nothing changes.
  const before = await composed();
  await p.fill('#need-0-count', 'two');
  await p.click("button:text-is('Preview')");
  await b.wait('#need-0-count-error', "the count field's error");
  const fieldError = await p.innerText('#need-0-count-error');
  if (!fieldError.includes('Count')) fail(`the count field's error does not name the field: ${fieldError}`);
  await b.shot('compose-bad-input');
  // Compose through the form: preview, then apply.
  await p.fill('#need-0-count', '1');
  await p.fill('#compose-name', 'console-one');
  await p.click("button:text-is('Preview')");
  await b.wait('[data-testid=compose-preview]', 'the preview');
  if (!sameSet(await composed(), before)) fail('a preview composed something');
  await p.click("button:text-is('Apply this')");
  await b.wait('[data-testid=system-details]', 'the new system after Apply');
  const after = await composed();
  const made = after.filter((s) => !before.includes(s));
  if (made.length !== 1) throw new Error(`apply through the form: systems ${before} -> ${after}`);
  const mine = made[0];
  if (!p.url().endsWith(`#/systems/${mine}`)) fail(`after apply the page is ${p.url()}, want #/systems/${mine}`);

  // Live: a composition made elsewhere appears on the topology and in the
  // event list without a reload.
  await b.open('/topology?focus=gpu5', TOPOLOGY_READY);
  const other = (await must('POST', '/redfish/v1/Systems',
    { Links: { ResourceBlocks: [{ '@odata.id': '/redfish/v1/CompositionService/ResourceBlocks/gpu5' }] } })).Id;
  await b.wait('[data-node="device:gpu5"].attached', 'gpu5 drawn attached after another client composed it');
  await b.shot('topology-live');
  await b.open('/events', complete('events'));
  await must('DELETE', `/redfish/v1/Systems/${other}`);
  await b.wait(`[data-testid=events-table] a[href*="${other}"]`, `the event of ${other}'s decomposition`);

  // Decompose through the details page, after a confirmation.
  await b.open(`/systems/${mine}`, '[data-testid=system-details]');
  await p.click("button:text-is('Decompose')");
  await b.wait('dialog[open]', 'the confirmation dialog');
  if (!(await composed()).includes(mine)) fail('the system went before the confirmation');
  await b.shot('decompose-confirm');
  await p.click(`dialog button:text-is('Decompose ${mine}')`);
  await until(async () => !(await composed()).includes(mine), 'the decompose through the console');
  // The page goes back to the list once its DELETE has answered; a
  // navigation of the test's before then would be undone by it.
  await p.waitForURL(/#\/systems$/);

  // Export, free everything, preview the import, apply it.
  const exported = await composed();
  await b.open('/transfer', '#import-doc');
  await p.click("button:text-is('Export the allocation')");
  await until(async () => /rackpool-allocation\/1/.test(await p.inputValue('#import-doc')), 'the exported document in the import box');
  for (const sid of exported) await must('DELETE', `/redfish/v1/Systems/${sid}`);
  await p.click("button:text-is('Preview import')");
  await b.wait('[data-testid=import-preview]', 'the import preview');
  if ((await composed()).length) fail('a preview imported something');
  if (await p.locator('[data-testid=import-preview] tbody tr').count() < exported.length) fail('the preview lists fewer changes than systems exported');
  await b.shot('import-preview');
  await p.click("button:text-is('Apply import')");
  await b.wait('[data-testid=import-done]', 'the import to be applied');
  const reimported = (await composed()).length;
  if (reimported !== exported.length) fail(`re-import made ${reimported} systems, exported ${exported.length}`);
  // The import composed red's system again, under a new ID.
  red = await holder('hdd5');

  // An expired session returns to the login form and keeps what was typed.
  await b.open('/compose', '#compose-name');
  await p.fill('#compose-name', 'typed-before-expiry');
  const loc = await p.evaluate(() => JSON.parse(sessionStorage.getItem('rackpool.session')).location);
  await must('DELETE', loc);
  // The next request, or the event stream (whichever notices first),
  // finds the session gone; the page underneath is then inert. A click
  // from the script (no waiting for the button to take it) makes that
  // request.
  await p.evaluate(() => [...document.querySelectorAll('main button')].find((x) => x.textContent === 'Preview')?.click());
  await b.wait('.login-overlay #login-password', 'the login form over the page after the session ended');
  await b.shot('session-expired');
  await p.fill('.login-overlay #login-password', ADMIN_PW);
  await p.click('.login-overlay button[type=submit]');
  await b.wait('.login-overlay', 'the login form to go after logging in again', { state: 'detached' });
  const kept = await p.inputValue('#compose-name');
  if (kept !== 'typed-before-expiry') fail(`after logging in again the form lost what was typed: ${kept}`);
  await b.close();

  // A wrong password is refused on the page, without the browser's own
  // password prompt.
  const w = await Browser.open('wrong');
  await w.page.goto(`${BASE}/ui/`);
  await w.page.fill('#login-user', 'bea');
  await w.page.fill('#login-password', 'not-her-password');
  await w.page.click('form.login button[type=submit]');
  await w.wait('form.login .error', 'the refusal of a wrong password');
  const refusal = await w.page.innerText('form.login .error');
  if (!refusal.includes('not right')) fail(`a wrong password says ${refusal}`);
  await w.close();

  // A tenant sees its own systems and the free pool, never another
  // tenant's, whatever its page asks.
  const bea = await Browser.open('bea');
  await bea.login('bea', 'bea-password-1');
  await bea.open('/systems', complete('systems'));
  if (await bea.page.locator(`[data-row="${red}"]`).count()) fail(`tenant blue sees red's system ${red}`);
  let code = await bea.fetch('GET', `/redfish/v1/Systems/${red}`);
  if (code !== 404) fail(`blue's page GETs red's system: ${code}, want 404`);
  code = await bea.fetch('DELETE', `/redfish/v1/Systems/${red}`);
  if (code !== 404) fail(`blue's page DELETEs red's system: ${code}, want 404`);
  if (!(await composed()).includes(red)) throw new Error("red's system is gone after blue's attempt");
  await bea.open('/blocks', complete('blocks'));
  if (await bea.page.locator('[data-row="hdd5"]').count()) fail("tenant blue sees red's block hdd5");
  await bea.shot('tenant-blocks');
  await bea.close();

  // A read-only account sees no mutating control; the server refuses
  // what its page could still send.
  const vic = await Browser.open('vic');
  await vic.login('vic', 'vic-password-1');
  if (await vic.page.locator('nav a[href="#/compose"]').count()) fail('a read-only account has Compose in its navigation');
  for (const [route, ready] of [[`/systems/${red}`, '[data-testid=system-details]'], ['/reservations', '#reservations-title'],
    ['/compose', '#compose-title'], ['/transfer', '#transfer-title']]) {
    await vic.open(route, ready);
    const labels = await vic.page.$$eval('main button', (bs) => bs.map((x) => x.textContent));
    for (const label of labels) {
      if (/\b(Decompose|Release|Apply|Reserve|Import|Export|Preview)\b/.test(label)) fail(`a read-only account sees the control ${JSON.stringify(label)} on ${route}`);
    }
  }
  await vic.shot('read-only');
  const body = { Links: { ResourceBlocks: [{ '@odata.id': '/redfish/v1/CompositionService/ResourceBlocks/gpu6' }] } };
  code = await vic.fetch('POST', '/redfish/v1/Systems', body);
  if (code !== 403) fail(`a read-only page composes: ${code}, want 403`);
  code = await vic.fetch('DELETE', `/redfish/v1/Systems/${red}`);
  if (code !== 403) fail(`a read-only page decomposes: ${code}, want 403`);
  await vic.close();
}

// ranges: a list of more than 64 hosts (of a rack) or switches (of a
// fabric) is drawn as ranges of 64, which open and close like device
// groups; search opens the range of what it finds; a range's details list
// its members.
async function ranges() {
  const b = await Browser.open('ranges');
  const p = b.page;
  await b.login('Administrator', ADMIN_PW);
  await b.open('/topology', TOPOLOGY_READY);
  const drawn = async () => new Set(await p.$$eval('[data-node]', (ns) => ns.map((n) => n.dataset.node)));
  const expanded = (key) => p.getAttribute(`[data-node="${key}"]`, 'aria-expanded');
  let keys = await drawn();
  for (const k of ['range:hosts/rackA/1', 'range:hosts/rackA/2', 'range:switches/lonely/1', 'range:switches/lonely/2', 'host:b1', 'switch:ocsB/osw']) {
    if (!keys.has(k)) fail(`ranges: the topology opens without ${k}`);
  }
  for (const k of ['host:a1', 'host:a70', 'switch:lonely/s1', 'device:hdd1']) {
    if (keys.has(k)) fail(`ranges: ${k} is drawn while its range is closed`);
  }
  const label = await p.getAttribute('[data-node="range:hosts/rackA/1"]', 'aria-label');
  if (!/a1 … 64, 64 hosts/.test(label ?? '')) fail(`ranges: the first range of hosts is labelled ${JSON.stringify(label)}`);

  // Open the second range of hosts: its six hosts below it, its details.
  await p.click('[data-node="range:hosts/rackA/2"]');
  await b.wait('[data-node="host:a70"]', 'the hosts of the opened range');
  keys = await drawn();
  const missing = ['a65', 'a66', 'a67', 'a68', 'a69', 'a70'].filter((h) => !keys.has(`host:${h}`));
  if (missing.length || keys.has('host:a64')) fail(`ranges: the open range a65 … 70 draws hosts ${[...keys].filter((k) => k.startsWith('host:a')).join(' ')}`);
  if (await expanded('range:hosts/rackA/2') !== 'true') fail('ranges: an open range is not aria-expanded');
  const details = await p.innerText('[data-testid=topology-details]');
  if (!/Hosts a65 … 70/.test(details) || !/a70/.test(details)) fail(`ranges: the details of a range say ${JSON.stringify(details.slice(0, 200))}`);
  await b.axe('topology with an open range');
  await b.shot('topology-ranges');
  await p.click('[data-node="range:hosts/rackA/2"]');
  await b.wait('[data-node="host:a70"]', 'the hosts of the closed range to go', { state: 'detached' });

  // Search opens the range of what it finds (nothing of a closed range is
  // drawn): a device on a switch of the first range of switches, a host
  // of the first range of hosts.
  for (const [q, key] of [['hdd3', 'device:hdd3'], ['a10', 'host:a10']]) {
    await p.fill('#topology-search', q);
    await p.click("button:text-is('Find')");
    await b.wait(`[data-node="${key}"]`, `${key} found by search`);
  }
  await b.close();
}

// perf: milliseconds from navigation to the view's ready selector, best
// of 3 after one warm-up (the bundle cached, as for a returning operator).
async function perf(route, ready) {
  const b = await Browser.open('perf');
  await b.login('Administrator', ADMIN_PW);
  const times = [];
  for (let i = 0; i < 4; i++) {
    await b.page.goto(`${BASE}/ui/#/`);
    await b.wait('nav.sidebar', 'the console');
    const t0 = performance.now();
    await b.page.goto(`${BASE}/ui/#${route}`);
    await b.wait(ready, `the first paint of ${route}`, { timeout: 120000 });
    if (i) times.push(performance.now() - t0);
  }
  const nodes = await b.page.evaluate(() => document.querySelectorAll('*').length);
  await b.shot(`perf-${route.replace(/^\/+|\/+$/g, '').replace(/\//g, '-')}`);
  await b.close();
  console.log(JSON.stringify({ route, ms: times, best_ms: Math.min(...times), dom_elements: nodes }));
}

async function main() {
  const [mode, ...args] = process.argv.slice(2);
  if (mode === 'console') await console_();
  else if (mode === 'ranges') await ranges();
  else if (mode === 'perf') await perf(args[0], args[1]);
  else throw new Error(`unknown mode ${mode}: console, ranges or perf ROUTE READY`);
  if (failures.length) {
    console.log(`${failures.length} failures`);
    return 1;
  }
  console.log('ok');
  return 0;
}

main().then((code) => leave(code), (err) => {
  console.log(`FAIL: ${err.stack || err}`);
  return leave(1);
});
