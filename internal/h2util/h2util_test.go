package h2util

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

type call struct {
	name string
	e    Entry
	mu   *sync.Mutex
	got  *[]string
}

func (c *call) Expire() {
	c.mu.Lock()
	*c.got = append(*c.got, c.name)
	c.mu.Unlock()
}

// A Queue expires its calls in deadline order, whatever order they were
// added in, arming its one timer earlier when an earlier deadline comes
// (the call due in 60 ms added behind one due in an hour); a call removed
// before its deadline never expires, one that expired cannot be removed.
func TestQueue(t *testing.T) {
	var q Queue
	var mu sync.Mutex
	var got []string
	mk := func(name string) *call { return &call{name: name, mu: &mu, got: &got} }
	now := time.Now()
	late, removed := mk("late"), mk("removed")
	q.Add(&late.e, now.Add(time.Hour), late)
	calls := map[string]time.Duration{"c": 180 * time.Millisecond, "a": 60 * time.Millisecond, "b": 120 * time.Millisecond}
	for _, name := range []string{"c", "a", "b"} {
		c := mk(name)
		q.Add(&c.e, now.Add(calls[name]), c)
	}
	q.Add(&removed.e, now.Add(90*time.Millisecond), removed)
	if !q.Remove(&removed.e) || q.Remove(&removed.e) {
		t.Fatal("Remove of a queued call: want true once")
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s, expired %v; want a, b, c", got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("expired %v, want [a b c]", got)
	}
	if q.Len() != 1 || !q.Remove(&late.e) || q.Len() != 0 {
		t.Fatal("the late call is not queued alone")
	}
	q.Stop()
}

// HeadersFragment takes padding and priority off a HEADERS payload with
// x/net's checks.
func TestHeadersFragment(t *testing.T) {
	block := []byte("block")
	fh := func(f http2.Flags, sid uint32) http2.FrameHeader {
		return http2.FrameHeader{Type: http2.FrameHeaders, Flags: f, StreamID: sid}
	}
	cases := []struct {
		fh   http2.FrameHeader
		p    []byte
		want []byte
		err  bool
	}{
		{fh(http2.FlagHeadersEndHeaders, 1), block, block, false},
		{fh(http2.FlagHeadersPadded, 1), append(append([]byte{3}, block...), 0, 0, 0), block, false},
		{fh(http2.FlagHeadersPriority, 1), append([]byte{0, 0, 0, 3, 16}, block...), block, false},
		{fh(http2.FlagHeadersPadded|http2.FlagHeadersPriority, 1), append(append([]byte{1, 0, 0, 0, 3, 16}, block...), 0), block, false},
		{fh(0, 0), block, nil, true},
		{fh(http2.FlagHeadersPadded, 1), nil, nil, true},
		{fh(http2.FlagHeadersPriority, 1), []byte{0, 0}, nil, true},
		{fh(http2.FlagHeadersPadded, 1), []byte{9, 1, 2}, nil, true},
	}
	for i, c := range cases {
		got, err := HeadersFragment(c.fh, c.p)
		if (err != nil) != c.err || !bytes.Equal(got, c.want) {
			t.Errorf("case %d: %q, %v; want %q, error %v", i, got, err, c.want, c.err)
		}
		var ce http2.ConnectionError
		if err != nil && !errors.As(err, &ce) && !errors.Is(err, ErrFrameTooShort) {
			t.Errorf("case %d: error %v is neither a connection error nor ErrFrameTooShort", i, err)
		}
	}
}
