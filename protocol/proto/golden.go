package proto

import (
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Encoded is one named encoding in a wire-compatibility check: a message or
// a record as a protocol's encoder produced it.
type Encoded struct {
	Name  string
	Bytes []byte
}

// CheckGolden compares encodings against the golden file at path (lines
// "name hex", recorded from an earlier version of the encoders), so that a
// refactoring of a codec can prove it left the bytes on the wire and on disk
// unchanged. With update it writes the file instead. Every golden line must
// have an encoding and every encoding a golden line.
func CheckGolden(path string, cases []Encoded, update bool) error {
	if update {
		var b strings.Builder
		for _, c := range cases {
			fmt.Fprintf(&b, "%s %x\n", c.Name, c.Bytes)
		}
		return os.WriteFile(path, []byte(b.String()), 0o644)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		name, hx, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("%s:%d: want \"name hex\"", path, i+1)
		}
		if _, err := hex.DecodeString(hx); err != nil {
			return fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		want[name] = hx
	}
	var errs []string
	for _, c := range cases {
		w, ok := want[c.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s: no golden bytes", c.Name))
		case w != hex.EncodeToString(c.Bytes):
			errs = append(errs, fmt.Sprintf("%s: encodes to %x, golden %s", c.Name, c.Bytes, w))
		}
		delete(want, c.Name)
	}
	for name := range want {
		errs = append(errs, fmt.Sprintf("%s: golden bytes but no encoding", name))
	}
	sort.Strings(errs)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}
