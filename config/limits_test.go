package config

import (
	"strings"
	"testing"
)

func TestLimits(t *testing.T) {
	c, err := Parse([]byte(good + "limits: {max_clients: 1000, client_output_buffer_limit: 64mb, proto_max_bulk_len: 1mb, max_pipeline: 100}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Limits.WithDefaults()
	want := Limits{MaxClients: 1000, ClientOutputBufferLimit: 64 << 20, ProtoMaxBulkLen: 1 << 20, MaxPipeline: 100}
	if got != want {
		t.Errorf("limits = %+v, want %+v", got, want)
	}
	c, err = Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Limits.WithDefaults(); got.MaxClients != DefaultMaxClients || got.ClientOutputBufferLimit != DefaultOutputBufferLimit ||
		got.ProtoMaxBulkLen != MaxProtoBulkLen || got.MaxPipeline != DefaultMaxPipeline {
		t.Errorf("defaults = %+v", got)
	}
	for _, tc := range []struct{ limits, want string }{
		{"{max_clients: -1}", "limits.max_clients: -1 must be 1-1048576"},
		{"{client_output_buffer_limit: 1kb}", "limits.client_output_buffer_limit: 1024 must be at least 16kb"},
		{"{proto_max_bulk_len: 1gb}", "limits.proto_max_bulk_len: 1073741824 must be 1024-8389632 bytes"},
		{"{max_pipeline: 2000000}", "limits.max_pipeline: 2000000 must be 1-1048576"},
		{"{client_output_buffer_limit: lots}", `"lots" is not a size`},
		{"{maxclients: 5}", "field maxclients not found"},
	} {
		_, err := Parse([]byte(good + "limits: " + tc.limits + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("limits %s: got %v, want an error containing %q", tc.limits, err, tc.want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"0": 0, "100": 100, "1k": 1000, "1kb": 1024, "2MB": 2 << 20, "3m": 3000000, "1gb": 1 << 30, "7b": 7} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1tb", "k", "1.5mb"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", in)
		}
	}
}
