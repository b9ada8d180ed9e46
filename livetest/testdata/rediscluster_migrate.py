"""redis-py's RedisCluster through a slot migration (livetest/migrate_test.go).

Usage: rediscluster_migrate.py HOST PORT SECONDS FIRST_SLOT LAST_SLOT NKEYS

Picks NKEYS keys py-m-0, py-m-1, ... whose hash slot is in FIRST_SLOT..LAST_SLOT
(the migrated range) and, for SECONDS, writes each in turn with an increasing
counter and reads it back. A read older than the write acknowledged just before
it prints "stale KEY GOT WANT". A write that raised is of unknown outcome. At the
end every key is read back: "lost KEY GOT WANT" when it holds less than its last
acknowledged write. Finally "summary WRITES READS ERRORS" on stderr.
"""
import sys
import time

from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
lo, hi, nkeys = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
keys = []
i = 0
while len(keys) < nkeys:
    k = f"py-m-{i}"
    i += 1
    if lo <= key_slot(k.encode()) <= hi:
        keys.append(k)
rc = RedisCluster(startup_nodes=[ClusterNode(host, port)], socket_timeout=5)
acked = {}
writes = reads = errors = 0
end = time.time() + seconds
c = 0
while time.time() < end:
    for k in keys:
        c += 1
        try:
            if rc.set(k, str(c)):
                acked[k] = c
                writes += 1
            got = rc.get(k)
            reads += 1
            if got is None or int(got) < acked.get(k, 0):
                print("stale", k, got, acked.get(k), flush=True)
        except Exception as e:  # unknown outcome
            errors += 1
            print("error", type(e).__name__, e, file=sys.stderr, flush=True)
            time.sleep(0.05)
        if time.time() >= end:
            break
for k, v in acked.items():
    got = None
    for attempt in range(20):
        try:
            got = rc.get(k)
            break
        except Exception as e:
            print("read error", k, type(e).__name__, e, file=sys.stderr, flush=True)
            time.sleep(0.25)
    if got is None or int(got) < v:
        print("lost", k, got, v, flush=True)
print("summary", writes, reads, errors, file=sys.stderr, flush=True)
