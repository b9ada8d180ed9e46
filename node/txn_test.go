package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/shard/txn"
)

// keysOfGroups returns n keys of each of the two shards of migrationCluster.
func keysOfGroups(cfg *config.Cluster, prefix string, n int) [2][]string {
	m := config.SlotMap(cfg.Namespaces[0])
	var out [2][]string
	for i := 0; len(out[0]) < n || len(out[1]) < n; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if g := m.Group(k); len(out[g]) < n {
			out[g] = append(out[g], k)
		}
	}
	return out
}

// checkTotal fails t unless accts hold total.
func checkTotal(t *testing.T, ctx context.Context, cl *redis.Client, accts []string, total int64) {
	t.Helper()
	var sum int64
	for _, k := range accts {
		v, err := cl.Get(ctx, k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if sum != total {
		t.Fatalf("final total %d, want %d", sum, total)
	}
}

// setAccounts sets every key of ks to 100 and returns them with their
// total.
func setAccounts(t *testing.T, ctx context.Context, cl *redis.Client, ks [2][]string) ([]string, int64) {
	t.Helper()
	accts := append(append([]string(nil), ks[0]...), ks[1]...)
	for _, k := range accts {
		if err := cl.Set(ctx, k, 100, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return accts, int64(100 * len(accts))
}

// MULTI/EXEC, MSET and WATCH across shards, from a plain client at a node:
// each runs as one cross-shard transaction.
func TestCrossShardMultiExec(t *testing.T) {
	cfg, _, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ks := keysOfGroups(cfg, "k", 2)
	a, b, c := ks[0][0], ks[1][0], ks[1][1]
	cl := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer cl.Close()
	if err := cl.MSet(ctx, a, "1", b, "2").Err(); err != nil {
		t.Fatalf("MSET across shards: %v", err)
	}
	var get *redis.StringCmd
	var incr *redis.IntCmd
	_, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, a, "10", 0)
		incr = p.IncrBy(ctx, b, 5)
		get = p.Get(ctx, a)
		p.Set(ctx, c, "c", 0)
		return nil
	})
	if err != nil || incr.Val() != 7 || get.Val() != "10" {
		t.Fatalf("MULTI/EXEC across shards: err %v, incrby %d, get %q", err, incr.Val(), get.Val())
	}
	other := redis.NewClient(&redis.Options{Addr: addrs[4]})
	defer other.Close()
	if vs, err := other.MGet(ctx, a, b, c).Result(); err != nil || fmt.Sprint(vs) != "[10 7 c]" {
		t.Fatalf("read back at n5: %v %v", vs, err)
	}
	// WATCH across shards: a watched key changed by another client aborts
	// EXEC (nil), and nothing of it is applied; unchanged, it commits.
	err = cl.Watch(ctx, func(tx *redis.Tx) error {
		if err := other.Set(ctx, b, "changed", 0).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, a, "watched-write", 0)
			p.Set(ctx, b, "watched-write", 0)
			return nil
		})
		return err
	}, a, b)
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("EXEC after a watched key changed = %v, want TxFailedErr", err)
	}
	if v := other.Get(ctx, a).Val(); v != "10" {
		t.Fatalf("an aborted transaction wrote %s = %q", a, v)
	}
	err = cl.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, a, "w", 0)
			p.Set(ctx, b, "w", 0)
			return nil
		})
		return err
	}, a, b)
	if err != nil || other.Get(ctx, a).Val() != "w" || other.Get(ctx, b).Val() != "w" {
		t.Fatalf("EXEC with unchanged watched keys: %v, %s=%q %s=%q", err, a, other.Get(ctx, a).Val(), b, other.Get(ctx, b).Val())
	}
	// A watched key in a group the transaction writes nothing in: that
	// group's part is the guard alone (its slot locked until the commit).
	err = cl.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, b, "only-b", 0)
			return nil
		})
		return err
	}, a)
	if err != nil || other.Get(ctx, b).Val() != "only-b" {
		t.Fatalf("EXEC watching a key of the other group: %v, %s = %q", err, b, other.Get(ctx, b).Val())
	}
	if err := other.Set(ctx, b, "w", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// One operation whose keys are in two groups: a computed transaction.
	if err := cl.Rename(ctx, a, b).Err(); err != nil {
		t.Fatalf("RENAME across shards: %v", err)
	}
	if v, err := other.Get(ctx, b).Result(); err != nil || v != "w" || other.Exists(ctx, a).Val() != 0 {
		t.Fatalf("after RENAME %s %s: %s = %q, %v; %s exists %d", a, b, b, v, err, a, other.Exists(ctx, a).Val())
	}
	if err := cl.Rename(ctx, a, b).Err(); err == nil || err.Error() != "ERR no such key" {
		t.Fatalf("RENAME of a missing key across shards = %v, want ERR no such key", err)
	}
	if v := other.Get(ctx, b).Val(); v != "w" {
		t.Fatalf("a failed RENAME changed %s to %q", b, v)
	}
	// Sets across shards: SADD, then SINTERSTORE into a third group's key,
	// SMOVE between groups, each atomic.
	sk := keysOfGroups(cfg, "set", 1)
	s0, s1 := sk[0][0], sk[1][0]
	if err := cl.SAdd(ctx, s0, "x", "y", "z").Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.SAdd(ctx, s1, "y", "z", "w").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := cl.SInterStore(ctx, a, s0, s1).Result(); err != nil || n != 2 {
		t.Fatalf("SINTERSTORE across shards = %d, %v", n, err)
	}
	if m := other.SMembers(ctx, a).Val(); fmt.Sprint(m) != "[y z]" && fmt.Sprint(m) != "[z y]" {
		t.Fatalf("SINTERSTORE wrote %v", m)
	}
	if ok, err := cl.SMove(ctx, s0, s1, "x").Result(); err != nil || !ok {
		t.Fatalf("SMOVE across shards = %v, %v", ok, err)
	}
	if other.SIsMember(ctx, s0, "x").Val() || !other.SIsMember(ctx, s1, "x").Val() {
		t.Fatal("SMOVE across shards did not move x")
	}
	// INFO transactions counts what this node coordinated.
	info := cl.Info(ctx, "transactions").Val()
	if !strings.Contains(info, "txn_committed:") || strings.Contains(info, "txn_committed:0\r") || !strings.Contains(info, "txn_watch_failed:1") {
		t.Fatalf("INFO transactions at the coordinating node:\n%s", info)
	}
	// In MULTI with commands of one group: all of it one transaction.
	cmds, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, c, "before", 0)
		p.Rename(ctx, b, c)
		p.Get(ctx, c)
		return nil
	})
	if err != nil || cmds[2].(*redis.StringCmd).Val() != "w" {
		t.Fatalf("MULTI SET, RENAME across shards, GET: %v %v", cmds, err)
	}
}

// Transfers between accounts on both shards, from clients at every node,
// while readers read every account in one transaction: every read sees the
// total (no transaction half applied, none seen half), and so does the
// end. (The readers are transactions themselves, so txprepare's own lock
// check protects them; the slot guard's lock check, which protects single
// requests, is what the simulation's broken variants exercise.)
func TestCrossShardTransfers(t *testing.T) {
	cfg, _, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ks := keysOfGroups(cfg, "acct", 3)
	setup := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer setup.Close()
	accts, total := setAccounts(t, ctx, setup, ks)
	var transfers, reads, bad atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(4 * time.Second)
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := redis.NewClient(&redis.Options{Addr: addrs[w%len(addrs)], MaxRetries: -1})
			defer cl.Close()
			for i := 0; time.Now().Before(stop); i++ {
				if w%3 == 2 { // a reader: MULTI of GETs (w 2), MGET outside MULTI (w 5)
					var vals []string
					if w == 5 {
						vs, err := cl.MGet(ctx, accts...).Result()
						if err != nil {
							continue
						}
						for _, v := range vs {
							s, _ := v.(string)
							vals = append(vals, s)
						}
					} else {
						var cmds []*redis.StringCmd
						_, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
							cmds = cmds[:0]
							for _, k := range accts {
								cmds = append(cmds, p.Get(ctx, k))
							}
							return nil
						})
						if err != nil {
							continue
						}
						for _, c := range cmds {
							vals = append(vals, c.Val())
						}
					}
					var sum int64
					for _, v := range vals {
						v, _ := strconv.ParseInt(v, 10, 64)
						sum += v
					}
					reads.Add(1)
					if sum != total {
						bad.Add(1)
						t.Errorf("a transaction read a total of %d, want %d", sum, total)
					}
					continue
				}
				from, to := ks[0][(i+w)%3], ks[1][(i*7+w)%3]
				if i%2 == 1 {
					from, to = to, from
				}
				_, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.DecrBy(ctx, from, 3)
					p.IncrBy(ctx, to, 3)
					return nil
				})
				if err == nil {
					transfers.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// The final total. A writer whose request failed (go-redis's 3 s read
	// timeout, under -race at load 30) has stopped, but its transaction
	// may still commit: GETs of one account after another may see one
	// before it and the other after (so a run failed "final total 603,
	// want 600"). A read-only transaction (MGET across the shards) sees it
	// whole or not at all, at once; the accounts read one by one agree
	// once it has settled (the resolver ends an undecided one in 5 s).
	sumOf := func(vals []any) int64 {
		var sum int64
		for _, v := range vals {
			s, _ := v.(string)
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("account value %q: %v", s, err)
			}
			sum += n
		}
		return sum
	}
	for {
		vs, err := setup.MGet(ctx, accts...).Result()
		if err == nil {
			if sum := sumOf(vs); sum != total {
				t.Fatalf("MGET after the run: total %d, want %d", sum, total)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("MGET after the run: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var sum int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var vals []any
		for _, k := range accts {
			v, err := setup.Get(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			vals = append(vals, v)
		}
		if sum = sumOf(vals); sum == total || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d transfers and %d reads committed, %d reads with a wrong total", transfers.Load(), reads.Load(), bad.Load())
	// The MGETs ran as read-only transactions (one round, package
	// shard/txn), at n6.
	at6 := redis.NewClient(&redis.Options{Addr: addrs[5]})
	defer at6.Close()
	if info := at6.Info(ctx, "transactions").Val(); !strings.Contains(info, "txn_read_only:") || strings.Contains(info, "txn_read_only:0\r") {
		t.Errorf("INFO transactions at n6 counts no read-only transaction:\n%s", info)
	}
	if sum != total {
		t.Fatalf("final total %d, want %d", sum, total)
	}
	if transfers.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("no transfers (%d) or reads (%d) committed", transfers.Load(), reads.Load())
	}
}

// A computed transaction (RENAME across shards) is answered once its
// commit decision is logged, before its commits reach the participants:
// a read sent right after the answer, through another node, to the
// participant whose commit may still be on its way, must see the rename
// (the prepared lock refuses it until the commit, and the node retries).
func TestCrossShardAnswerAtDecision(t *testing.T) {
	cfg, _, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ks := keysOfGroups(cfg, "r", 1)
	a, b := ks[0][0], ks[1][0] // a in s0 (n1-n3), b in s1 (n4-n6)
	at1 := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer at1.Close()
	at5 := redis.NewClient(&redis.Options{Addr: addrs[4]})
	defer at5.Close()
	at2 := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer at2.Close()
	if err := at1.Set(ctx, a, "v0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	from, to := a, b
	for i := 0; i < 40; i++ {
		if err := at1.Rename(ctx, from, to).Err(); err != nil {
			t.Fatalf("RENAME %s %s: %v", from, to, err)
		}
		// Read both, each through a node outside its group.
		fromReader, toReader := at5, at2
		if to == a {
			fromReader, toReader = at2, at5
		}
		if v, err := toReader.Get(ctx, to).Result(); err != nil || v != "v0" {
			t.Fatalf("GET %s right after RENAME %s %s answered: %q %v", to, from, to, v, err)
		}
		if n, err := fromReader.Exists(ctx, from).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS %s right after RENAME %s %s answered: %d %v", from, from, to, n, err)
		}
		from, to = to, from
	}
	info := at1.Info(ctx, "transactions").Val()
	if !strings.Contains(info, "txn_computed:40\r") {
		t.Fatalf("INFO transactions at n1, want 40 computed:\n%s", info)
	}
}

// A plain MULTI/EXEC across shards (INCRBY of a key in each of two
// groups) is answered at its commit decision, with the results its
// prepares evaluated, and a read right after the answer, through a node
// of another group, sees its writes: a participant that has not applied
// its commit yet still holds the prepared lock, which refuses the read
// (TRYAGAIN, retried by the node) until the commit lands. The commits are
// held (txnTailHook) until the test's reads have answered or hold has
// passed, so every read meets a participant that has not applied. With
// reads that skip their slot guards (brokenReadGuards) the read returns
// the old value, and the test's check fails (shown in the broken run).
func TestCrossShardExecReadAfterAnswer(t *testing.T) {
	stale := execReadAfterAnswer(t, false, 8, 300*time.Millisecond)
	if stale != "" {
		t.Fatal(stale)
	}
	// The broken variant: the commits wait for the reads, which pass the
	// locks and read what the commit has not applied yet.
	if stale := execReadAfterAnswer(t, true, 1, 30*time.Second); stale == "" {
		t.Fatal("with reads skipping their slot guards, no read missed an acknowledged EXEC's write")
	} else {
		t.Logf("broken variant caught: %s", stale)
	}
}

// execReadAfterAnswer runs rounds of MULTI INCRBY a INCRBY b EXEC, each
// followed by GETs of a and b through nodes outside their groups, the
// EXEC's commits held until the reads answered or hold passed; it
// returns the first read that missed the EXEC's write ("" if none).
func execReadAfterAnswer(t *testing.T, brokenReads bool, rounds int, hold time.Duration) string {
	var mu sync.Mutex
	readDone := make(chan struct{})
	hook := func() {
		mu.Lock()
		ch := readDone
		mu.Unlock()
		select {
		case <-ch:
		case <-time.After(hold):
		}
	}
	cfg, nodes, addrs := migrationCluster(t, Options{txnTailHook: hook, brokenReadGuards: brokenReads})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ks := keysOfGroups(cfg, "x", 1)
	a, b := ks[0][0], ks[1][0] // a in s0 (n1-n3), b in s1 (n4-n6)
	at1 := redis.NewClient(&redis.Options{Addr: addrs[0], ReadTimeout: 20 * time.Second})
	defer at1.Close()
	readA := redis.NewClient(&redis.Options{Addr: addrs[4], ReadTimeout: 20 * time.Second}) // n5: outside s0
	defer readA.Close()
	readB := redis.NewClient(&redis.Options{Addr: addrs[1], ReadTimeout: 20 * time.Second}) // n2: outside s1
	defer readB.Close()
	stale := ""
	for i := 1; i <= rounds && stale == ""; i++ {
		mu.Lock()
		readDone = make(chan struct{})
		done := readDone
		mu.Unlock()
		cmds, err := at1.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.IncrBy(ctx, a, 1)
			p.IncrBy(ctx, b, 10)
			return nil
		})
		if err != nil {
			close(done)
			t.Fatalf("round %d: EXEC: %v", i, err)
		}
		if x, y := cmds[0].(*redis.IntCmd).Val(), cmds[1].(*redis.IntCmd).Val(); x != int64(i) || y != int64(10*i) {
			close(done)
			t.Fatalf("round %d: EXEC answered %d %d, want %d %d", i, x, y, i, 10*i)
		}
		for _, r := range []struct {
			cl   *redis.Client
			key  string
			want int64
		}{{readA, a, int64(i)}, {readB, b, int64(10 * i)}} {
			v, err := r.cl.Get(ctx, r.key).Int64()
			if err == redis.Nil {
				v, err = 0, nil
			}
			if err != nil {
				close(done)
				t.Fatalf("round %d: GET %s: %v", i, r.key, err)
			}
			if v != r.want && stale == "" {
				stale = fmt.Sprintf("round %d: GET %s right after the EXEC's answer = %d, want %d", i, r.key, v, r.want)
			}
		}
		close(done)
	}
	n1 := nodes[0]
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	n1.tails.wait(wctx, []int{shard.KeySlot(a), shard.KeySlot(b)})
	wcancel()
	if !brokenReads {
		info := at1.Info(ctx, "transactions").Val()
		if !strings.Contains(info, fmt.Sprintf("txn_evaluated:%d\r", rounds)) || !strings.Contains(info, "txn_eval_mismatch:0\r") {
			t.Fatalf("INFO transactions at n1, want %d evaluated, 0 mismatches:\n%s", rounds, info)
		}
	}
	return stale
}

// A transaction left prepared by a coordinator that died is resolved by
// the participants' leaders: one that never decided is aborted (its slot
// locks released, nothing applied), one whose commit decision was logged
// is committed in every participant.
func TestCrossShardResolve(t *testing.T) {
	cfg, nodes, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ks := keysOfGroups(cfg, "r", 2)
	n := nodes[0]
	s := n.shards["default"]
	coord := s.groups[0].Namespace.Name
	prepare := func(id string, k0, k1 string) {
		for gi, k := range []string{k0, k1} {
			p := txn.Part{Group: gi, Index: []int{0}, Ops: []service.Op{kvOp("set", k, id)}}
			if _, err := n.groupDo(ctx, s, gi, txn.Prepare(id, coord, nil, p)); err != nil {
				t.Fatalf("prepare %s in group %d: %v", id, gi, err)
			}
		}
	}
	prepare("undecided", ks[0][0], ks[1][0])
	prepare("decided", ks[0][1], ks[1][1])
	if _, err := n.groupDo(ctx, s, 0, []service.Op{kvOp("txdecide", shard.DecisionKey("decided"), txn.Commit)}); err != nil {
		t.Fatal(err)
	}
	// Until resolved, the locked slots refuse clients (TRYAGAIN, which the
	// node retries for a plain client until its deadline).
	cl := redis.NewClient(&redis.Options{Addr: addrs[2], MaxRetries: -1})
	defer cl.Close()
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	if err := cl.Get(short, ks[1][0]).Err(); err == nil || err == redis.Nil {
		t.Fatalf("GET of a slot a prepared transaction holds = %v, want refused", err)
	}
	cancelShort()
	start := time.Now()
	for _, want := range [][3]string{{ks[0][0], ks[1][0], ""}, {ks[0][1], ks[1][1], "decided"}} {
		for _, k := range want[:2] {
			v, err := cl.Get(ctx, k).Result()
			if err == redis.Nil {
				v, err = "", nil
			}
			if err != nil || v != want[2] {
				t.Fatalf("after resolution %s = %q, %v; want %q", k, v, err, want[2])
			}
		}
	}
	t.Logf("resolved after %v", time.Since(start))
	if time.Since(start) > 20*time.Second {
		t.Fatalf("resolution took %v", time.Since(start))
	}
}

// Cross-shard transfers and whole-bank reads run while a slot range that
// holds some of the accounts moves from s0 to s1 (CLUSTER MIGRATE): the
// freeze waits for the transactions holding the slots, prepares on frozen
// slots vote TRYAGAIN and are retried, and after the flip the accounts are
// served by s1. Every read sees the total, the final total is kept, the
// migration finishes, and the moved accounts are in s1 and gone from s0.
func TestCrossShardTxnDuringMigration(t *testing.T) {
	cfg, nodes, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	moved := []shard.Range{{First: 0, Last: 1499}}
	m := config.SlotMap(cfg.Namespaces[0])
	var accts, in []string
	want := map[string]int{"in": 3, "s0": 2, "s1": 3}
	for i := 0; want["in"]+want["s0"]+want["s1"] > 0; i++ {
		k := fmt.Sprintf("acct%d", i)
		kind := fmt.Sprintf("s%d", m.Group(k))
		if shard.InRanges(moved, shard.KeySlot(k)) {
			kind = "in"
		}
		if want[kind] > 0 {
			want[kind]--
			accts = append(accts, k)
			if kind == "in" {
				in = append(in, k)
			}
		}
	}
	setup := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer setup.Close()
	for _, k := range accts {
		if err := setup.Set(ctx, k, 100, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 400; i++ { // something to copy
		if err := setup.Set(ctx, fmt.Sprintf("{%s}fill%d", in[i%len(in)], i), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	total := int64(100 * len(accts))
	var transfers, reads, during atomic.Int64
	var migrating atomic.Bool
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := redis.NewClient(&redis.Options{Addr: addrs[(w*2)%len(addrs)], MaxRetries: -1, ReadTimeout: 20 * time.Second})
			defer cl.Close()
			for i := 0; !stop.Load(); i++ {
				if w == 3 {
					var cmds []*redis.StringCmd
					_, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
						cmds = cmds[:0]
						for _, k := range accts {
							cmds = append(cmds, p.Get(ctx, k))
						}
						return nil
					})
					if err != nil {
						continue
					}
					var sum int64
					for _, c := range cmds {
						v, _ := strconv.ParseInt(c.Val(), 10, 64)
						sum += v
					}
					reads.Add(1)
					if sum != total {
						t.Errorf("a transaction read a total of %d, want %d", sum, total)
					}
					continue
				}
				from, to := accts[(i+w)%len(accts)], accts[(i*3+w+1)%len(accts)]
				if from == to {
					continue
				}
				_, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.DecrBy(ctx, from, 2)
					p.IncrBy(ctx, to, 2)
					return nil
				})
				if err == nil {
					transfers.Add(1)
					if migrating.Load() {
						during.Add(1)
					}
				}
			}
		}()
	}
	admin := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer admin.Close()
	time.Sleep(300 * time.Millisecond)
	migrating.Store(true)
	if err := admin.Do(ctx, "cluster", "migrate", "s0", "s1", "0-1499").Err(); err != nil {
		t.Fatal(err)
	}
	st := waitPhase(t, ctx, admin, "done")
	migrating.Store(false)
	time.Sleep(500 * time.Millisecond) // transactions after the flip
	stop.Store(true)
	wg.Wait()
	t.Logf("migration: %v", st)
	t.Logf("%d transfers (%d while migrating), %d whole-bank reads", transfers.Load(), during.Load(), reads.Load())
	checkTotal(t, ctx, setup, accts, total)
	if during.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("no transfers during the migration (%d) or no reads (%d)", during.Load(), reads.Load())
	}
	s1 := keysIn(t, ctx, nodes[0], 1, moved)
	s0 := keysIn(t, ctx, nodes[0], 0, moved)
	if len(s0) != 0 {
		t.Fatalf("s0 still holds %d keys of the moved range", len(s0))
	}
	for _, k := range in {
		found := false
		for _, x := range s1 {
			found = found || x == k
		}
		if !found {
			t.Fatalf("moved account %s is not in s1", k)
		}
	}
}

// Interactive transactions (SYNOD BEGIN) across shards: each operation is
// answered at once (its own writes seen), COMMIT applies them all or,
// when a key it read changed meanwhile, none (EXECABORT); concurrent
// transfers as read-then-write interactive transactions from every node
// keep the total, which whole-bank MGETs check throughout (a lost update
// or a half-applied commit would show).
func TestCrossShardInteractive(t *testing.T) {
	cfg, _, addrs := migrationCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ks := keysOfGroups(cfg, "i", 3)
	a, b := ks[0][0], ks[1][0]
	cl := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer cl.Close()
	other := redis.NewClient(&redis.Options{Addr: addrs[3]})
	defer other.Close()
	if err := cl.MSet(ctx, a, "10", b, "20").Err(); err != nil {
		t.Fatal(err)
	}
	conn := cl.Conn()
	defer conn.Close()
	do := func(args ...any) (any, error) { return conn.Do(ctx, args...).Result() }
	if _, err := do("synod", "begin"); err != nil {
		t.Fatalf("SYNOD BEGIN on a sharded namespace: %v", err)
	}
	if v, err := do("incrby", a, 5); err != nil || v != int64(15) {
		t.Fatalf("INCRBY in the transaction: %v %v", v, err)
	}
	if v, err := do("get", a); err != nil || v != "15" {
		t.Fatalf("GET of its own write: %v %v", v, err)
	}
	if v, err := do("incrby", b, -5); err != nil || v != int64(15) {
		t.Fatalf("INCRBY of the other shard's key: %v %v", v, err)
	}
	if v, _ := other.Get(ctx, a).Result(); v != "10" {
		t.Fatalf("another client sees %s = %q before the commit, want 10", a, v)
	}
	if _, err := do("synod", "commit"); err != nil {
		t.Fatalf("SYNOD COMMIT: %v", err)
	}
	if vs, err := other.MGet(ctx, a, b).Result(); err != nil || fmt.Sprint(vs) != "[15 15]" {
		t.Fatalf("after the commit: %v %v", vs, err)
	}
	// A key read by the transaction changes before its commit: EXECABORT,
	// and nothing of it is applied.
	if _, err := do("synod", "begin"); err != nil {
		t.Fatal(err)
	}
	if _, err := do("get", b); err != nil {
		t.Fatal(err)
	}
	if _, err := do("set", a, "mine"); err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, b, "theirs", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := do("synod", "commit"); err == nil || !strings.Contains(err.Error(), "EXECABORT") {
		t.Fatalf("SYNOD COMMIT after a read key changed = %v, want EXECABORT", err)
	}
	if v, _ := other.Get(ctx, a).Result(); v != "15" {
		t.Fatalf("%s = %q after the aborted commit, want 15", a, v)
	}

	accts, total := setAccounts(t, ctx, cl, ks)
	var committed, aborted, reads atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for w := 0; w < 5; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: addrs[w%len(addrs)], MaxRetries: -1})
			defer c.Close()
			if w == 4 { // a reader
				for time.Now().Before(stop) {
					vs, err := c.MGet(ctx, accts...).Result()
					if err != nil {
						continue
					}
					var sum int64
					for _, v := range vs {
						s, _ := v.(string)
						x, _ := strconv.ParseInt(s, 10, 64)
						sum += x
					}
					reads.Add(1)
					if sum != total {
						t.Errorf("MGET read a total of %d, want %d", sum, total)
					}
				}
				return
			}
			cn := c.Conn()
			defer cn.Close()
			for i := 0; time.Now().Before(stop); i++ {
				from, to := ks[0][(i+w)%3], ks[1][(i*7+w)%3]
				if i%2 == 1 {
					from, to = to, from
				}
				if cn.Do(ctx, "synod", "begin").Err() != nil {
					continue
				}
				f, err1 := cn.Do(ctx, "get", from).Int64()
				g, err2 := cn.Do(ctx, "get", to).Int64()
				err3 := cn.Do(ctx, "set", from, f-3).Err()
				err4 := cn.Do(ctx, "set", to, g+3).Err()
				if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
					cn.Do(ctx, "synod", "abort")
					continue
				}
				if err := cn.Do(ctx, "synod", "commit").Err(); err == nil {
					committed.Add(1)
				} else if strings.Contains(err.Error(), "EXECABORT") {
					aborted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d interactive transfers committed, %d aborted (a read key changed), %d whole-bank MGETs", committed.Load(), aborted.Load(), reads.Load())
	checkTotal(t, ctx, cl, accts, total)
	if committed.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("no transfer (%d) or read (%d)", committed.Load(), reads.Load())
	}
}
