package livetest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

// BenchmarkCrossShardTxn measures what a cross-shard transaction costs
// against a transaction in one group, on 9 processes with 3 paxos shards
// (synod cluster up --nodes 9 --shards 3): closed-loop workers, each with
// its own plain go-redis client at a node of its own and its own keys (so
// no two transactions share a slot), run MULTI INCRBY ... EXEC over keys
// in 1 group (one hash tag), 2 groups and 3 groups, then MGET and MSET of
// keys in 3 groups outside MULTI (a read-only transaction: one round; an
// MSET: answered at the decision), and MGET of the same 3 keys by every
// worker (read-only transactions share their locks), for a fixed time
// each, in one run; "multi-spread" is the 3-group MULTI over 8 key sets per
// worker in turn (a client moving between accounts: its next transaction
// seldom waits for its previous one's commits, which the other cases, on
// the same keys each time, do). It prints transactions/s and latency
// percentiles per case, with the load average. SYNOD_TXN_BENCH_CASES
// (comma-separated, as printed: multi-1, multi-2, multi-3, mget-3, mset-3,
// mget-same-3, multi-spread-3) picks cases.
//
//	SYNOD_TXN_BENCH_SECONDS=5 SYNOD_TXN_BENCH_WORKERS=16 SYNOD_TXN_BENCH_DURABILITY=fsync go test -run '^$' -bench CrossShardTxn -benchtime 1x ./livetest
func BenchmarkCrossShardTxn(b *testing.B) {
	secs := envInt("SYNOD_TXN_BENCH_SECONDS", 5)
	workers := envInt("SYNOD_TXN_BENCH_WORKERS", 16)
	dur := os.Getenv("SYNOD_TXN_BENCH_DURABILITY")
	if dur == "" {
		dur = "fsync"
	}
	for i := 0; i < b.N; i++ {
		benchCrossShardTxn(b, time.Duration(secs)*time.Second, workers, dur)
	}
}

func benchCrossShardTxn(b *testing.B, d time.Duration, workers int, durability string) {
	c := upCluster(b, cluster.UpOptions{Nodes: 9, Shards: 3, Protocol: "paxos", Service: "kv", Durability: durability})
	addrs := c.ClientAddrs()
	slots := config.SlotMap(c.Config.Namespaces[0])
	ctx := context.Background()
	// keys[w][g]: worker w's key in group g (two workers' keys share a
	// slot with odds 1/16,384 per pair: then they may conflict); spread[w]
	// its 8 key sets of multi-spread.
	const spreadSets = 8
	keys := make([][3]string, workers)
	spread := make([][spreadSets][3]string, workers)
	for w := 0; w < workers; w++ {
		for j := 0; j <= spreadSets; j++ {
			set := &keys[w]
			if j > 0 {
				set = &spread[w][j-1]
			}
			for i := 0; set[0] == "" || set[1] == "" || set[2] == ""; i++ {
				k := fmt.Sprintf("w%d:s%d:k%d", w, j, i)
				if j == 0 {
					k = fmt.Sprintf("w%d:k%d", w, i)
				}
				if g := slots.Group(k); set[g] == "" {
					set[g] = k
				}
			}
		}
	}
	only := map[string]bool{}
	for _, c := range strings.Split(os.Getenv("SYNOD_TXN_BENCH_CASES"), ",") {
		if c != "" {
			only[c] = true
		}
	}
	fmt.Printf("cross-shard transactions: 9 processes, 3 paxos shards, %s, %d workers, %v per case; /proc/loadavg %s\n", durability, workers, d, loadavg())
	for _, cs := range []struct {
		kind   string
		groups int
	}{{"multi", 1}, {"multi", 2}, {"multi", 3}, {"mget", 3}, {"mset", 3}, {"mget-same", 3}, {"multi-spread", 3}} {
		if len(only) > 0 && !only[fmt.Sprintf("%s-%d", cs.kind, cs.groups)] {
			continue
		}
		groups := cs.groups
		var mu sync.Mutex
		var lat []time.Duration
		errs := 0
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := redis.NewClient(&redis.Options{Addr: addrs[w%len(addrs)], ReadTimeout: 10 * time.Second})
				defer cl.Close()
				var ks []string
				if groups == 1 {
					ks = []string{fmt.Sprintf("{w%d}a", w), fmt.Sprintf("{w%d}b", w)}
				} else {
					ks = keys[w][:groups]
				}
				if cs.kind == "mget-same" {
					ks = keys[0][:groups] // every worker the same keys: read locks shared
				}
				var mine []time.Duration
				bad := 0
				for n := 0; time.Now().Before(end); n++ {
					if cs.kind == "multi-spread" {
						ks = spread[w][n%spreadSets][:groups]
					}
					t0 := time.Now()
					var err error
					switch cs.kind {
					case "mget", "mget-same":
						err = cl.MGet(ctx, ks...).Err()
					case "mset":
						kv := make([]any, 0, 2*len(ks))
						for _, k := range ks {
							kv = append(kv, k, "1")
						}
						err = cl.MSet(ctx, kv...).Err()
					default:
						_, err = cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
							for _, k := range ks {
								p.IncrBy(ctx, k, 1)
							}
							return nil
						})
					}
					if err != nil {
						bad++
						continue
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				errs += bad
				mu.Unlock()
			}()
		}
		wg.Wait()
		slices.Sort(lat)
		q := func(f float64) time.Duration {
			if len(lat) == 0 {
				return 0
			}
			return lat[min(len(lat)-1, int(f*float64(len(lat))))].Round(10 * time.Microsecond)
		}
		fmt.Printf("  %s, %d group(s), %d keys: %.0f transactions/s, p50 %v, p99 %v, %d errors; /proc/loadavg %s\n",
			cs.kind, groups, max(groups, 2), float64(len(lat))/d.Seconds(), q(0.5), q(0.99), errs, loadavg())
	}
}
