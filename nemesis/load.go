package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

const opTimeout = time.Second

// write is one SET of a unique value, as the clients saw it.
type write struct {
	value         string
	invoke, reply int64 // recorder times; reply < 0 when not acknowledged
}

// load runs the clients and records the history.
type load struct {
	rec    *history.Recorder
	procs  atomic.Int64
	mu     sync.Mutex
	writes map[string][]write // per key, every write issued
	acked  atomic.Int64
	reads  atomic.Int64
	unk    atomic.Int64
}

func newLoad(protocol string) *load {
	start := time.Now()
	l := &load{rec: history.NewRecorder(func() int64 { return int64(time.Since(start)) }), writes: map[string][]write{}}
	l.rec.SetMeta("protocol", protocol)
	l.rec.SetMeta("test", "nemesis")
	return l
}

func (l *load) newProc() int { return int(l.procs.Add(1)) }

// set records one SET; any error makes its outcome unknown.
func (l *load) set(c *client.Client, proc int, key, val string) error {
	p := l.rec.Invoke(proc, "default", service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(val)}}, "")
	w := write{value: val, invoke: l.rec.Now(), reply: -1}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := c.Set(ctx, key, []byte(val))
	if err != nil {
		p.Unknown()
		l.unk.Add(1)
	} else {
		p.Complete(service.OK())
		w.reply = l.rec.Now()
		l.acked.Add(1)
	}
	l.mu.Lock()
	l.writes[key] = append(l.writes[key], w)
	l.mu.Unlock()
	return err
}

// get records one GET; a failed read had no effect.
func (l *load) get(c *client.Client, proc int, key string) (string, bool, error) {
	p := l.rec.Invoke(proc, "default", service.Op{Kind: "get", Key: key}, "")
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	v, found, err := c.Get(ctx, key)
	if err != nil {
		p.Fail(service.Result{})
		return "", false, err
	}
	res := service.Nil()
	if found {
		res = service.Bytes(append([]byte{}, v...))
	}
	p.Complete(res)
	l.reads.Add(1)
	return string(v), found, nil
}

// client issues random GETs and SETs until stop. Its addresses are every
// node (fail-over), or one node for protocols that need sticky clients.
// After a write of unknown outcome it continues as a fresh process.
func (l *load) client(id int, addrs, keys []string, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 19))
	c, err := client.New(addrs, client.Options{Timeout: opTimeout, PoolSize: 1})
	if err != nil {
		return
	}
	defer c.Close()
	proc := l.newProc()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		key := keys[rng.IntN(len(keys))]
		var err error
		if rng.IntN(2) == 0 {
			if err = l.set(c, proc, key, fmt.Sprintf("c%d-%d", id, seq)); err != nil {
				proc = l.newProc()
			}
		} else {
			_, _, err = l.get(c, proc, key)
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(2 * time.Millisecond) // keep histories checkable
		}
	}
}

// lostWrite says why a final read of key that returned (val, found) does
// not hold the key's last acknowledged write ("" when it does). The
// final value must come from a write that no acknowledged write follows
// in real time: a write acknowledged before another acknowledged write
// began was overwritten by it, and nil means every acknowledged write is gone.
func lostWrite(ws []write, val string, found bool) string {
	var last *write // the acknowledged write invoked last
	for k := range ws {
		if ws[k].reply >= 0 && (last == nil || ws[k].invoke > last.invoke) {
			last = &ws[k]
		}
	}
	if last == nil {
		return ""
	}
	if !found {
		return fmt.Sprintf("reads nil; %q was acknowledged", last.value)
	}
	for _, w := range ws {
		if w.value != val {
			continue
		}
		if w.reply >= 0 && w.reply < last.invoke {
			return fmt.Sprintf("reads %q, overwritten by the acknowledged %q", val, last.value)
		}
		return ""
	}
	return fmt.Sprintf("reads %q, which no client wrote", val)
}

// finalReads reads every key through every node, retrying until the read
// holds the last acknowledged write or the deadline passes (replicas that
// were cut off catch up). It returns the keys still missing one, with
// why, and the reads no node answered before the deadline.
//
// realTime says whether the protocol's model orders writes in real time
// (linearizable: lostWrite's rule). Where it does not (eventually
// serializable: ESDS orders non-strict writes by labels, the ESDS thesis §3, so a
// write acknowledged before another began may still be ordered after it),
// a final read must hold a value some client wrote (nil only where no
// write was acknowledged), and every node must end with the same value
// (the replicas converge once gossip has run): a key whose nodes still
// disagree at the deadline is reported.
func (l *load) finalReads(addrs, keys []string, within time.Duration, realTime bool) (lost map[string]string, unanswered int) {
	lost = map[string]string{}
	deadline := time.Now().Add(within)
	judge := lostWrite
	if !realTime {
		judge = unwritten
	}
	final := map[string][]string{} // key -> each node's final value
	read := func(c *client.Client, proc int, key string) (string, string) {
		why, last := "no answer", ""
		for {
			val, found, err := l.get(c, proc, key)
			if err == nil {
				l.mu.Lock()
				why = judge(l.writes[key], val, found)
				l.mu.Unlock()
				last = fmt.Sprintf("%t:%s", found, val)
				if why == "" {
					break
				}
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		return why, last
	}
	clients := make([]*client.Client, len(addrs))
	procs := make([]int, len(addrs))
	for n, addr := range addrs {
		c, err := client.New([]string{addr}, client.Options{Timeout: opTimeout, PoolSize: 1})
		if err != nil {
			continue
		}
		defer c.Close()
		clients[n], procs[n] = c, l.newProc()
	}
	for n := range addrs {
		if clients[n] == nil {
			continue
		}
		for _, key := range keys {
			why, last := read(clients[n], procs[n], key)
			if why == "no answer" {
				unanswered++
			} else if why != "" {
				lost[key] = fmt.Sprintf("n%d %s", n+1, why)
			}
			final[key] = append(final[key], last)
		}
	}
	if realTime {
		return lost, unanswered
	}
	// Convergence: re-read a key through every node until they agree.
	for _, key := range keys {
		for _, ok := lost[key]; !ok && !agree(final[key]); _, ok = lost[key] {
			if time.Now().After(deadline) {
				if answered := slices.DeleteFunc(slices.Clone(final[key]), func(v string) bool { return v == "" }); agree(answered) {
					// The nodes that answered agree: the rest did not
					// answer, which is unavailability, not divergence.
					unanswered += len(final[key]) - len(answered)
				} else {
					lost[key] = fmt.Sprintf("nodes disagree at the deadline: %v", final[key])
				}
				break
			}
			time.Sleep(100 * time.Millisecond)
			final[key] = final[key][:0]
			for n := range addrs {
				if clients[n] != nil {
					_, last := read(clients[n], procs[n], key)
					final[key] = append(final[key], last)
				}
			}
		}
	}
	return lost, unanswered
}

// unwritten is lostWrite for models without real-time order: the final
// value must be one some client wrote, and nil only where no write was
// acknowledged.
func unwritten(ws []write, val string, found bool) string {
	acked := false
	for _, w := range ws {
		if w.reply >= 0 {
			acked = true
		}
		if found && w.value == val {
			return ""
		}
	}
	switch {
	case !found && acked:
		return "reads nil; an acknowledged write was made"
	case !found:
		return ""
	}
	return fmt.Sprintf("reads %q, which no client wrote", val)
}

// agree reports whether every node's final value is the same.
func agree(vals []string) bool {
	for _, v := range vals {
		if v != vals[0] {
			return false
		}
	}
	return true
}
