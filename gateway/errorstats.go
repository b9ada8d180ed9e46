package gateway

import (
	"maps"
	"strconv"
	"sync"

	"github.com/synod-dev/synod/synoderr"
)

// Error statistics, as Redis's INFO errorstats: every error reply the RESP
// server writes (at top level or inside EXEC's array) is counted by its
// code, the reply's first word ("ERR", "WRONGTYPE", "TRYAGAIN", "NOAUTH",
// "EXECABORT", ...). INFO errorstats lists them as errorstat_<code>:count=n,
// INFO stats as total_error_replies, and Server.ErrorStats gives them to
// the node's metrics (synod_errors_total{kind}). Codes come from Synod's own
// replies and from protocol errors, whose code is their first upper-case
// word, else ERR (synoderr.Parse); past maxErrorKinds distinct codes the
// rest count as "OTHER", so a protocol inventing codes cannot grow the
// table without bound.

// maxErrorKinds bounds the distinct codes counted.
const maxErrorKinds = 128

type errorStats struct {
	mu   sync.Mutex
	m    map[string]int64
	base map[string]int64 // the counts at the last CONFIG RESETSTAT (INFO subtracts them)
}

// add counts one error reply msg.
func (e *errorStats) add(msg string) { e.addCode(synoderr.Parse(msg).Code()) }

// addCode counts one error reply whose code is code.
func (e *errorStats) addCode(code string) {
	e.mu.Lock()
	if e.m == nil {
		e.m = map[string]int64{}
	}
	if _, ok := e.m[code]; !ok && len(e.m) >= maxErrorKinds {
		code = "OTHER"
	}
	e.m[code]++
	e.mu.Unlock()
}

// snapshot returns the counts by code and their total.
func (e *errorStats) snapshot() (map[string]int64, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var total int64
	for _, n := range e.m {
		total += n
	}
	return maps.Clone(e.m), total
}

// reset makes INFO count from now (CONFIG RESETSTAT); the node's metrics
// (ErrorStats) keep counting from the start, as counters must.
func (e *errorStats) reset() {
	e.mu.Lock()
	e.base = maps.Clone(e.m)
	e.mu.Unlock()
}

// sinceReset returns the counts by code since the last reset and their total.
func (e *errorStats) sinceReset() (map[string]int64, int64) {
	m, _ := e.snapshot()
	e.mu.Lock()
	defer e.mu.Unlock()
	var total int64
	for code, n := range m {
		if n -= e.base[code]; n > 0 {
			m[code] = n
			total += n
		} else {
			delete(m, code)
		}
	}
	return m, total
}

// ErrorStats returns how many error replies the server wrote, by code.
func (s *Server) ErrorStats() map[string]int64 {
	m, _ := s.errs.snapshot()
	if m == nil {
		m = map[string]int64{}
	}
	return m
}

// errorInfo is INFO's Errorstats section and the total for its Stats.
func (s *Server) errorInfo() (map[string]string, string) {
	m, total := s.errs.sinceReset()
	out := make(map[string]string, len(m))
	for code, n := range m {
		out["errorstat_"+code] = "count=" + strconv.FormatInt(n, 10)
	}
	return out, strconv.FormatInt(total, 10)
}

// writeError writes the error reply msg and counts it.
func (c *conn) writeError(msg string) {
	c.s.errs.add(msg)
	c.errReplies++
	c.w.WriteError(msg)
}

// countedErr leads the text of an error reply already counted where it
// arose (a script's reply made of a command's error, script.go
// scriptReports): writeResult writes it without counting its code again;
// the command still counts as failed.
const countedErr = "\x00counted:"

// writeCountedError writes the error reply msg, already counted by its code.
func (c *conn) writeCountedError(msg string) {
	c.errReplies++
	c.w.WriteError(msg)
}
