"""Compose and decompose through rackpool with the DMTF redfish library.

Usage: redfish_client.py URL USER PASSWORD. Prints OK when every step
behaved; exits non-zero with the reason otherwise.
"""
import sys

import redfish


def main():
    url, user, password = sys.argv[1:4]
    client = redfish.redfish_client(base_url=url, username=user, password=password)
    client.login(auth="session")
    try:
        root = client.get("/redfish/v1")
        assert root.status == 200, root.text
        comp = client.get(root.dict["CompositionService"]["@odata.id"])
        assert comp.dict["ServiceEnabled"], comp.text
        blocks = client.get(comp.dict["ResourceBlocks"]["@odata.id"])
        ids = [m["@odata.id"] for m in blocks.dict["Members"]]
        want = ["/redfish/v1/CompositionService/ResourceBlocks/" + b for b in ("host2", "gpu5", "ssd1")]
        for w in want:
            assert w in ids, w + " not in ResourceBlocks"

        # Specific composition.
        resp = client.post("/redfish/v1/Systems", body={
            "Name": "py-specific",
            "Links": {"ResourceBlocks": [{"@odata.id": w} for w in want]},
        })
        assert resp.status == 201, resp.text
        location = resp.getheader("Location")
        system = client.get(location)
        assert system.dict["SystemType"] == "Composed", system.text
        got = sorted(l["@odata.id"] for l in system.dict["Links"]["ResourceBlocks"])
        assert got == sorted(want), got
        gpu = client.get(want[1])
        assert gpu.dict["CompositionStatus"]["CompositionState"] == "Composed", gpu.text

        # Constrained composition in the DMTF shape.
        resp = client.post("/redfish/v1/Systems", body={
            "Name": "py-constrained",
            "Processors": {"Members": [{"@Redfish.RequestedCount": 1, "ProcessorType": "GPU"}]},
            "Storage": {"Members": [{"@Redfish.RequestedCount": 2, "MediaType": "HDD"}]},
        })
        assert resp.status == 201, resp.text
        second = resp.getheader("Location")

        # The same block twice is refused with a Redfish error.
        resp = client.post("/redfish/v1/Systems", body={
            "Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/CompositionService/ResourceBlocks/host4"},
                                         {"@odata.id": want[2]}]},
        })
        assert resp.status == 409, resp.text
        assert "error" in resp.dict, resp.text

        # Compose action: preview, then decompose both with one manifest.
        resp = client.post("/redfish/v1/CompositionService/Actions/CompositionService.Compose", body={
            "RequestFormat": "Manifest", "RequestType": "Apply",
            "Manifest": {"Stanzas": [
                {"StanzaType": "DecomposeSystem", "StanzaId": "a", "Request": {"@odata.id": location}},
                {"StanzaType": "DecomposeSystem", "StanzaId": "b", "Request": {"@odata.id": second}},
            ]},
        })
        assert resp.status == 200, resp.text
        for loc in (location, second):
            assert client.get(loc).status == 404, loc + " still exists"
        gpu = client.get(want[1])
        assert gpu.dict["CompositionStatus"]["CompositionState"] == "Unused", gpu.text
    finally:
        client.logout()
    print("OK")


if __name__ == "__main__":
    main()
