package redfish

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strconv"
	"sync"

	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/topology"
)

// The compact topology document (GET /redfish/v1/Oem/Rackpool/Topology
// ?format=compact) is the topology document for a client that draws the
// whole topology, the console: the same hosts, fabrics, switches, drawers,
// devices and zones, with each long list written as arrays of values in a
// fixed order instead of objects, references as positions instead of
// repeated IDs, and what the drawing does not use (cable lengths) left
// out. On the P4 pod (49,152 hosts with 8 ports each, 49,152 devices,
// 32,800 switches) it is about a sixth of the plain document's bytes and
// is parsed without one object per port. docs/redfish.md describes the
// layout:
//
//	{"@odata.id", "Name", "Format": "compact",
//	 "Hosts":   [[ID, Rack, Cores, MemoryGiB, [PortID, fabric#, switch#, Port, ...]], ...],
//	 "Fabrics": [{"ID", "Kind", "ReconfigurationMs", "Rack",
//	             "Switches": [[ID, Ports, LatencyNs], ...],
//	             "Drawers":  [[ID, Mode, Slots, [HostPort, ...]], ...],
//	             "Devices":  [[ID, Kind, Model, switch#, drawer# or -1, Slot, CapacityBytes, Blocks, [Port, ...]], ...]}, ...],
//	 "Zones":   [{"ID", "Hosts", "Devices"}, ...]}
//
// fabric# is a position in Fabrics, switch# and drawer# positions in that
// fabric's Switches and Drawers. A fabric's Rack is the one rack whose
// hosts reach it, null when hosts of several racks (or none) do: the
// console draws such a fabric in a band of its own.
//
// It is written straight into bytes, in one pass (on the pod about 0.1 s,
// where encoding/json's reflection over a million values would take
// several times that), and gzipped (at BestSpeed: the pod's 15 MB become
// 1.8 MB in about 0.1 s), once: a service's topology never changes, so
// the bytes and their ETag are kept for the next request (compactCache).

// compactDoc is a rendered compact document.
type compactDoc struct {
	body, gzipped []byte
	etag          string
}

// compactCache keeps the compact document of the last topology rendered:
// a service serves one.
var compactCache struct {
	sync.Mutex
	top *topology.Topology
	doc compactDoc
}

// cachedCompact returns t's compact document, rendering it only the first
// time.
func cachedCompact(t *topology.Topology) compactDoc {
	c := &compactCache
	c.Lock()
	defer c.Unlock()
	if c.top != t {
		body := compactTopology(t)
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
		_, _ = zw.Write(body)
		_ = zw.Close()
		c.top, c.doc = t, compactDoc{body: body, gzipped: gz.Bytes(), etag: bodyETag(body)}
	}
	return c.doc
}

// compactTopology renders t as the compact topology document.
func compactTopology(t *topology.Topology) []byte {
	w := compactWriter{b: make([]byte, 0, 256+len(t.Hosts)*160+len(t.Devices)*96)}
	w.raw(`{"@odata.id":"/redfish/v1/Oem/Rackpool/Topology","Name":`)
	w.str(t.Name)
	w.raw(`,"Format":"compact","Hosts":[`)
	fabricPos := make(map[*inventory.Fabric]int, len(t.Fabrics))
	for i, f := range t.Fabrics {
		fabricPos[f] = i
	}
	for i, h := range t.Hosts {
		w.sep(i)
		w.raw("\n[")
		w.str(h.ID)
		w.raw(",")
		w.str(h.Rack)
		w.raw(",")
		w.int(int64(h.Cores))
		w.raw(",")
		w.int(int64(h.MemoryGiB))
		w.raw(",[")
		for j, p := range h.Ports {
			w.sep(j)
			w.str(p.ID)
			w.raw(",")
			w.int(int64(fabricPos[p.Fabric]))
			w.raw(",")
			w.int(int64(p.Switch.Index))
			w.raw(",")
			w.str(p.Port)
		}
		w.raw("]]")
	}
	w.raw(`],"Fabrics":[`)
	for i, f := range t.Fabrics {
		w.sep(i)
		w.raw("\n{\"ID\":")
		w.str(f.ID)
		w.raw(`,"Kind":`)
		w.str(string(f.Kind))
		w.raw(`,"ReconfigurationMs":`)
		w.num(float64(f.Reconfig.Microseconds()) / 1000)
		w.raw(`,"Rack":`)
		if rack, ok := fabricRack(f); ok {
			w.str(rack)
		} else {
			w.raw("null")
		}
		w.raw(`,"Switches":[`)
		for j, sw := range f.Switches {
			w.sep(j)
			w.raw("\n[")
			w.str(sw.ID)
			w.raw(",")
			w.int(int64(sw.Ports + len(sw.PortNames)))
			w.raw(",")
			w.num(sw.LatencyNS)
			w.raw("]")
		}
		w.raw(`],"Drawers":[`)
		drawerPos := make(map[*inventory.Drawer]int, len(f.Drawers))
		for j, d := range f.Drawers {
			drawerPos[d] = j
			w.sep(j)
			w.raw("\n[")
			w.str(d.ID)
			w.raw(",")
			w.str(string(d.Mode))
			w.raw(",")
			w.int(int64(d.Slots))
			w.raw(",")
			w.strs(d.HostPorts)
			w.raw("]")
		}
		w.raw(`],"Devices":[`)
		for j, d := range f.Devices {
			w.sep(j)
			w.raw("\n[")
			w.str(d.ID)
			w.raw(",")
			w.str(string(d.Kind))
			w.raw(",")
			w.str(d.Model)
			w.raw(",")
			w.int(int64(d.Switch.Index))
			w.raw(",")
			if pos, ok := drawerPos[d.Drawer]; ok {
				w.int(int64(pos))
			} else {
				w.raw("-1")
			}
			w.raw(",")
			w.int(int64(d.Slot))
			w.raw(",")
			w.int(d.CapacityBytes)
			w.raw(",")
			w.int(int64(len(d.Blocks)))
			w.raw(",")
			w.strs(d.Ports)
			w.raw("]")
		}
		w.raw("]}")
	}
	w.raw(`],"Zones":`)
	zones, _ := json.Marshal(zoneViews(t))
	w.b = append(w.b, zones...)
	w.raw("}\n")
	return w.b
}

// fabricRack is the rack whose hosts alone reach f; ok is false when
// hosts of several racks do, or none.
func fabricRack(f *inventory.Fabric) (rack string, ok bool) {
	for i, p := range f.Ports {
		switch {
		case i == 0:
			rack = p.Host.Rack
		case p.Host.Rack != rack:
			return "", false
		}
	}
	return rack, len(f.Ports) > 0
}

// compactWriter appends JSON to b.
type compactWriter struct{ b []byte }

func (w *compactWriter) raw(s string) { w.b = append(w.b, s...) }

// sep writes the comma before every element but the first.
func (w *compactWriter) sep(i int) {
	if i > 0 {
		w.b = append(w.b, ',')
	}
}

func (w *compactWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

// num writes f as encoding/json does (0 for NaN and the infinities, which
// it cannot encode).
func (w *compactWriter) num(f float64) {
	b, err := odata.AppendFloat(w.b, f)
	if err != nil {
		b = append(w.b, '0')
	}
	w.b = b
}

// str writes s as a JSON string, as encoding/json does.
func (w *compactWriter) str(s string) { w.b = odata.AppendString(w.b, s) }

// strs writes list as a JSON array ([] when nil).
func (w *compactWriter) strs(list []string) {
	if list == nil {
		list = []string{}
	}
	w.b = odata.AppendStrings(w.b, list)
}
