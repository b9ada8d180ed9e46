//go:build !unix

package gateway

import "syscall"

// directWrites: no direct writes here; every reply goes through the writer.
const directWrites = false

type directWriter struct{}

func newDirectWriter(syscall.RawConn) *directWriter { return nil }

func (d *directWriter) writeNow([]byte) int { return 0 }
