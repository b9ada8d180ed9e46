package automaton

import "math/rand"

// ModelRand returns a small random source for a model-checker copy of an
// automaton (ModelStater.CloneModel). A copy must not share its parent's
// Config.Rand: the model checker expands one parent on both workers at
// once, and two copies drawing from one *rand.Rand race and make the
// search's draws depend on the schedule. The model checker's fingerprint
// leaves the random source's position out (mc/reflect.go: protocols draw
// from it for timer durations, which the model's timers ignore, and for
// values fixed per boot), so a copy may restart a source of its own from
// a seed fixed per node; the source is two words, cheap to make per copy.
func ModelRand(seed uint64) *rand.Rand { return rand.New(&splitMix{s: seed}) }

// splitMix is SplitMix64 (Steele, Lea and Flood 2014) as a rand.Source64.
type splitMix struct{ s uint64 }

func (m *splitMix) Seed(s int64) { m.s = uint64(s) }

func (m *splitMix) Uint64() uint64 {
	m.s += 0x9e3779b97f4a7c15
	z := m.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (m *splitMix) Int63() int64 { return int64(m.Uint64() >> 1) }
