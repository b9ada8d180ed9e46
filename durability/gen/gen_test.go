package gen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/gen"
)

// The committed generated proxies are what the generator emits now: the
// examples cannot drift from the compiler (go generate, or synod
// durability gen, rewrites them).
func TestExamplesUpToDate(t *testing.T) {
	for _, c := range []struct {
		dir, mapping string
		objects      []string
	}{
		{"../examples/counter", "db.yaml", []string{"Counter"}},
		{"../examples/matchmaker", "pbdb.yaml", []string{"MachineQueue", "AccountSet"}},
	} {
		m, err := durability.LoadMapping(filepath.Join(c.dir, c.mapping))
		if err != nil {
			t.Fatal(err)
		}
		o := gen.Options{Dir: c.dir, Objects: c.objects, Service: "Service", Mapping: m}
		src, err := gen.Generate(o)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := os.ReadFile(filepath.Join(c.dir, gen.DefaultOutput))
		if err != nil {
			t.Fatal(err)
		}
		if string(cur) != string(src) {
			t.Errorf("%s/%s is stale: run go generate ./durability/examples/...", c.dir, gen.DefaultOutput)
		}
	}
}

func TestGeneratorRefuses(t *testing.T) {
	cases := []struct{ src, want string }{
		{"type T struct{}\nfunc (t *T) Set(int64) {}\ntype S struct{ X TAPI }\n", "T.Set: parameter 0 has no name"},
		{"type T struct{}\nfunc (t *T) Set(v map[string]int) {}\ntype S struct{ X TAPI }\n", "T.Set: parameter v has type map[string]int"},
		{"type T struct{}\nfunc (t *T) Set(v int) {}\ntype S struct{ Y int }\n", "S: no field of type TAPI"},
		{"type T struct{}\nfunc (t *T) Set(v int) {}\ntype S struct{ X, Y TAPI }\n", "fields X and Y both hold a T"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "t.go"), []byte("package p\n"+c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := gen.Generate(gen.Options{Dir: dir, Objects: []string{"T"}, Service: "S"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
	// A mapping that does not fit the code is refused at generation.
	m, _ := durability.ParseMapping([]byte("objects:\n  Counter: {mechanism: database, recover: [{query: SELECT 1, call: SetValue}]}\n"))
	_, err := gen.Generate(gen.Options{Dir: "../examples/counter", Objects: []string{"Counter"}, Service: "Service", Mapping: m})
	if err == nil || !strings.Contains(err.Error(), "objects.Counter.methods.SetValue: missing") {
		t.Fatalf("error %v", err)
	}
}
