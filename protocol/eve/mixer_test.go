package eve

import (
	"reflect"
	"testing"

	"github.com/synod-dev/synod/service"
)

func TestMixer(t *testing.T) {
	w := func(k string) []service.Lock { return []service.Lock{{Key: k, Write: true}} }
	r := func(k string) []service.Lock { return []service.Lock{{Key: k}} }
	for _, tc := range []struct {
		name  string
		keys  [][]service.Lock // nil: undeclared (conflicts with everything)
		known []bool
		want  [][]int
	}{
		{"disjoint writes run together", [][]service.Lock{w("a"), w("b"), w("c")}, nil, [][]int{{0, 1, 2}}},
		{"reads share a key", [][]service.Lock{r("a"), r("a"), r("a")}, nil, [][]int{{0, 1, 2}}},
		// The seed's pass: 1 conflicts with 0 and is skipped, 2 still joins
		// the first batch; the second pass takes 1 and 3, which conflicts
		// with nothing left; 4 conflicts with 3's write of c.
		{"one pass, then the skipped", [][]service.Lock{w("a"), w("a"), w("b"), w("c"), r("c")}, nil, [][]int{{0, 2, 3}, {1, 4}}},
		{"a read conflicts with a write of its key", [][]service.Lock{r("a"), w("a"), r("a")}, nil, [][]int{{0, 2}, {1}}},
		{"three writes of one key: three batches", [][]service.Lock{w("a"), w("a"), w("a"), w("b")}, nil, [][]int{{0, 3}, {1}, {2}}},
		{"undeclared keys run alone", [][]service.Lock{w("a"), nil, w("b"), nil}, []bool{true, false, true, false}, [][]int{{0, 2}, {1}, {3}}},
		{"empty", nil, nil, nil},
	} {
		got := mix(len(tc.keys), func(i int) ([]service.Lock, bool) {
			if tc.known != nil {
				return tc.keys[i], tc.known[i]
			}
			return tc.keys[i], true
		})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: mix = %v, want %v", tc.name, got, tc.want)
		}
	}
}
