//go:build !unix

package gateway

// peekOrdered: no peek on this platform (the step waits only for commands
// a connection's goroutine has read).
func (o *conn) peekOrdered() bool { return false }
