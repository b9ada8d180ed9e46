package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIndex(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	for id, body := range map[string]string{
		"GO-2026-0001": `{"id":"GO-2026-0001","modified":"2026-01-02T00:00:00Z","aliases":["CVE-1"],"affected":[{"package":{"name":"example.com/a"}},{"package":{"name":"example.com/a"}},{"package":{"name":"stdlib"}}]}`,
		"GO-2026-0002": `{"id":"GO-2026-0002","modified":"2026-03-04T00:00:00Z","affected":[{"package":{"name":"example.com/a"}}]}`,
	} {
		if err := os.WriteFile(filepath.Join(src, id+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := index(src, out)
	if err != nil || n != 2 {
		t.Fatalf("index: %d %v", n, err)
	}
	var mods []module
	b, _ := os.ReadFile(filepath.Join(out, "index", "modules.json"))
	if err := json.Unmarshal(b, &mods); err != nil {
		t.Fatal(err)
	}
	if len(mods) != 2 || mods[0].Path != "example.com/a" || len(mods[0].Vulns) != 2 || mods[1].Path != "stdlib" || len(mods[1].Vulns) != 1 {
		t.Fatalf("modules.json: %s", b)
	}
	b, _ = os.ReadFile(filepath.Join(out, "index", "db.json"))
	if !strings.Contains(string(b), "2026-03-04") {
		t.Fatalf("db.json names not the newest modification: %s", b)
	}
	if _, err := os.Stat(filepath.Join(out, "ID", "GO-2026-0002.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := index(t.TempDir(), out); err == nil {
		t.Fatal("an empty OSV directory was indexed")
	}
}

func TestPolicy(t *testing.T) {
	const (
		uncalled = `{"finding":{"osv":"GO-1","trace":[{"module":"example.com/a","version":"v1.0.0","package":"example.com/a"}]}}`
		std      = `{"finding":{"osv":"GO-2","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Get"}]}}`
		mod      = `{"finding":{"osv":"GO-3","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.0.0","package":"example.com/a","function":"F"}]}}`
	)
	for _, c := range []struct {
		in     string
		strict bool
		fail   bool
		says   string
	}{
		{`{"config":{}}` + uncalled, false, false, "0 called vulnerabilities in required modules, 0"},
		{uncalled + std + std, false, false, "0 called vulnerabilities in required modules, 1 in the standard library"},
		{std, true, true, "fixed in Go 1.26.9"},
		{uncalled + mod + std, false, true, "go get example.com/a@v1.2.0"},
	} {
		var w strings.Builder
		fail, err := policy(strings.NewReader(c.in), &w, c.strict)
		if err != nil || fail != c.fail || !strings.Contains(w.String(), c.says) {
			t.Errorf("policy(%s, strict %v) = %v %v:\n%s\nwant fail %v, saying %q", c.in, c.strict, fail, err, w.String(), c.fail, c.says)
		}
	}
	if _, err := policy(strings.NewReader("{"), &strings.Builder{}, false); err == nil {
		t.Error("a truncated stream was accepted")
	}
}
