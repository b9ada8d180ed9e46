package experiment

import "testing"

// A label every plotted series shares names the "ours" source once; one
// that differs between series follows each series' name (the durability
// experiments' "state fsync" label was taken from the first cell for all).
func TestLegendLabelsSplitSharedFromOwn(t *testing.T) {
	mk := func(name string, labels ...string) [2]*series {
		return [2]*series{{name: name, labels: labels}, {name: name, seed: true}}
	}
	byName := map[string][2]*series{
		"pb":     mk("pb", "3 nodes", "- (no database)"),
		"db":     mk("db", "3 nodes", "fsync on"),
		"absent": {{name: "absent"}, {name: "absent", seed: true}}, // no measured cell
	}
	label, own := legendLabels([]string{"pb", "db", "absent"}, byName, 2)
	if label != OursLabel+", 3 nodes" {
		t.Errorf("ours label %q, want the shared label only", label)
	}
	if own["pb"] != "[- (no database)]" || own["db"] != "[fsync on]" {
		t.Errorf("own labels %q", own)
	}
	if _, ok := own["absent"]; ok {
		t.Errorf("a series with no measured cell got labels: %q", own["absent"])
	}
}
