//go:build !unix

package gateway

// peeker: nothing to peek with on this platform.
type peeker struct{}

func newPeeker() *peeker { return &peeker{} }

// peekOrdered: no peek on this platform (the step waits only for commands
// a connection's goroutine has read).
func (o *conn) peekOrdered(*peeker) bool { return false }
