package shard

import (
	"strings"
	"testing"
)

// Values from Redis's documentation (CLUSTER KEYSLOT, the cluster
// specification's CRC16 test vector and hash-tag examples).
func TestKeySlotMatchesRedis(t *testing.T) {
	if got := CRC16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("CRC16(123456789) = %#x, want 0x31c3 (the specification's test vector)", got)
	}
	for key, want := range map[string]int{
		"somekey":       11058, // CLUSTER KEYSLOT's documented example
		"foo{hash_tag}": 2515,
		"hash_tag":      2515,
		"foo":           12182,
		"bar":           5061,
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	for _, c := range []struct{ key, part string }{
		{"{user1000}.following", "user1000"},
		{"foo{}{bar}", "foo{}{bar}"}, // empty tag: the whole key
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"{", "{"},
		{"a}b{c", "a}b{c"},
	} {
		if got := HashPart(c.key); got != c.part {
			t.Errorf("HashPart(%q) = %q, want %q", c.key, got, c.part)
		}
	}
	if KeySlot("{user1000}.following") != KeySlot("{user1000}.followers") {
		t.Error("keys with the same hash tag are in different slots")
	}
}

func TestParseSlots(t *testing.T) {
	rs, err := ParseSlots("300-399, 0-99,100,200")
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatSlots(rs); got != "0-100,200,300-399" {
		t.Fatalf("merged = %s", got)
	}
	for _, bad := range []string{"", "1-", "5-4", "16384", "-1", "a", "1,,2"} {
		if _, err := ParseSlots(bad); err == nil {
			t.Errorf("ParseSlots(%q) accepted", bad)
		}
	}
}

func TestEvenCoversEverySlotOnce(t *testing.T) {
	for n := 1; n <= 9; n++ {
		var groups [][]Range
		for _, r := range Even(n) {
			groups = append(groups, []Range{r})
		}
		if err := Check(groups); err != nil {
			t.Fatalf("Even(%d): %v", n, err)
		}
	}
	if got := FormatSlots(merge(Even(7))); got != "0-16383" {
		t.Fatalf("Even(7) merged = %s", got)
	}
	e := Even(3)
	if e[0] != (Range{0, 5460}) || e[1] != (Range{5461, 10922}) || e[2] != (Range{10923, 16383}) {
		t.Fatalf("Even(3) = %v, want redis-cli's 0-5460, 5461-10922, 10923-16383", e)
	}
}

// The invariant's broken variants: a hole and an overlap are reported.
func TestCheckCatchesHolesAndOverlaps(t *testing.T) {
	hole := [][]Range{{{0, 100}}, {{102, Slots - 1}}}
	if err := Check(hole); err == nil || !strings.Contains(err.Error(), "slots 101 are owned by no group") {
		t.Fatalf("hole: %v", err)
	}
	overlap := [][]Range{{{0, 8192}}, {{8192, Slots - 1}}}
	if err := Check(overlap); err == nil || !strings.Contains(err.Error(), "slot 8192 is owned by groups 0 and 1") {
		t.Fatalf("overlap: %v", err)
	}
}

func TestMapRanges(t *testing.T) {
	m := Build([][]Range{{{0, 10}, {20, Slots - 1}}, {{11, 19}}})
	got := m.Ranges()
	if len(got) != 3 || got[0].Group != 0 || got[1] != (OwnedRange{Range{11, 19}, 1}) || got[2].Last != Slots-1 {
		t.Fatalf("ranges = %v", got)
	}
	if m.Group("foo") != 0 || int(m.Owner[KeySlot("foo")]) != 0 {
		t.Fatal("foo's group")
	}
}
