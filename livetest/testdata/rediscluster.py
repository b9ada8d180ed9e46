"""redis-py's RedisCluster against a sharded Synod namespace (livetest/shard_test.go).

Usage: rediscluster.py HOST PORT SECONDS

Writes keys py-0, py-1, ... (spread over every slot) for SECONDS, printing
each acknowledged write as "KEY VALUE" on stdout; a write that raised is of
unknown outcome and is not printed. Then reads every acknowledged key back
through the cluster client and prints "lost KEY" for any that does not hold
its value, and finally "summary WRITES ERRORS" on stderr.
"""
import sys
import time

from redis.cluster import ClusterNode, RedisCluster

host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rc = RedisCluster(startup_nodes=[ClusterNode(host, port)], socket_timeout=3)
acked = {}
errors = 0
end = time.time() + seconds
i = 0
while time.time() < end:
    k, v = f"py-{i}", f"v{i}"
    i += 1
    try:
        if rc.set(k, v):
            acked[k] = v
            print(k, v, flush=True)
    except Exception as e:  # unknown outcome
        errors += 1
        print("error", type(e).__name__, e, file=sys.stderr, flush=True)
        time.sleep(0.05)
for k, v in acked.items():
    for attempt in range(20):
        try:
            got = rc.get(k)
            break
        except Exception as e:
            print("read error", k, type(e).__name__, e, file=sys.stderr, flush=True)
            time.sleep(0.25)
    else:
        got = None
    if got is None or got.decode() != v:
        print("lost", k, flush=True)
print("summary", len(acked), errors, file=sys.stderr, flush=True)
