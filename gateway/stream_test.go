package gateway

import (
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// The stream commands through the gateway: arguments, node limits, group
// commands and reply shapes (RESP2).
func TestStreamCommands(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("XGROUP CREATE s g $", "(error) ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."),
		cmd("XGROUP CREATE s g $ MKSTREAM", "OK"),
		cmd("XADD s 1-0 f 1", `"1-0"`),
		cmd("XADD s 2-0 f 2", `"2-0"`),
		cmd("XREADGROUP GROUP g alice COUNT 1 STREAMS s >", `1) 1) "s"`+"\n"+`   2) 1) 1) "1-0"`+"\n"+`         2) 1) "f"`+"\n"+`            2) "1"`),
	})
}
