package fmserver

import (
	"net/http"
	"slices"
	"testing"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

// TestEpochHeader: the emulator remembers the highest Rackpool-Epoch it
// has seen and refuses a change with a lower one (409 StaleEpoch, nothing
// changed); a malformed header is refused with 400 HeaderInvalid.
func TestEpochHeader(t *testing.T) {
	f := newFM(t, rackTopology(t), "falcon1", Options{})
	zones := "/redfish/v1/Fabrics/falcon1/Zones"
	f.must(f.settle(f.raw("POST", zones, endpoints("falcon1", "host1-pcie", "gpu1"), map[string]string{fabric.EpochHeader: "5"})),
		http.StatusCreated, "POST with epoch 5")
	before := f.discover()
	res := f.settle(f.raw("POST", zones, endpoints("falcon1", "host2-pcie", "gpu2"), map[string]string{fabric.EpochHeader: "4"}))
	f.must(res, http.StatusConflict, "POST with epoch 4 after 5")
	if !slices.Contains(messageIDs(res), rf.MsgFenced) {
		t.Errorf("stale epoch answered %v, want %s", messageIDs(res), rf.MsgFenced)
	}
	f.unchanged(before, "a stale epoch's POST")
	for _, v := range []string{"abc", "0", "-3"} {
		res := f.raw("POST", zones, endpoints("falcon1", "host2-pcie", "gpu2"), map[string]string{fabric.EpochHeader: v})
		f.must(res, http.StatusBadRequest, "epoch "+v)
		if !slices.Contains(messageIDs(res), "Base.1.22.HeaderInvalid") {
			t.Errorf("epoch %q answered %v, want HeaderInvalid", v, messageIDs(res))
		}
	}
	f.unchanged(before, "malformed epochs")
	f.must(f.settle(f.raw("POST", zones, endpoints("falcon1", "host2-pcie", "gpu2"), map[string]string{fabric.EpochHeader: "5"})),
		http.StatusCreated, "POST with the current epoch")
}
