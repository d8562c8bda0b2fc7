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
