package gateway

import (
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/unreplicated"
)

// SYNOD OP runs any operation of the namespace's service, keyless ones
// included (the spreadsheet's refresh, the ESDS thesis §4.4), inside MULTI too.
func TestSynodOpKeyless(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, unreplicated.Name, "spreadsheet")
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("SYNOD OP set Budget!A1 Rent", "OK"),
		cmd("SYNOD OP set Budget!B1 1200", "OK"),
		cmd("SYNOD OP get Budget!B1", `"1200"`),
		cmd("SYNOD OP refresh", `"Budget!A1=Rent\nBudget!B1=1200\n"`),
		cmd("SYNOD OP", "(error) ERR wrong number of arguments for 'synod|op' command"),
		cmd("MULTI", "OK"),
		cmd("SYNOD OP set Budget!A2 Food", "QUEUED"),
		cmd("SYNOD OP refresh", "QUEUED"),
		cmd("EXEC", "1) OK\n2) \"Budget!A1=Rent\\nBudget!A2=Food\\nBudget!B1=1200\\n\""),
	})
}
