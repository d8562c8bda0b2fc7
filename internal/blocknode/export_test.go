package blocknode

// SetWriteHooks sets the write-reservation test hooks (reserve.go) until
// the returned function restores them. Call it before a server starts
// and restore it after the server is closed.
func SetWriteHooks(window, raiseWaits func()) (restore func()) {
	testHookWriteWindow, testHookRaiseWaits = window, raiseWaits
	return func() { testHookWriteWindow, testHookRaiseWaits = nil, nil }
}
