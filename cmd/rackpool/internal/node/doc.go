// Package node holds the rackpool verbs that run on a node, beside the
// control plane rather than against it: the data-plane servers memnode,
// blocknode and cache, the host agent, the pager (page), drive connect,
// which serves a pooled drive on this machine over NBD, and nbd-certs,
// which issues the NBD TLS credentials they use. They reach the control
// plane through client.Flags.
package node
