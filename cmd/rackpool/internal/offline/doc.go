// Package offline holds the rackpool verbs that run without a control
// plane: sim (a datacenter in virtual time on the placement engine, and
// its storage model), provision record, gen and eval (demand traces and
// the offline evaluation of provisioning policies), and discover (a
// topology read from live Redfish services).
package offline
