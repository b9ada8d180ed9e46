// Package eve is execute-verify replication (seed 003 §2.2, Eve: Kapritsos
// et al., OSDI 2012).
package eve
