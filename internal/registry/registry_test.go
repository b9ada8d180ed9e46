package registry

import (
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[int]("widget")
	r.Register("b", 2)
	r.Register("a", 1)
	if v, err := r.Lookup("b"); err != nil || v != 2 {
		t.Fatalf("Lookup(b) = %v, %v", v, err)
	}
	_, err := r.Lookup("zz")
	if err == nil || !strings.Contains(err.Error(), `unknown widget "zz"`) || !strings.Contains(err.Error(), "[a b]") {
		t.Fatalf("unknown name error %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration did not panic")
		}
	}()
	r.Register("a", 3)
}
