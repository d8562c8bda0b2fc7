// Package examples embeds the example topology files so the binary carries
// its default rack.
package examples

import _ "embed"

// Rack is rack.yaml, the built-in default topology.
//
//go:embed rack.yaml
var Rack []byte

// MONetPod is monet-pod.yaml, MONet's 2-tier parallel optical pod (P4).
//
//go:embed monet-pod.yaml
var MONetPod []byte

// CXLRack is cxl-rack.yaml: CXL memory devices (logical devices and
// dynamic capacity) behind two CXL switches, beside an optical memory card.
//
//go:embed cxl-rack.yaml
var CXLRack []byte
