"""Smoke check that sushy (Ironic's Redfish library) drives sushy-emulator.

Usage: sushy_smoke.py URL USER PASSWORD SYSTEM_PATH

Sets a one-time PXE boot override and powers the system on through sushy,
as Ironic's deploy flow does, then prints what sushy read as one JSON line.
TestSushyLibrary (bmc_test.go) runs it and checks the emulator's own state.
"""
import json
import sys
import warnings

import sushy


def main():
    url, user, password, path = sys.argv[1:5]
    warnings.simplefilter("ignore")  # verify=False warns on every request
    root = sushy.Sushy(url.rstrip("/") + "/redfish/v1/", username=user,
                       password=password, verify=False)
    system = root.get_system(path)
    allowed = system.get_allowed_reset_system_values()
    system.set_system_boot_options(
        target=sushy.BootSource.PXE,
        enabled=sushy.BootSourceOverrideEnabled.ONCE)
    system.reset_system(sushy.ResetType("On"))
    print(json.dumps({
        "identity": system.identity,
        "power_state_before": system.power_state.value
        if system.power_state else None,
        "allowed_reset": sorted(v.value for v in allowed),
    }))


if __name__ == "__main__":
    main()
