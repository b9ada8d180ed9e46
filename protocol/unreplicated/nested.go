package unreplicated

// nestedRefusal is why unreplicated does not serve nested requests (seed
// 003 §3: the callee answers repeated requests "from a cache"). Decision:
// it cannot keep the nested-call promise under crashes, so a cluster file
// that makes it a callee is refused at configuration.
const nestedRefusal = "it keeps no deduplication table by request id, and none that survives a crash of its server, " +
	"so the copies of one nested call (one per caller replica, and the retries after the server restarts) would each be executed: " +
	"the callee must execute a call once and answer every copy alike; use paxos or pbpaxos"
