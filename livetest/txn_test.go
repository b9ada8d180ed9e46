package livetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// TestCrossShardTxnKillParticipantLeader runs 9 processes with 3 paxos
// shards (fsync) and plain go-redis clients at nodes outside shard s1,
// which coordinate cross-shard MULTI/EXEC transfers between 6 accounts (2
// per shard), whole-bank MULTI/EXEC reads and SMOVE of one member between
// two sets in different shards (shard/txn), while s1's
// leader, a participant of most transactions, is killed -9. The history
// (every EXEC, its call and return times, its replies; an error reply is
// an unknown outcome) is judged by check.StrictSerializable, the final
// total must be the initial one, and transfers must commit after the kill.
func TestCrossShardTxnKillParticipantLeader(t *testing.T) {
	c := upCluster(t, cluster.UpOptions{Nodes: 9, Shards: 3, Protocol: "paxos", Service: "kv", Durability: "fsync"})
	addrs := c.ClientAddrs()
	ns := c.Config.Namespaces[0]
	slots := config.SlotMap(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var accts []string
	per := map[int]int{}
	for i := 0; len(accts) < 6; i++ {
		k := fmt.Sprintf("acct%d", i)
		if g := slots.Group(k); per[g] < 2 {
			per[g]++
			accts = append(accts, k)
		}
	}
	client := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second, MaxRetries: -1})
	}
	// Two sets in different shards between which one member moves (SMOVE
	// across shards: a computed transaction).
	var bags []string
	for i := 0; len(bags) < 2; i++ {
		k := fmt.Sprintf("bag%d", i)
		if len(bags) == 0 || slots.Group(k) != slots.Group(bags[0]) {
			bags = append(bags, k)
		}
	}
	setup := client(addrs[0])
	defer setup.Close()
	for _, k := range accts {
		if err := setup.Set(ctx, k, 100, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := setup.SAdd(ctx, bags[0], "m").Err(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	var mu sync.Mutex
	h := &history.History{Meta: map[string]string{"test": t.Name()}}
	init := history.Op{Kind: history.MultiKind, Call: -2, Return: -1, Outcome: history.OK, Result: history.FromResult(service.OK())}
	for _, k := range accts {
		init.Txn = append(init.Txn, history.Op{Kind: "set", Key: k, Args: []string{"100"}, Outcome: history.OK, Result: history.FromResult(service.OK())})
	}
	init.Txn = append(init.Txn, history.Op{Kind: "sadd", Key: bags[0], Args: []string{"m"}, Outcome: history.OK, Result: history.FromResult(service.Int(1))})
	h.Ops = append(h.Ops, init)
	killAt := 2 * time.Second
	var killed time.Time
	afterKill := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	at := []string{addrs[0], addrs[1], addrs[6], addrs[7]} // not s1's nodes (n4-n6)
	smoves := 0
	wg.Add(1)
	go func() { // SMOVE back and forth across shards
		defer wg.Done()
		cl := client(addrs[7])
		defer cl.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			from, to := bags[i%2], bags[(i+1)%2]
			e := history.Op{Process: 50, Kind: "smove", Key: from, Args: []string{to, "m"}, Call: int64(time.Since(begin))}
			moved, err := cl.SMove(ctx, from, to, "m").Result()
			e.Return = int64(time.Since(begin))
			if err != nil {
				e.Outcome = history.Unknown
			} else {
				n := int64(0)
				if moved {
					n = 1
				}
				e.Outcome, e.Result = history.OK, history.FromResult(service.Int(n))
				smoves++
			}
			mu.Lock()
			h.Ops = append(h.Ops, e)
			mu.Unlock()
		}
	}()
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := client(at[w%len(at)])
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				e := history.Op{Process: w + 1, Kind: history.MultiKind, Call: int64(time.Since(begin))}
				var cmds []redis.Cmder
				var err error
				if w%3 == 2 {
					cmds, err = cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
						for _, k := range accts {
							p.Get(ctx, k)
						}
						return nil
					})
					for _, k := range accts {
						e.Txn = append(e.Txn, history.Op{Process: w + 1, Kind: "get", Key: k})
					}
				} else {
					from, to := accts[(i+w)%6], accts[(i*5+w+1)%6]
					if from == to {
						to = accts[(i+w+3)%6]
					}
					d := strconv.Itoa(1 + i%5)
					cmds, err = cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.IncrBy(ctx, from, -int64(1+i%5))
						p.IncrBy(ctx, to, int64(1+i%5))
						return nil
					})
					e.Txn = append(e.Txn, history.Op{Process: w + 1, Kind: "incr", Key: from, Args: []string{"-" + d}},
						history.Op{Process: w + 1, Kind: "incr", Key: to, Args: []string{d}})
				}
				e.Return = int64(time.Since(begin))
				if err != nil {
					e.Outcome = history.Unknown
				} else {
					e.Outcome, e.Result = history.OK, history.FromResult(service.OK())
					for j, cmd := range cmds {
						e.Txn[j].Outcome = history.OK
						switch x := cmd.(type) {
						case *redis.StringCmd:
							e.Txn[j].Result = history.FromResult(service.Bytes([]byte(x.Val())))
						case *redis.IntCmd:
							e.Txn[j].Result = history.FromResult(service.Int(x.Val()))
						}
					}
				}
				mu.Lock()
				h.Ops = append(h.Ops, e)
				if err == nil && w%3 != 2 && !killed.IsZero() && time.Since(begin) > killAt {
					afterKill++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(killAt)
	leader := shardLeader(t, ctx, addrs[3], config.GroupName(ns.Name, ns.Shards[1].Name))
	if err := c.Kill(leader); err != nil {
		t.Fatalf("kill %s: %v", leader, err)
	}
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	t.Logf("kill -9 %s, the leader of %s, %v after the start", leader, ns.Shards[1].Name, time.Since(begin).Round(time.Millisecond))
	time.Sleep(8 * time.Second)
	close(stop)
	wg.Wait()
	// The final read, through a node outside s1 (s1's leader was killed:
	// a set in s1 is read from its new leader).
	fin := history.Op{Process: 100, Kind: history.MultiKind, Call: int64(time.Since(begin))}
	var total int64
	for _, k := range accts {
		v, err := setup.Get(ctx, k).Int64()
		if err != nil {
			t.Fatalf("final read of %s: %v", k, err)
		}
		total += v
		fin.Txn = append(fin.Txn, history.Op{Process: 100, Kind: "get", Key: k, Outcome: history.OK, Result: history.FromResult(service.Bytes([]byte(strconv.FormatInt(v, 10))))})
	}
	in := 0
	for _, b := range bags {
		is, err := setup.SIsMember(ctx, b, "m").Result()
		if err != nil {
			t.Fatalf("final SISMEMBER %s: %v", b, err)
		}
		n := int64(0)
		if is {
			n, in = 1, in+1
		}
		fin.Txn = append(fin.Txn, history.Op{Process: 100, Kind: "sismember", Key: b, Args: []string{"m"}, Outcome: history.OK, Result: history.FromResult(service.Int(n))})
	}
	if in != 1 {
		t.Fatalf("the moved member is in %d of the two sets", in)
	}
	fin.Return, fin.Outcome, fin.Result = int64(time.Since(begin)), history.OK, history.FromResult(service.OK())
	h.Ops = append(h.Ops, fin)
	ok, unknown := 0, 0
	for _, o := range h.Ops {
		if o.Outcome == history.OK {
			ok++
		} else {
			unknown++
		}
	}
	t.Logf("%d EXECs and SMOVEs answered (%d SMOVEs across shards), %d errors (unknown outcome), %d transfers committed after the kill; final total %d", ok-2, smoves, unknown, afterKill, total)
	if total != 600 {
		t.Fatalf("final total %d, want 600 (a transfer half applied)", total)
	}
	if afterKill == 0 {
		t.Fatal("no transfer committed after the participant leader's kill")
	}
	rep, err := check.StrictSerializable(h, check.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("strict serializability: %s (%s)", rep.Result, rep.Detail)
	if rep.Result != check.Ok {
		t.Fatalf("history not strictly serializable: %s", rep.Detail)
	}
}
