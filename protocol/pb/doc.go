// Package pb is primary-backup replication (seed 002, chapter III).
package pb
