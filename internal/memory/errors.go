package memory

import "errors"

// Token and authentication errors.
var (
	// ErrBadToken means a token failed to parse or to verify: wrong key,
	// tampered payload or MAC, unknown version, garbage.
	ErrBadToken = errors.New("memory: bad token")
	// ErrExpired means the token's expiry is at or before the server's
	// current time.
	ErrExpired = errors.New("memory: token expired")
	// ErrRevoked means the token's lease was revoked on this node
	// ([Server.Revoke], or ZERO).
	ErrRevoked = errors.New("memory: lease revoked")
	// ErrWrongNode means the token names another memnode, or a region that
	// does not fit in this node's capacity.
	ErrWrongNode = errors.New("memory: token is for another node")
	// ErrNoAuth means a request other than AUTH or PING arrived on a
	// connection that has not presented a valid token.
	ErrNoAuth = errors.New("memory: connection not authenticated")
)

// Access errors: the token is valid but the request is not allowed.
var (
	// ErrRights means the token lacks the rights the operation needs.
	ErrRights = errors.New("memory: token lacks the rights for this operation")
	// ErrRange means the access falls outside the leased region.
	ErrRange = errors.New("memory: access outside the leased region")
	// ErrNoSpace means an APPEND does not fit between the append head and
	// the end of the region.
	ErrNoSpace = errors.New("memory: append does not fit in the region")
	// ErrTooLarge means a request or its response would exceed the node's
	// frame limit.
	ErrTooLarge = errors.New("memory: request exceeds the frame limit")
)

// Connection and protocol errors.
var (
	// ErrClosed means the client or server was closed or the connection was
	// lost; every call pending on or made after a lost connection fails with
	// an error wrapping it. Dial again to go on.
	ErrClosed = errors.New("memory: closed")
	// ErrProtocol means a peer sent a frame that breaks the protocol.
	ErrProtocol = errors.New("memory: protocol error")
	// ErrNodeRestarted means the server's epoch differs from the one seen at
	// Dial: the node restarted and the region's contents are gone.
	ErrNodeRestarted = errors.New("memory: node restarted")
)
