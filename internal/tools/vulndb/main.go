// Command vulndb lets scripts/test run govulncheck where only the Go module
// proxy is reachable (CI, and this project's build machines: vuln.go.dev is
// not). It has two subcommands:
//
//	vulndb index -osv DIR -out DIR
//
// builds a v1 Go vulnerability database (the layout govulncheck -db
// file://DIR reads: index/db.json, index/modules.json, index/vulns.json,
// ID/<id>.json) from a directory of OSV entries, the data/osv directory of
// the module golang.org/x/vulndb, which the proxy serves. modules.json
// leaves out the "fixed" hint, so govulncheck reads every entry of a
// module in use and decides from its ranges. (golang.org/x/vulndb's own
// cmd/indexdb does the same but builds with that module's dependencies,
// minutes of downloads in a fresh CI machine.)
//
//	govulncheck -format json ./... | vulndb policy
//
// prints each vulnerability that the code calls (a finding whose trace
// names a function) and exits 1 if one of them is in a required module
// (fixed by a go.mod upgrade). One in the standard library is printed as a
// warning naming the Go release that fixes it, and fails only with
// -strict-stdlib: it depends on the Go toolchain the tests run with, not on
// the repository. scripts/test passes -strict-stdlib, since go.mod's
// toolchain line (with GOTOOLCHAIN=auto) names that toolchain.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: vulndb index -osv DIR -out DIR | vulndb policy [-strict-stdlib] < govulncheck.json")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "index":
		fs := flag.NewFlagSet("index", flag.ExitOnError)
		src := fs.String("osv", "", "directory of OSV JSON entries (golang.org/x/vulndb's data/osv)")
		out := fs.String("out", "", "directory to write the database to")
		fs.Parse(os.Args[2:])
		if *src == "" || *out == "" {
			err = errors.New("index needs -osv and -out")
			break
		}
		var n int
		n, err = index(*src, *out)
		if err == nil {
			fmt.Printf("vulndb: %d entries indexed into %s\n", n, *out)
		}
	case "policy":
		fs := flag.NewFlagSet("policy", flag.ExitOnError)
		strict := fs.Bool("strict-stdlib", false, "fail on called vulnerabilities in the standard library too")
		fs.Parse(os.Args[2:])
		var failed bool
		failed, err = policy(os.Stdin, os.Stdout, *strict)
		if err == nil && failed {
			os.Exit(1)
		}
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(2)
	}
}

// entry is the part of an OSV entry the index needs.
type entry struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
	} `json:"affected"`
}

type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
}

type module struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type vuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
}

// index writes the database for the entries in src to out and returns how
// many it holds.
func index(src, out string) (int, error) {
	files, err := filepath.Glob(filepath.Join(src, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OSV entries (*.json) in %s", src)
	}
	if err := os.MkdirAll(filepath.Join(out, "ID"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(out, "index"), 0o755); err != nil {
		return 0, err
	}
	mods := map[string]*module{}
	var vulns []vuln
	var newest time.Time
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if e.ID == "" || strings.ContainsAny(e.ID, `/\`) {
			return 0, fmt.Errorf("%s: bad id %q", f, e.ID)
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), raw, 0o644); err != nil {
			return 0, err
		}
		vulns = append(vulns, vuln{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		if e.Modified.After(newest) {
			newest = e.Modified
		}
		seen := map[string]bool{}
		for _, a := range e.Affected {
			p := a.Package.Name
			if p == "" || seen[p] {
				continue
			}
			seen[p] = true
			m := mods[p]
			if m == nil {
				m = &module{Path: p}
				mods[p] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified})
		}
	}
	ms := make([]*module, 0, len(mods))
	for _, m := range mods {
		sort.Slice(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Path < ms[j].Path })
	sort.Slice(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })
	for name, v := range map[string]any{
		"db.json": struct {
			Modified time.Time `json:"modified"`
		}{newest},
		"modules.json": ms,
		"vulns.json":   vulns,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(out, "index", name), b, 0o644); err != nil {
			return 0, err
		}
	}
	return len(files), nil
}

// message is one object of govulncheck's JSON stream (the parts policy
// reads).
type message struct {
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
		} `json:"trace"`
	} `json:"finding"`
}

// policy reads govulncheck's JSON stream from r, reports every called
// vulnerability to w, and says whether the run fails.
func policy(r io.Reader, w io.Writer, strictStdlib bool) (failed bool, err error) {
	dec := json.NewDecoder(r)
	seen := map[string]bool{}
	var mods, std int
	for {
		var m message
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return false, fmt.Errorf("reading govulncheck -format json: %w", err)
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 || f.Trace[0].Function == "" || seen[f.OSV] {
			continue // not called (package or module level only), or already reported
		}
		seen[f.OSV] = true
		t := f.Trace[0]
		fixed := f.FixedVersion
		if fixed == "" {
			fixed = "no fixed version"
		}
		if t.Module == "stdlib" {
			std++
			fmt.Fprintf(w, "standard library: %s in %s@%s (called: %s.%s); fixed in Go %s: upgrade the Go toolchain\n",
				f.OSV, t.Package, t.Version, t.Package, t.Function, strings.TrimPrefix(fixed, "v"))
			continue
		}
		mods++
		fmt.Fprintf(w, "module: %s in %s@%s (called: %s.%s); fixed in %s: go get %s@%s\n",
			f.OSV, t.Module, t.Version, t.Package, t.Function, fixed, t.Module, fixed)
	}
	fmt.Fprintf(w, "vulndb policy: %d called vulnerabilities in required modules, %d in the standard library%s\n",
		mods, std, map[bool]string{true: " (failing: -strict-stdlib)", false: " (warnings: they depend on the Go toolchain, not on go.mod)"}[strictStdlib])
	return mods > 0 || (strictStdlib && std > 0), nil
}
