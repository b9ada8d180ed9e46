package lab

import "testing"

func TestParseSymmetry(t *testing.T) {
	for _, c := range []struct {
		in             string
		nodes, clients bool
		bad            bool
	}{
		{"none", false, false, false},
		{"nodes", true, false, false},
		{"clients", false, true, false},
		{"nodes,clients", true, true, false},
		{"clients, nodes", true, true, false},
		{"node", false, false, true},
		{"nodes,client", false, false, true},
		{"none,nodes", false, false, true},
	} {
		n, cl, err := parseSymmetry(c.in)
		if (err != nil) != c.bad || n != c.nodes || cl != c.clients {
			t.Errorf("parseSymmetry(%q) = %v, %v, %v", c.in, n, cl, err)
		}
	}
}
