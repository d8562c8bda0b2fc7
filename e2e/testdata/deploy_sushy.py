"""Ironic's deploy flow, driven with sushy against rackpool serve.

Usage: deploy_sushy.py HOST BLOCK [EMULATOR_URL EMULATOR_SYSTEM_PATH]

Reads RACKPOOL_URL, RACKPOOL_USER, RACKPOOL_PASSWORD and RACKPOOL_CA_FILE.
Composes HOST with BLOCK, sets a one-time PXE boot, powers the system on
and waits for PowerState On, powers it off, and decomposes it; then
composes again, powers on, and decomposes the running system, which
rackpool powers off first. With an emulator (sushy-emulator, the host's
BMC), every step is checked against the BMC's own state as well. Prints
one JSON line per step; exits non-zero on the first failure.
"""
import json
import os
import sys
import time
import warnings

import requests
import sushy

EMU_USER, EMU_PASSWORD = "rackpool", "s3cret-Pa55word"
WITHIN = 40  # seconds: the emulator's fake driver lands a change 1-11 s late


def step(name, **kw):
    print(json.dumps(dict(step=name, **kw)), flush=True)


def fail(msg):
    print(json.dumps({"error": msg}), flush=True)
    sys.exit(1)


def wait(what, read, want):
    deadline = time.monotonic() + WITHIN
    while True:
        got = read()
        if got == want:
            return
        if time.monotonic() > deadline:
            fail(f"{what}: {got!r} after {WITHIN}s, want {want!r}")
        time.sleep(0.25)


def main():
    host, block = sys.argv[1:3]
    emu_url = emu_path = None
    if len(sys.argv) > 4:
        emu_url, emu_path = sys.argv[3:5]
    warnings.simplefilter("ignore")
    base = os.environ["RACKPOOL_URL"]
    root = sushy.Sushy(base + "/redfish/v1/", username=os.environ["RACKPOOL_USER"],
                       password=os.environ["RACKPOOL_PASSWORD"],
                       verify=os.environ["RACKPOOL_CA_FILE"])

    def emu():
        r = requests.get(emu_url + emu_path, auth=(EMU_USER, EMU_PASSWORD), timeout=10)
        r.raise_for_status()
        return r.json()

    def compose():
        # Composition is not in sushy: POST the Redfish request through its
        # connection (the same session and certificate checks).
        blocks = "/redfish/v1/CompositionService/ResourceBlocks/"
        r = root._conn.post("/redfish/v1/Systems", data={
            "Name": "deploy-" + host,
            "Links": {"ResourceBlocks": [{"@odata.id": blocks + host}, {"@odata.id": blocks + block}]}})
        if r.status_code != 201:
            fail(f"compose: {r.status_code} {r.text}")
        return root.get_system(r.headers["Location"])

    def power(system):
        system.refresh()
        return system.power_state

    def decompose(system):
        r = root._conn.delete(system.path)
        if r.status_code != 204:
            fail(f"decompose: {r.status_code} {r.text}")
        r = requests.get(base + system.path, auth=(os.environ["RACKPOOL_USER"], os.environ["RACKPOOL_PASSWORD"]),
                         verify=os.environ["RACKPOOL_CA_FILE"], timeout=10)
        if r.status_code != 404:
            fail(f"the decomposed system answers {r.status_code}")

    system = compose()
    if system.power_state != sushy.PowerState.OFF:
        fail(f"a new system is {system.power_state}")
    if emu_url and emu()["PowerState"] != "Off":
        fail(f"the BMC says {emu()['PowerState']} for a new system")
    step("composed", system=system.path, power=system.power_state.value)

    allowed = system.get_allowed_system_boot_source_values()
    if sushy.BootSource.PXE not in allowed:
        fail(f"Pxe is not among the boot sources {allowed}")
    system.set_system_boot_options(target=sushy.BootSource.PXE, enabled=sushy.BootSourceOverrideEnabled.ONCE)
    system.refresh()
    if system.boot.target != sushy.BootSource.PXE:
        fail(f"boot target after PATCH: {system.boot.target}")
    if emu_url and emu()["Boot"]["BootSourceOverrideTarget"] != "Pxe":
        fail(f"the BMC's boot target: {emu()['Boot']}")
    step("boot", target=system.boot.target.value, enabled=system.boot.enabled.value)

    if sushy.ResetType.ON not in system.get_allowed_reset_system_values():
        fail("On is not an allowed reset")
    system.reset_system(sushy.ResetType.ON)
    wait("PowerState after On", lambda: power(system), sushy.PowerState.ON)
    if emu_url and emu()["PowerState"] != "On":
        fail(f"the BMC says {emu()['PowerState']} after On")
    if not emu_url and system.boot.enabled != sushy.BootSourceOverrideEnabled.DISABLED:
        fail(f"a Once override was not used up by the boot: {system.boot.enabled}")
    step("on", power=system.power_state.value, boot=system.boot.enabled.value)

    system.reset_system(sushy.ResetType.FORCE_OFF)
    wait("PowerState after ForceOff", lambda: power(system), sushy.PowerState.OFF)
    if emu_url and emu()["PowerState"] != "Off":
        fail(f"the BMC says {emu()['PowerState']} after ForceOff")
    step("off", power=system.power_state.value)
    decompose(system)
    step("decomposed")

    # A running system is powered off before it is decomposed.
    system = compose()
    system.reset_system(sushy.ResetType.ON)
    wait("PowerState after On", lambda: power(system), sushy.PowerState.ON)
    decompose(system)
    if emu_url and emu()["PowerState"] != "Off":
        fail(f"the BMC says {emu()['PowerState']} after the decompose of a running system")
    hostsys = root.get_system("/redfish/v1/Systems/" + host)
    if hostsys.power_state != sushy.PowerState.OFF:
        fail(f"the host is {hostsys.power_state} after the decompose of its running system")
    step("decomposed-running", host_power=hostsys.power_state.value)
    step("ok")


if __name__ == "__main__":
    main()
