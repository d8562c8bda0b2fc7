"""Helpers for scripts/conformance.sh (run with the .venv-rf Python).

    conformance.py freeport
    conformance.py wait     URL SECONDS
    conformance.py compose  BASE USER PASSWORD BODY_JSON
    conformance.py schemas  BASE DMTF_CSDL_DIR OUT_DIR
    conformance.py summary  VALIDATOR REPORT_DIR EXIT_CODE STDOUT_FILE

`summary` prints one line "VALIDATOR PASS=n WARN=n FAIL=n NOT_TESTED=n
ERRORS=n", writes every FAIL, WARN and error (grouped, with counts) to
REPORT_DIR/findings.txt, and exits 1 when FAIL or ERRORS is non-zero.

How results are counted, per validator (exit codes alone are not enough:
the service and interop validators exit 0 with nothing validated when, for
example, no schema matches, and every validator exits 1 both for "some
assertion failed" and for "crashed before writing a report"):

- service (rf_service_validator 3.x), interop (rf_interop_validator 3.x):
  the Excel report's Summary sheet (Pass, Warning, Fail, Not Tested) is the
  count; the Results sheet (one row per property check, column Result) and,
  for interop, the Resources sheet (resource-level requirements) list the
  findings. Errors: no report, a Python traceback on stdout, no PASS at
  all, a Summary that disagrees with the rows, or WARN rows "Schema Error:
  Unable to locate the schema definition" (an @odata.type naming a schema
  or version the CSDL does not have, which the validator only warns about).
- protocol (rf_protocol_validator 1.x): results.json's
  TestResults."Protocol Validations" {pass, fail, warn, skip} is the count;
  the TSV report (column Result) lists the findings. Errors: no
  results.json, a traceback, counts that disagree with the TSV.
"""

import collections
import glob
import html
import json
import os
import re
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

# The service's own CA (DATA/tls/ca.pem), which conformance.sh exports:
# certificates are verified, host names included, as any client would.
def ctx():
    return ssl.create_default_context(cafile=os.environ.get("REQUESTS_CA_BUNDLE"))


def freeport():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


def wait(url, seconds):
    deadline = time.time() + float(seconds)
    last = None
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx()) as r:
                if r.status == 200:
                    return 0
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.2)
    print("service did not answer %s within %ss: %s" % (url, seconds, last), file=sys.stderr)
    return 1


def _request(method, url, user, password, body=None):
    import base64

    req = urllib.request.Request(url, method=method, data=None if body is None else body.encode())
    req.add_header("Authorization", "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode())
    req.add_header("OData-Version", "4.0")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60, context=ctx()) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def compose(base, user, password, body):
    """POST the body to the Systems collection; follow a task monitor (202)."""
    status, headers, text = _request("POST", base + "/redfish/v1/Systems", user, password, body)
    deadline = time.time() + 120
    while status == 202 and time.time() < deadline:
        monitor = headers.get("Location")
        if not monitor:
            break
        time.sleep(0.2)
        status, headers, text = _request("GET", base + monitor if monitor.startswith("/") else monitor, user, password)
    if status not in (200, 201):
        print("compose failed: HTTP %s\n%s" % (status, text), file=sys.stderr)
        return 1
    try:
        sid = json.loads(text).get("@odata.id") or headers.get("Location")
    except ValueError:
        sid = headers.get("Location")
    print("composed %s" % sid)
    return 0


def schemas(base, dmtf_dir, out_dir):
    """A schema directory for the service validator: the DMTF CSDL (linked)
    plus every schema $metadata references on the service itself (the OEM
    schema), fetched from the service as a client would."""
    os.makedirs(out_dir, exist_ok=True)
    n = 0
    for f in sorted(os.listdir(dmtf_dir)):
        if f.endswith(".xml"):
            dst = os.path.join(out_dir, f)
            if not os.path.lexists(dst):
                os.symlink(os.path.abspath(os.path.join(dmtf_dir, f)), dst)
            n += 1
    if n == 0:
        print("no CSDL files in %s" % dmtf_dir, file=sys.stderr)
        return 1
    with urllib.request.urlopen(base + "/redfish/v1/$metadata", timeout=10, context=ctx()) as r:
        meta = ET.fromstring(r.read())
    ns = {"edmx": "http://docs.oasis-open.org/odata/ns/edmx"}
    for ref in meta.findall("edmx:Reference", ns):
        uri = ref.get("Uri", "")
        if uri.startswith("/"):
            name = uri.rsplit("/", 1)[-1]
            with urllib.request.urlopen(base + uri, timeout=10, context=ctx()) as r:
                data = r.read()
            ET.fromstring(data)  # must be well-formed CSDL
            dst = os.path.join(out_dir, name)
            if os.path.lexists(dst):
                os.remove(dst)
            with open(dst, "wb") as fh:
                fh.write(data)
            print("OEM schema %s (from the service)" % uri)
    return 0


def _newest(pattern):
    files = sorted(glob.glob(pattern, recursive=True), key=os.path.getmtime)
    return files[-1] if files else None


def _squash(uri):
    # Group findings of many like resources: /Ports/12 -> /Ports/N.
    return re.sub(r"(?<=/)(?!v1(?:/|$))[^/]*\d[^/]*", lambda m: re.sub(r"\d+", "N", m.group(0)), uri or "")


def _xlsx(report_dir, errors, findings, interop):
    import openpyxl

    path = _newest(os.path.join(report_dir, "**", "*.xlsx"))
    if path is None:
        errors.append("no Excel report under %s" % report_dir)
        return None
    wb = openpyxl.load_workbook(path, read_only=True)
    summary = {}
    for row in wb["Summary"].iter_rows(values_only=True):
        if row and row[0] in ("Pass", "Warning", "Fail", "Not Tested"):
            summary[row[0]] = int(row[1] or 0)
    counts = {"PASS": summary.get("Pass", 0), "WARN": summary.get("Warning", 0),
              "FAIL": summary.get("Fail", 0), "NOT_TESTED": summary.get("Not Tested", 0)}
    rows = collections.Counter()
    head = None
    for row in wb["Results"].iter_rows(values_only=True):
        if head is None:
            head = {h: i for i, h in enumerate(row)}
            continue
        res = row[head["Result"]]
        rows[res] += 1
        if res in ("FAIL", "WARN"):
            msg = str(row[head["Message"]] or "")
            msg = re.sub(r"; Profile: .*$", "", msg)
            findings[(res, _squash(row[head["URI"]]), row[head["Property"]], msg)] += 1
            if res == "WARN" and msg.startswith("Schema Error: Unable to locate the schema definition"):
                errors.append("unknown schema or version: %s %s: %s" % (row[head["URI"]], row[head["Property"]], msg))
    if interop and "Resources" in wb.sheetnames:
        head = None
        for row in wb["Resources"].iter_rows(values_only=True):
            if head is None:
                head = {h: i for i, h in enumerate(row)}
                continue
            res = row[head["Result"]]
            rows[res] += 1
            if res in ("FAIL", "WARN"):
                findings[(res, "(resource) " + str(row[head["Resource Type"]]), "-", str(row[head["Message"]]))] += 1
    for res, key in (("FAIL", "FAIL"), ("WARN", "WARN"), ("PASS", "PASS")):
        if rows[res] > counts[key]:
            errors.append("report disagrees with itself: %d %s rows, Summary says %d" % (rows[res], res, counts[key]))
            counts[key] = rows[res]
    return counts


def _protocol(report_dir, errors, findings):
    path = os.path.join(report_dir, "results.json")
    if not os.path.exists(path):
        errors.append("no results.json under %s" % report_dir)
        return None
    with open(path) as fh:
        res = json.load(fh)["TestResults"]["Protocol Validations"]
    counts = {"PASS": res.get("pass", 0), "WARN": res.get("warn", 0), "FAIL": res.get("fail", 0),
              "NOT_TESTED": res.get("skip", 0)}
    tsv = _newest(os.path.join(report_dir, "*.tsv"))
    if tsv is None:
        errors.append("no TSV report under %s" % report_dir)
        return counts
    rows = collections.Counter()
    with open(tsv) as fh:
        head = None
        for line in fh:
            cols = line.rstrip("\n").split("\t")
            if head is None:
                head = {h: i for i, h in enumerate(cols)}
                continue
            if len(cols) < len(head):
                continue
            r = cols[head["Result"]]
            rows[r] += 1
            if r in ("FAIL", "WARN"):
                findings[(r, "%s %s %s" % (cols[head["Assertion"]], cols[head["Method"]], cols[head["URI"]]),
                          cols[head["Status code"]], cols[head["Message"]])] += 1
    if rows["FAIL"] != counts["FAIL"] or rows["WARN"] != counts["WARN"]:
        errors.append("results.json and the TSV disagree: %s vs %s" % (counts, dict(rows)))
        counts["FAIL"] = max(counts["FAIL"], rows["FAIL"])
    return counts


# Use Case Checkers results that are not a finding against the service: the
# checker skips these because of a documented design choice (docs/redfish.md,
# "DMTF tools"), not because something is missing.
USECASE_NOT_TESTED_BY_DESIGN = (
    "already enabled by the service",  # accounts are created enabled unless Enabled: false
    "does not require a password change",  # no PasswordChangeRequired: the administrator sets the password
)


def _usecases(report_dir, errors, findings, stdout):
    """Counts the results of DMTF's Use Case Checkers from their HTML report
    (one row per operation: operation, result, message) and checks them
    against the summary table they print. A SKIP is NOT_TESTED; one that is
    not a documented design choice is an error."""
    path = _newest(os.path.join(report_dir, "*", "RedfishUseCaseCheckersReport_*.html"))
    if path is None:
        errors.append("no Use Case Checkers report in %s" % report_dir)
        return None
    text = open(path, errors="replace").read()
    counts = {"PASS": 0, "WARN": 0, "FAIL": 0, "NOT_TESTED": 0}
    for row in re.findall(r"<tr>(.*?)</tr>", text, re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if len(cells) != 3:
            continue
        op, res, msg = cells
        res = {"SKIP": "NOT_TESTED", "FAILWARN": "FAIL"}.get(res, res)
        if res not in counts:
            continue
        counts[res] += 1
        if res != "PASS":
            findings[(res, op, "", msg)] += 1
        if res == "NOT_TESTED" and not any(k in msg for k in USECASE_NOT_TESTED_BY_DESIGN):
            errors.append("not tested: %s (%s)" % (op, msg))
    m = re.search(r"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", stdout)
    if not m:
        errors.append("no summary table in the checkers' output")
    elif [int(x) for x in m.groups()] != [counts["PASS"], counts["WARN"], counts["FAIL"], counts["NOT_TESTED"]]:
        errors.append("the report (%s) and the printed summary (%s) disagree" % (counts, m.groups()))
    return counts


def summary(validator, report_dir, code, stdout_file):
    errors, findings = [], collections.Counter()
    out = open(stdout_file, errors="replace").read() if os.path.exists(stdout_file) else ""
    if "Traceback (most recent call last)" in out:
        errors.append("the validator crashed (traceback in %s)" % stdout_file)
    if validator == "protocol":
        counts = _protocol(report_dir, errors, findings)
    elif validator == "usecases":
        counts = _usecases(report_dir, errors, findings, out)
    else:
        counts = _xlsx(report_dir, errors, findings, validator == "interop")
    if counts is None:
        counts = {"PASS": 0, "WARN": 0, "FAIL": 0, "NOT_TESTED": 0}
    if validator == "usecases" and counts["WARN"]:
        errors.append("%d WARN: the checkers warn where a service falls short of a use case" % counts["WARN"])
    elif counts["PASS"] == 0:
        errors.append("nothing passed: the validator did not validate anything")
    code = int(code)
    if code != 0 and counts["FAIL"] == 0 and not errors:
        errors.append("exit status %d with no FAIL in the report" % code)
    if code == 0 and counts["FAIL"] > 0:
        errors.append("exit status 0 although the report has %d FAIL" % counts["FAIL"])
    with open(os.path.join(report_dir, "findings.txt"), "w") as fh:
        for e in errors:
            fh.write("ERROR  %s\n" % e)
        for (res, where, prop, msg), n in sorted(findings.items(), key=lambda kv: (kv[0][0] != "FAIL", kv[0])):
            fh.write("%-5s x%-4d %s  %s  %s\n" % (res, n, where, prop, msg))
    print("%-9s PASS=%-6d WARN=%-5d FAIL=%-4d NOT_TESTED=%-6d ERRORS=%d" % (
        validator, counts["PASS"], counts["WARN"], counts["FAIL"], counts["NOT_TESTED"], len(errors)))
    return 1 if counts["FAIL"] or errors else 0


def main(argv):
    cmd, args = argv[1], argv[2:]
    fn = {"freeport": freeport, "wait": wait, "compose": compose, "schemas": schemas, "summary": summary}[cmd]
    return fn(*args) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
