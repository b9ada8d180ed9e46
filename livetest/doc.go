// Package livetest holds Synod's live end-to-end tests: real `synod node`
// processes on 127.0.0.1, started with package cluster, killed with kill -9 and
// restarted under load, fed hostile bytes, and judged by package check.
//
// The tests build the synod binary once (TestMain) from the module root, bound
// every operation and every test in time, and always stop their cluster
// (cluster.Down) in t.Cleanup. When a history is not linearizable the test
// saves it, with Porcupine's HTML view, under a directory it names in the
// failure message, so that `synod check FILE` can replay the verdict.
package livetest
