// Package explore is Synod's web explorer (issue 20): a local HTTP server
// on 127.0.0.1 serving one page that shows a run of a protocol's model
// (package mc) state by state: the nodes and their readable state
// (harness.Dumper), their timers and records, the messages in flight, the
// clients' history with the checker's verdict (and Porcupine's
// visualisation for linearizable protocols), and the events enabled next.
// A user picks the next event by hand, as in Stateright's Explorer, or
// loads a counterexample saved by `synod-lab mc --out` and steps
// forward and back through it.
package explore

import (
	"embed"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/synod-dev/synod/mc"
)

//go:embed page.html
var page embed.FS

// Server serves one trace.
type Server struct {
	mu  sync.Mutex
	t   *mc.Trace
	pos int
	dir string
}

// New explores t from its initial state (pos 0).
func New(t *mc.Trace) (*Server, error) {
	dir, err := os.MkdirTemp("", "synod-explore-")
	if err != nil {
		return nil, err
	}
	return &Server{t: t, dir: dir}, nil
}

// Seek moves the explorer to after the trace's first pos events (the hand-
// driven explorer of a model with a scripted prefix starts after it).
func (s *Server) Seek(pos int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos = max(0, min(pos, len(s.t.Events)))
}

// Close removes the server's temporary files.
func (s *Server) Close() error { return os.RemoveAll(s.dir) }

// Listen serves on addr (host must be loopback) until the listener fails;
// it returns the listener so that callers know the port.
func (s *Server) Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("explore: %s is not a loopback address", addr)
	}
	return net.Listen("tcp", addr)
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := page.ReadFile("page.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	})
	mux.HandleFunc("GET /api/state", s.state)
	mux.HandleFunc("POST /api/choose", s.choose)
	mux.HandleFunc("POST /api/goto", s.jump)
	mux.HandleFunc("GET /porcupine", s.porcupine)
	return mux
}

func (s *Server) view() (*mc.View, error) { return s.t.ViewAt(s.pos) }

func (s *Server) writeState(w http.ResponseWriter) {
	v, err := s.view()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) state(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeState(w)
}

// choose applies enabled event ?i=k at the current position.
func (s *Server) choose(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := strconv.Atoi(r.URL.Query().Get("i"))
	if err != nil {
		http.Error(w, "bad i", http.StatusBadRequest)
		return
	}
	v, err := s.view()
	if err == nil {
		err = s.t.Choose(v, k)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.pos++
	s.writeState(w)
}

// jump moves to position ?pos=n of the trace (back and forward).
func (s *Server) jump(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := strconv.Atoi(r.URL.Query().Get("pos"))
	if err != nil {
		http.Error(w, "bad pos", http.StatusBadRequest)
		return
	}
	s.pos = max(0, min(n, len(s.t.Events)))
	s.writeState(w)
}

func (s *Server) porcupine(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	v, err := s.view()
	var p string
	if err == nil {
		p, err = v.PorcupineHTML(s.dir)
	}
	s.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if p == "" {
		http.Error(w, "this protocol's histories are not judged by Porcupine", http.StatusNotFound)
		return
	}
	http.ServeFile(w, r, p)
}
