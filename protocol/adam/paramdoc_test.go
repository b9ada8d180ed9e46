package adam

import (
	"os"
	"testing"
)

// TestParamDoc: the package doc's parameter table is the parser's.
func TestParamDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := params.CheckDoc(string(src)); err != nil {
		t.Fatal(err)
	}
}
