package node

// Storage faults (issue 19 item 3; the storage package doc's "Storage
// faults" has the engine's side).
//
// When a Commit fails, the node does not retry it and does not exit (unless
// Options.Fatal asks for that): it enters a failed state that only a
// restart leaves, because after a failed fsync nobody knows what is on
// disk, and the automata have already moved on past records that may be
// lost.
//
//   - It acknowledges nothing more. Every namespace's held outputs (Send,
//     Respond, Effect) stay held for good, and nothing emitted later leaves,
//     in every namespace: the node's namespaces share one engine (one WAL),
//     so one failed sync is every namespace's failure. Peers see it as a
//     crashed replica; the others keep serving.
//   - It refuses every client request with a StorageError, which RESP shows
//     as "-ERR node n2 storage failed: fdatasync <path>: <error>; restart
//     required" (or "storage full: ...; free space and restart the node" for
//     ENOSPC). Requests in flight get the same error as of unknown outcome
//     (another replica may still complete them). Peer messages are dropped.
//   - What it still answers: nothing from its namespaces (no reads either:
//     a replica's state may include records that never reached the disk);
//     only what needs no namespace: PING, INFO (storage_status and
//     storage_error in the synod section), /metrics (synod_storage_failed
//     is 1) and /healthz (503 with the error).
//   - It logs the failure once, with the operation, file and error.
//   - A restart re-reads what is durable (OpenWAL replays the synced frames;
//     the failed frame was cut off) and the protocol's recovery brings the
//     replica up to date, as after a crash.

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/storage"
)

// StorageError is the error of every request to a node whose storage
// failed: the failure of the first Commit that failed.
type StorageError struct {
	Node      automaton.NodeID
	Namespace string // the namespace whose commit failed first
	Err       error
}

// NoSpace reports whether the disk was full.
func (e *StorageError) NoSpace() bool {
	f, ok := storage.AsFailure(e.Err)
	return ok && f.NoSpace()
}

func (e *StorageError) Error() string {
	if e.NoSpace() {
		return fmt.Sprintf("node %s storage full: %v; free space and restart the node", e.Node, e.Err)
	}
	return fmt.Sprintf("node %s storage failed: %v; restart required", e.Node, e.Err)
}

func (e *StorageError) Unwrap() error { return e.Err }

// storageFault is a node's storage failure state.
type storageFault struct {
	once  sync.Once
	err   atomic.Pointer[StorageError]
	ch    chan struct{} // closed on failure
	gauge prometheus.Gauge
}

func (n *Node) initStorageFault() {
	n.sf.ch = make(chan struct{})
	n.sf.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "synod", Name: "storage_failed",
		Help:        "1 once a storage commit failed (this node then acknowledges nothing until restarted), else 0.",
		ConstLabels: prometheus.Labels{"node": string(n.id)}})
	n.m.reg.MustRegister(n.sf.gauge)
}

// StorageErr is the node's storage failure (a *StorageError), or nil while
// its storage works.
func (n *Node) StorageErr() error {
	if e := n.sf.err.Load(); e != nil {
		return e
	}
	return nil
}

// storageFailed puts the node in the failed state: nothing is released any
// more in any namespace, requests are refused, the failure is logged once
// and reported in INFO, /metrics and /healthz.
func (n *Node) storageFailed(ns string, err error) {
	n.sf.once.Do(func() {
		e := &StorageError{Node: n.id, Namespace: ns, Err: err}
		for _, l := range n.loopList() {
			l.failed.Store(true)
		}
		n.sf.err.Store(e)
		n.fatalMu.Lock()
		if n.fatalErr == nil {
			n.fatalErr = fmt.Errorf("namespace %s: storage commit failed: %w", ns, e)
		}
		n.fatalMu.Unlock()
		n.sf.gauge.Set(1)
		close(n.sf.ch)
		n.failCallbacks(n.errStorageUnknown) // replyfn.go: as await's storage-failure case
		n.log.Error("storage failed: acknowledging nothing more and refusing requests until restarted",
			"namespace", ns, "err", err, "no_space", e.NoSpace())
	})
}

// storageInfo adds the storage state to INFO's synod section.
func (n *Node) storageInfo(syn map[string]string) {
	syn["storage_status"] = "ok"
	if e := n.sf.err.Load(); e != nil {
		syn["storage_status"] = "failed"
		if e.NoSpace() {
			syn["storage_status"] = "full"
		}
		syn["storage_error"] = e.Error()
	}
	if w := n.wal.Load(); w != nil {
		// Group commit across namespaces: every namespace's commits and the
		// frames (one write and one fdatasync each) that carried them.
		c, f := w.Writes()
		syn["wal_commits"] = strconv.FormatUint(c, 10)
		syn["wal_frames"] = strconv.FormatUint(f, 10)
	}
}

// withHealth serves /healthz beside h: 200 "ok", or 503 with the storage
// failure.
func (n *Node) withHealth(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := n.StorageErr(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// errStorageUnknown is the error of a request in flight when storage failed.
func (n *Node) errStorageUnknown(id automaton.RequestID) error {
	return fmt.Errorf("request %s: outcome unknown: %w", id, n.StorageErr())
}
