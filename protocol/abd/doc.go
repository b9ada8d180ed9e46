// Package abd is multi-writer ABD (placeholder; implementation in progress).
package abd
