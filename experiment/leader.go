package experiment

import (
	"context"
	"fmt"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
)

// WaitLeader asks c's nodes (SYNOD LEADER) for the default namespace's
// leader until one is named, for at most within; it fails when none is
// (an election that does not end, or a protocol without a leader).
func WaitLeader(ctx context.Context, c *cluster.Cluster, within time.Duration) (string, error) {
	cl, err := client.New(c.ClientAddrs(), client.Options{Timeout: 5 * time.Second})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	for deadline := time.Now().Add(within); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		if id, _, err := cl.Leader(ctx); err == nil && id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("no leader reported within %v", within)
}
