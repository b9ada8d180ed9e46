package certs

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"testing"
)

// FuzzParsePasswordHash parses a users[].password field of the cluster
// file. Whatever the text: no panic; a hash that parses has at least
// MinIterations, a salt of at least 8 bytes and a 32-byte key, and written
// back in the canonical form it parses to the same hash.
func FuzzParsePasswordHash(f *testing.F) {
	h, err := HashPasswordCost("pw", MinIterations)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(h)
	f.Add("pbkdf2-sha256$99999999999$AAAAAAAAAAA$AAAA")
	f.Add("pbkdf2-sha256$10000$$")
	f.Add("pbkdf2-sha256$+10000$AAAAAAAAAAA$" + base64.RawStdEncoding.EncodeToString(make([]byte, 32)))
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePasswordHash(s)
		if err != nil {
			return
		}
		if p.Iterations < MinIterations || len(p.Salt) < 8 || len(p.Key) != 32 {
			t.Fatalf("%q parsed to %d iterations, salt %x, key %x", s, p.Iterations, p.Salt, p.Key)
		}
		b64 := base64.RawStdEncoding.EncodeToString
		again, err := ParsePasswordHash(fmt.Sprintf("%s$%d$%s$%s", PasswordScheme, p.Iterations, b64(p.Salt), b64(p.Key)))
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("%q: written back parses to %v %v, first %v", s, again, err, p)
		}
	})
}
