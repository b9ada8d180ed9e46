package trace

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/synod-dev/synod/model/fastpaxos"
)

func TestRecordAndReadBack(t *testing.T) {
	for _, mode := range []string{ModeNWS, ModeRTT} {
		s, err := Record(context.Background(), Options{Samples: 50, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 50 {
			t.Fatalf("%s: %d samples", mode, len(s))
		}
		for _, v := range s {
			if !(v > 0) {
				t.Fatalf("%s: latency %v", mode, v)
			}
		}
		var b bytes.Buffer
		if err := Write(&b, []string{"mode " + mode}, s); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(b.String(), "# mode "+mode+"\n") {
			t.Fatalf("header: %q", b.String()[:20])
		}
		back, err := fastpaxos.ReadTrace(&b)
		if err != nil || len(back) != 50 {
			t.Fatalf("read back: %d, %v", len(back), err)
		}
	}
	if _, err := Record(context.Background(), Options{Samples: 1, Mode: "ping"}); err == nil {
		t.Error("unknown mode accepted")
	}
}
