// Package bmc is the southbound Redfish client for a host's baseboard
// management controller: it reads and changes the power and the boot
// override of one ComputerSystem, so that rackpool's #ComputerSystem.Reset
// and Boot on a composed system reach the real host, and the BMC's answers
// come back (docs/southbound.md, "Host BMCs").
//
// # What it does
//
// New resolves the system (a path, an Id, or the only member of
// /redfish/v1/Systems), reads it and checks it is a ComputerSystem with a
// #ComputerSystem.Reset action; the action's target and its allowable
// ResetType values (inline or from its @Redfish.ActionInfo) are kept.
// State reads the system afresh. Reset POSTs the action's target; SetBoot
// reads the system for its ETag and PATCHes only the Boot properties it was
// given, with If-Match when the BMC gave an ETag (a 412 reads it again and
// retries, twice at most: the PATCH sets absolute values, so repeating it
// is harmless). Reset is never retried: a second ForceRestart is a second
// restart.
//
// # Errors
//
// An answer of the BMC's that refuses a request (4xx, 5xx) is an *Error
// with its status and the first @Message.ExtendedInfo MessageId and
// Message. A value the BMC itself lists as not allowed (ResetType,
// BootSourceOverrideTarget, ...) is refused before it is sent, as an *Error
// with Status 400, a Base MessageId and Local set. A 401 or 403 unwraps to
// ErrAuth. A request that failed on the way (connection refused or reset,
// the request timeout, an untrusted certificate) is a *TransportError. A
// malformed answer is a plain error naming the URL. Errors name the BMC's
// URL and the account, never the password.
//
// # Transport
//
// Every request carries HTTP Basic authentication, runs under
// Options.Timeout and reads at most 4 MiB of answer. Redirects are followed
// only within the BMC (same scheme, host and port). Plain http with
// credentials is refused unless the BMC is on the loopback interface, as
// the fabric drivers do.
package bmc
