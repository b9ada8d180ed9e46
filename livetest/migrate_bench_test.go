package livetest

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/shard"
)

// BenchmarkMigration moves a whole shard's slots (s0: 0-5460) to s1 on 9
// processes (synod cluster up --nodes 9 --shards 3) under a steady load of
// go-redis ClusterClient SETs and GETs over every slot, and prints the
// migration's duration and the load's latency percentiles before and
// during it, and how many acknowledged writes were lost (read back after).
//
//	SYNOD_MIGRATE_MB=20 SYNOD_MIGRATE_DURABILITY=fsync SYNOD_MIGRATE_RATE=0 go test -run '^$' -bench Migration -benchtime 1x ./livetest
//
// The target is a 100 MB shard; the default here is 20 MB (the
// shared machine). The load is open-loop: LOAD_RATE ops/s (default 400)
// from 8 workers, each op timed from its scheduled start.
func BenchmarkMigration(b *testing.B) {
	mb := envInt("SYNOD_MIGRATE_MB", 20)
	rate := envInt("SYNOD_MIGRATE_LOAD_RATE", 400)
	limit := envInt("SYNOD_MIGRATE_RATE", 0) // the migration's rate limit, keys/s (0: none)
	dur := os.Getenv("SYNOD_MIGRATE_DURABILITY")
	if dur == "" {
		dur = "fsync"
	}
	for i := 0; i < b.N; i++ {
		benchMigration(b, mb, rate, limit, dur)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type sample struct {
	at  time.Time
	lat time.Duration
	err bool
}

func benchMigration(b *testing.B, mb, rate, limit int, durability string) {
	c := upCluster(b, cluster.UpOptions{Nodes: 9, Shards: 3, Protocol: "paxos", Service: "kv", Durability: durability})
	addrs := c.ClientAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, PoolSize: 32})
	defer cc.Close()
	moved := []shard.Range{{First: 0, Last: 5460}}
	const valSize = 4096
	// Random bytes: DUMP's payload compresses a string (LZF), and a
	// value of one repeated byte shrank to about 75 bytes, so that the
	// "100 MB" shard moved 2 MB (session 49).
	vb := make([]byte, valSize)
	rand.New(rand.NewSource(1)).Read(vb)
	val := string(vb)
	nkeys := mb << 20 / valSize
	t0 := time.Now()
	var pre []string
	for i := 0; len(pre) < nkeys; i++ {
		if k := fmt.Sprintf("big-%d", i); shard.InRanges(moved, shard.KeySlot(k)) {
			pre = append(pre, k)
		}
	}
	for i := 0; i < len(pre); i += 100 {
		p := cc.Pipeline()
		for _, k := range pre[i:min(i+100, len(pre))] {
			p.Set(ctx, k, val, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatalf("preload: %v", err)
		}
	}
	fmt.Printf("preloaded %d keys of %d bytes (%d MB) into s0 in %v\n", len(pre), valSize, mb, time.Since(t0).Round(time.Millisecond))

	// Open-loop load over every slot: SET (half) and GET of its own keys.
	var mu sync.Mutex
	var samples []sample
	var acked sync.Map
	var stop atomic.Bool
	var wg sync.WaitGroup
	const workers = 8
	every := time.Duration(float64(time.Second) * workers / float64(rate))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(w)))
			next := time.Now()
			for seq := 0; !stop.Load(); seq++ {
				next = next.Add(every)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				k := fmt.Sprintf("load-%d-%d", w, rnd.Intn(500))
				var err error
				if seq%2 == 0 {
					err = cc.Set(ctx, k, strconv.Itoa(seq), 0).Err()
					if err == nil {
						acked.Store(k, seq)
					}
				} else {
					err = cc.Get(ctx, k).Err()
					if err == redis.Nil {
						err = nil
					}
				}
				s := sample{at: next, lat: time.Since(next), err: err != nil}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(5 * time.Second)
	admin := redis.NewClient(&redis.Options{Addr: addrs[8], ReadTimeout: 10 * time.Second})
	defer admin.Close()
	load0 := loadavg()
	start := time.Now()
	if err := admin.Do(ctx, "cluster", "migrate", "s0", "s1", "0-5460", "rate", strconv.Itoa(limit)).Err(); err != nil {
		b.Fatal(err)
	}
	var st map[string]string
	for ctx.Err() == nil {
		if s, err := migrationStatus(ctx, admin); err == nil {
			st = s
			if st["phase"] == "done" {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	end := time.Now()
	load1 := loadavg()
	time.Sleep(3 * time.Second)
	stop.Store(true)
	wg.Wait()

	lost := 0
	acked.Range(func(k, v any) bool {
		got, err := cc.Get(ctx, k.(string)).Result()
		if n, _ := strconv.Atoi(got); err != nil || n < v.(int) {
			lost++
		}
		return true
	})
	before, during := pct(samples, start.Add(-5*time.Second), start), pct(samples, start, end)
	d := end.Sub(start)
	fmt.Printf("migration of s0 (slots 0-5460, %d keys, %d MB) to s1, rate limit %d keys/s (0: none): %v (%.1f MB/s), durability %s; %s keys and %s bytes copied, %s dirty passes\n",
		len(pre), mb, limit, d.Round(time.Millisecond), float64(mb)/d.Seconds(), durability, st["keys_copied"], st["bytes_copied"], st["dirty_passes"])
	fmt.Printf("load %d ops/s open-loop (8 go-redis workers, half SET half GET, every slot): before %s; during %s\n", rate, before, during)
	fmt.Printf("acknowledged writes of the load: lost %d; /proc/loadavg at the start %s, at the end %s\n", lost, load0, load1)
	if lost > 0 {
		b.Fatalf("%d acknowledged writes lost", lost)
	}
}

// pct summarises the samples scheduled in [from, to).
func pct(ss []sample, from, to time.Time) string {
	var lat []time.Duration
	errs := 0
	for _, s := range ss {
		if s.at.Before(from) || !s.at.Before(to) {
			continue
		}
		if s.err {
			errs++
		}
		lat = append(lat, s.lat)
	}
	if len(lat) == 0 {
		return "no samples"
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("%d ops, p50 %v, p99 %v, max %v, %d errors", len(lat), q(0.5), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond), errs)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
