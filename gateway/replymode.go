package gateway

import "strings"

// CLIENT REPLY ON|OFF|SKIP, as Redis: OFF silences the replies of the
// commands that follow, SKIP the reply of the next command only; pub/sub
// pushes (subscription confirmations, messages) are still written, since
// they do not go through the reply writer (pushFrame writes to the output
// buffer directly). CLIENT REPLY OFF and SKIP have no reply; ON answers OK.
// While replies are silenced the connection runs one command at a time
// (no pipelined batches), so each command's reply is dropped whole.

type replyMode uint8

const (
	replyOn replyMode = iota
	replyOff
	replySkip
)

// replySink sits between the reply writer and the output buffer.
type replySink struct {
	out   *outBuf
	muted bool // under conn.wmu
}

func (s *replySink) Write(p []byte) (int, error) {
	if s.muted {
		return len(p), nil
	}
	return s.out.Write(p)
}

// muteReply silences the coming command's reply if CLIENT REPLY says so.
// Connection goroutine, under wmu.
func (c *conn) muteReply() (mute, skipping bool) {
	if c.reply == replyOn {
		return false, false
	}
	c.w.Flush() // the replies before are not silenced
	c.sink.muted = true
	return true, c.reply == replySkip
}

// unmuteReply ends what muteReply began: a SKIP is used up.
func (c *conn) unmuteReply(mute, skipping bool) {
	if mute || c.sink.muted { // CLIENT REPLY OFF|SKIP mutes its own reply
		c.w.Flush()
		c.sink.muted = false
	}
	if skipping && c.reply == replySkip {
		c.reply = replyOn
	}
}

func cmdClientReply(c *conn, args [][]byte) {
	if len(args) != 3 {
		c.writeError(arityErr("client|reply"))
		return
	}
	switch strings.ToLower(string(args[2])) {
	case "on":
		c.reply = replyOn
		c.w.Flush()
		c.sink.muted = false
		c.w.WriteSimple("OK")
	case "off":
		c.reply = replyOff
		c.w.Flush()
		c.sink.muted = true // this command's own reply is none
	case "skip":
		if c.reply == replyOn {
			c.reply = replySkip
		}
		c.w.Flush()
		c.sink.muted = true
	default:
		c.writeError("ERR syntax error")
	}
}
