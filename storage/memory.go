package storage

import (
	"fmt"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// Memory is the in-memory engine for durability "memory": nothing touches the
// disk, and everything is lost when the process exits (or when a new Memory is
// created). Records survive closing and reopening a namespace on the same
// Memory value, which lets tests restart an automaton without restarting the
// engine.
type Memory struct {
	mu     sync.Mutex
	data   map[string]map[string][]byte
	open   map[string]bool
	closed bool
}

// NewMemory returns an empty in-memory engine.
func NewMemory() *Memory {
	return &Memory{data: map[string]map[string][]byte{}, open: map[string]bool{}}
}

// Durability implements Engine.
func (m *Memory) Durability() string { return config.Memory }

// Namespace implements Engine.
func (m *Memory) Namespace(name string) (Store, error) {
	if err := checkNamespace(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.open[name] {
		return nil, fmt.Errorf("storage: namespace %q is already open", name)
	}
	m.open[name] = true
	if m.data[name] == nil {
		m.data[name] = map[string][]byte{}
	}
	return &memStore{m: m, name: name}, nil
}

// Close implements Engine.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.data = nil
	return nil
}

type memStore struct {
	m      *Memory
	name   string
	closed bool // guarded by m.mu
}

func (s *memStore) Load() (map[string][]byte, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.closed || s.m.closed {
		return nil, ErrClosed
	}
	out := make(map[string][]byte, len(s.m.data[s.name]))
	for k, v := range s.m.data[s.name] {
		out[k] = append([]byte{}, v...)
	}
	return out, nil
}

func (s *memStore) Commit(batch []automaton.Persist) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.closed || s.m.closed {
		return ErrClosed
	}
	d := s.m.data[s.name]
	for _, r := range batch {
		if r.Delete {
			delete(d, r.Key)
			continue
		}
		// A record held with a value of the same length (a register's
		// next store, usually) is rewritten in place: no allocation, one
		// map lookup. The engine's copies are its own (Load copies them
		// out), so nothing else sees the change.
		if v, ok := d[r.Key]; ok && v != nil && len(v) == len(r.Value) {
			copy(v, r.Value)
			continue
		}
		d[r.Key] = append([]byte{}, r.Value...)
	}
	return nil
}

func (s *memStore) Close() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if !s.closed {
		s.closed = true
		delete(s.m.open, s.name)
	}
	return nil
}
