"""The web console in a real browser, run by e2e/console_test.go.

Headless Chromium (Debian's chromium) driven by Playwright against a real
`rackpool serve` that the Go test started. Modes:

  console  every view (screenshot + axe-core), compose through the form
           (a refused request shows its explanation per host; bad input is
           explained beside its field), live topology and event updates,
           decompose after a confirmation, export and re-import with a
           preview, a session that expires under a half-filled form, a wrong
           password, a tenant who cannot see another tenant's systems and a read-only
           account without controls. The server's enforcement is checked by
           calling the API with the page's own session token.
  perf     time to the first meaningful paint of one view (printed as JSON).

Environment: RACKPOOL_URL, RACKPOOL_CA_FILE, RACKPOOL_PASSWORD (the
Administrator's), CHROMIUM, AXE (axe.min.js), SHOTS (screenshot folder).
"""

import base64
import re
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

from playwright.sync_api import sync_playwright, expect

URL = os.environ["RACKPOOL_URL"]
CA = os.environ["RACKPOOL_CA_FILE"]
ADMIN_PW = os.environ["RACKPOOL_PASSWORD"]
SHOTS = os.environ.get("SHOTS", "")
AXE = os.environ.get("AXE", "")
CTX = ssl.create_default_context(cafile=CA)

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def call(method, path, body=None, user="Administrator", pw=None):
    """The API as a plain client (not the page): returns (status, json)."""
    req = urllib.request.Request(URL + path, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    cred = base64.b64encode(f"{user}:{pw or ADMIN_PW}".encode()).decode()
    req.add_header("Authorization", "Basic " + cred)
    try:
        with urllib.request.urlopen(req, context=CTX, timeout=30) as r:
            data = r.read()
            return r.status, json.loads(data) if data else None
    except urllib.error.HTTPError as e:
        data = e.read()
        return e.code, json.loads(data) if data else None


def must(method, path, body=None, **kw):
    status, data = call(method, path, body, **kw)
    if status >= 300 and status != 202:
        raise SystemExit(f"{method} {path}: {status} {data}")
    return data


def composed():
    data = must("GET", "/redfish/v1/Systems?$expand=.&$select=Members/Id,Members/SystemType")
    return sorted(m["Id"] for m in data["Members"] if m.get("SystemType") == "Composed")


def holder(block):
    """The composed system holding block."""
    for sid in composed():
        links = must("GET", "/redfish/v1/Systems/" + sid).get("Links", {}).get("ResourceBlocks", [])
        if any(l["@odata.id"].endswith("/" + block) for l in links):
            return sid
    raise SystemExit(f"no system holds {block}")


def wait_until(cond, what, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.1)
    fail(f"timed out waiting for {what}")
    return False


class Browser:
    def __init__(self, pw, name):
        self.b = pw.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        # The service's CA is per test; the browser is told to accept it.
        self.ctx = self.b.new_context(ignore_https_errors=True, viewport={"width": 1400, "height": 950})
        self.ctx.set_default_timeout(30000)
        self.page = self.ctx.new_page()
        self.name = name
        self.page.on("pageerror", lambda e: fail(f"{name}: page error: {e}"))

    def login(self, user, password):
        p = self.page
        p.goto(URL + "/ui/")
        p.fill("#login-user", user)
        p.fill("#login-password", password)
        p.click("form.login button[type=submit]")
        p.wait_for_selector("nav.sidebar")

    def open(self, route, ready):
        self.page.goto(URL + "/ui/#" + route)
        self.page.wait_for_selector(ready)

    def shot(self, name):
        if SHOTS:
            os.makedirs(SHOTS, exist_ok=True)
            self.page.screenshot(path=os.path.join(SHOTS, name + ".png"), full_page=True)

    def axe(self, view):
        """axe-core on the page: serious and critical violations fail."""
        self.page.evaluate(open(AXE).read() + "\n;true")
        violations = self.page.evaluate("axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)")
        for v in violations:
            if v["impact"] in ("serious", "critical"):
                where = "; ".join(" ".join(map(str, n["target"])) for n in v["nodes"][:3])
                fail(f"{view}: axe {v['id']} ({v['impact']}): {v['help']} at {where}")

    def fetch(self, method, path, body=None):
        """The API called from the page with the page's session token."""
        return self.page.evaluate(
            """([m, p, b]) => fetch(p, {method: m, headers: {'X-Auth-Token': sessionStorage.getItem('rackpool.token'),
                 'Content-Type': 'application/json'}, body: b === null ? undefined : JSON.stringify(b)}).then(r => r.status)""",
            [method, path, body])

    def close(self):
        self.b.close()


def console(pw):
    must("POST", "/redfish/v1/AccountService/Oem/Rackpool/Tenants", {"Id": "blue"})
    must("POST", "/redfish/v1/AccountService/Oem/Rackpool/Tenants", {"Id": "red"})
    for user, role, tenant in [("bea", "Operator", "blue"), ("rui", "Operator", "red"), ("vic", "ReadOnly", None)]:
        acct = {"UserName": user, "Password": user + "-password-1", "RoleId": role}
        if tenant:
            acct["Oem"] = {"Rackpool": {"Tenant": tenant}}
        must("POST", "/redfish/v1/AccountService/Accounts", acct)
    red = must("POST", "/redfish/v1/Systems",
               {"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/hdd5"}]},
                "Oem": {"Rackpool": {"Host": "host3"}}}, user="rui", pw="rui-password-1")["Id"]

    b = Browser(pw, "admin")
    p = b.page
    b.login("Administrator", ADMIN_PW)
    views = [
        ("dashboard", "/", "[data-testid=dash-pool] .pool-row"),
        ("topology", "/topology", "[data-testid=topology-svg][data-ready='1']"),
        ("blocks", "/blocks", "[data-testid=blocks-table][data-complete='1']"),
        ("systems", "/systems", "[data-testid=systems-table]"),
        ("hosts", "/hosts", "[data-testid=hosts-table]"),
        ("drives", "/drives", "#drives-title"),
        ("leases", "/leases", "#leases-title"),
        ("reservations", "/reservations", "#reservations-title"),
        ("compose", "/compose", "#need-0-kind"),
        ("telemetry", "/telemetry", "#telemetry-title"),
        ("events", "/events", "[data-testid=events-table]"),
        ("audit", "/events?tab=audit", "[data-testid=audit-table]"),
        ("transfer", "/transfer", "#import-doc"),
        ("block-details", "/blocks/gpu1", "[data-testid=block-details]"),
        ("system-details", "/systems/" + red, "[data-testid=system-details]"),
    ]
    for name, route, ready in views:
        b.open(route, ready)
        b.shot(name)
        b.axe(name)
    # Telemetry of a system that no agent reports and no provisioning
    # manages: the fabric charts draw, the system's panels say why they
    # are empty.
    b.open("/telemetry?system=" + red, "[data-testid=chart-util] canvas")
    p.wait_for_selector("text=is not under predictive provisioning")
    p.wait_for_selector("text=No usage reported for " + red)
    # Keyboard: every view is reachable from the navigation by Tab alone.
    p.goto(URL + "/ui/#/")
    p.wait_for_selector("[data-testid=dash-pool]")
    reached = set()
    for _ in range(40):
        p.keyboard.press("Tab")
        reached.add(p.evaluate("document.activeElement.getAttribute('href')"))
    for _, route, _ in views[:13]:
        if "#" + route.split("?")[0] not in reached and route != "/events?tab=audit":
            fail(f"keyboard: the link to {route} is not reachable by Tab (reached {sorted(filter(None, reached))})")

    # A refused request shows the service's explanation, per host.
    b.open("/compose", "#need-0-count")
    p.fill("#need-0-count", "40")
    p.click("button:text-is('Preview')")
    p.wait_for_selector("[data-testid=compose-whynot]")
    rows = p.locator("[data-testid=whynot-table] tbody tr").count()
    if rows < 4:
        fail(f"the why-not table has {rows} rows, want one per host (4)")
    txt = p.inner_text("[data-testid=compose-whynot]")
    if "host2" not in txt or "insufficient" not in txt:
        fail(f"why-not says {txt!r}")
    b.shot("compose-whynot")
    # Bad input: the API's own message beside the field; nothing changes.
    before = composed()
    p.fill("#need-0-count", "two")
    p.click("button:text-is('Preview')")
    p.wait_for_selector("#need-0-count-error")
    if "Count" not in p.inner_text("#need-0-count-error"):
        fail("the count field's error does not name the field: " + p.inner_text("#need-0-count-error"))
    b.shot("compose-bad-input")
    # Compose through the form: preview, then apply.
    p.fill("#need-0-count", "1")
    p.fill("#compose-name", "console-one")
    p.click("button:text-is('Preview')")
    p.wait_for_selector("[data-testid=compose-preview]")
    if composed() != before:
        fail("a preview composed something")
    p.click("button:text-is('Apply this')")
    p.wait_for_selector("[data-testid=system-details]")
    after = composed()
    new = sorted(set(after) - set(before))
    if len(new) != 1:
        raise SystemExit(f"apply through the form: systems {before} -> {after}")
    mine = new[0]
    if not p.url.endswith("#/systems/" + mine):
        fail(f"after apply the page is {p.url}, want #/systems/{mine}")

    # Live: a composition made elsewhere appears on the topology and in the
    # event list without a reload.
    b.open("/topology?focus=gpu5", "[data-testid=topology-svg][data-ready='1']")
    other = must("POST", "/redfish/v1/Systems", {"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu5"}]}})["Id"]
    p.wait_for_selector('[data-node="device:gpu5"].attached')
    b.shot("topology-live")
    b.open("/events", "[data-testid=events-table]")
    must("DELETE", "/redfish/v1/Systems/" + other)
    p.wait_for_selector(f'[data-testid=events-table] a[href*="{other}"]')

    # Decompose through the details page, after a confirmation.
    b.open("/systems/" + mine, "[data-testid=system-details]")
    p.click("button:text-is('Decompose')")
    p.wait_for_selector("dialog[open]")
    if mine not in composed():
        fail("the system went before the confirmation")
    b.shot("decompose-confirm")
    p.click(f"dialog button:text-is('Decompose {mine}')")
    wait_until(lambda: mine not in composed(), "the decompose through the console")
    # The page goes back to the list once its DELETE has answered; a
    # navigation of the test's before then would be undone by it.
    p.wait_for_url(re.compile(r"#/systems$"))

    # Export, free everything, preview the import, apply it.
    exported = composed()
    b.open("/transfer", "#import-doc")
    p.click("button:text-is('Export the allocation')")
    expect(p.locator("#import-doc")).to_have_value(re.compile("rackpool-allocation/1"))
    for sid in exported:
        must("DELETE", "/redfish/v1/Systems/" + sid)
    p.click("button:text-is('Preview import')")
    p.wait_for_selector("[data-testid=import-preview]")
    if composed():
        fail("a preview imported something")
    if p.locator("[data-testid=import-preview] tbody tr").count() < len(exported):
        fail("the preview lists fewer changes than systems exported")
    b.shot("import-preview")
    p.click("button:text-is('Apply import')")
    p.wait_for_selector("[data-testid=import-done]")
    if len(composed()) != len(exported):
        fail(f"re-import made {len(composed())} systems, exported {len(exported)}")
    # The import composed red's system again, under a new ID.
    red = holder("hdd5")

    # An expired session returns to the login form and keeps what was typed.
    b.open("/compose", "#compose-name")
    p.fill("#compose-name", "typed-before-expiry")
    loc = p.evaluate("JSON.parse(sessionStorage.getItem('rackpool.session')).location")
    must("DELETE", loc)
    # The next request, or the event stream (whichever notices first),
    # finds the session gone; the page underneath is then inert.
    try:
        p.click("button:text-is('Preview')", timeout=3000)
    except Exception:
        pass
    p.wait_for_selector(".login-overlay #login-password")
    b.shot("session-expired")
    p.fill(".login-overlay #login-password", ADMIN_PW)
    p.click(".login-overlay button[type=submit]")
    p.wait_for_selector(".login-overlay", state="detached")
    if p.input_value("#compose-name") != "typed-before-expiry":
        fail("after logging in again the form lost what was typed: " + p.input_value("#compose-name"))
    b.close()

    # A wrong password is refused on the page, without the browser's own
    # password prompt.
    w = Browser(pw, "wrong")
    w.page.goto(URL + "/ui/")
    w.page.fill("#login-user", "bea")
    w.page.fill("#login-password", "not-her-password")
    w.page.click("form.login button[type=submit]")
    w.page.wait_for_selector("form.login .error")
    if "not right" not in w.page.inner_text("form.login .error"):
        fail("a wrong password says " + w.page.inner_text("form.login .error"))
    w.close()

    # A tenant sees its own systems and the free pool, never another
    # tenant's, whatever its page asks.
    bea = Browser(pw, "bea")
    bea.login("bea", "bea-password-1")
    bea.open("/systems", "[data-testid=systems-table][data-complete='1']")
    if bea.page.locator(f'[data-row="{red}"]').count():
        fail(f"tenant blue sees red's system {red}")
    if (code := bea.fetch("GET", "/redfish/v1/Systems/" + red)) != 404:
        fail(f"blue's page GETs red's system: {code}, want 404")
    if (code := bea.fetch("DELETE", "/redfish/v1/Systems/" + red)) != 404:
        fail(f"blue's page DELETEs red's system: {code}, want 404")
    if red not in composed():
        raise SystemExit("red's system is gone after blue's attempt")
    bea.open("/blocks", "[data-testid=blocks-table][data-complete='1']")
    if bea.page.locator('[data-row="hdd5"]').count():
        fail("tenant blue sees red's block hdd5")
    bea.shot("tenant-blocks")
    bea.close()

    # A read-only account sees no mutating control; the server refuses
    # what its page could still send.
    vic = Browser(pw, "vic")
    vic.login("vic", "vic-password-1")
    if vic.page.locator('nav a[href="#/compose"]').count():
        fail("a read-only account has Compose in its navigation")
    for route, ready in [("/systems/" + red, "[data-testid=system-details]"), ("/reservations", "#reservations-title"),
                         ("/compose", "#compose-title"), ("/transfer", "#transfer-title")]:
        vic.open(route, ready)
        labels = vic.page.eval_on_selector_all("main button", "bs => bs.map(b => b.textContent)")
        for label in labels:
            if re.search(r"\b(Decompose|Release|Apply|Reserve|Import|Export|Preview)\b", label):
                fail(f"a read-only account sees the control {label!r} on {route}")
    vic.shot("read-only")
    body = {"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/gpu6"}]}}
    if (code := vic.fetch("POST", "/redfish/v1/Systems", body)) != 403:
        fail(f"a read-only page composes: {code}, want 403")
    if (code := vic.fetch("DELETE", "/redfish/v1/Systems/" + red)) != 403:
        fail(f"a read-only page decomposes: {code}, want 403")
    vic.close()


def perf(pw, route, ready):
    """Milliseconds from navigation to the view's ready selector, best of 3
    after one warm-up (the bundle cached, as for a returning operator)."""
    b = Browser(pw, "perf")
    b.login("Administrator", ADMIN_PW)
    times = []
    for i in range(4):
        b.page.goto(URL + "/ui/#/")
        b.page.wait_for_selector("nav.sidebar")
        t0 = time.perf_counter()
        b.page.goto(URL + "/ui/#" + route)
        b.page.wait_for_selector(ready, timeout=120000)
        if i:
            times.append((time.perf_counter() - t0) * 1000)
    nodes = b.page.evaluate("document.querySelectorAll('*').length")
    b.shot("perf-" + route.strip("/").replace("/", "-"))
    b.close()
    print(json.dumps({"route": route, "ms": times, "best_ms": min(times), "dom_elements": nodes}))


def main():
    with sync_playwright() as pw:
        if sys.argv[1] == "console":
            console(pw)
        else:
            perf(pw, sys.argv[2], sys.argv[3])
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
