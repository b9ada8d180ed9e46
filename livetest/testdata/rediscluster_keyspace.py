"""redis-py's RedisCluster and a plain client through the whole-keyspace
commands of a sharded Synod namespace (livetest/shardks_test.go).

Usage: rediscluster_keyspace.py HOST PORT N

Writes keys rk-0 .. rk-(N-1) through RedisCluster, then prints one line per
figure, "NAME VALUE", for the Go test to check:
  dbsize              rc.dbsize() (redis-py sends it to its default node)
  keys                len(rc.keys()) (default node)
  scan_distinct       distinct keys of rc.scan_iter() (every primary, a cursor each)
  scan_total          keys rc.scan_iter() returned, repeats included
  primaries           how many primaries redis-py found
  plain_scan          distinct keys of a plain client's scan_iter() at HOST:PORT
  randomkey_ok        1 if rc.randomkey() names a written key
  flush_dbsize        a plain client's DBSIZE after rc.flushdb()
"""
import sys

from redis import Redis
from redis.cluster import ClusterNode, RedisCluster

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rc = RedisCluster(startup_nodes=[ClusterNode(host, port)], socket_timeout=10)
keys = {f"rk-{i}" for i in range(n)}
for k in sorted(keys):
    rc.set(k, "v")
print("dbsize", rc.dbsize(), flush=True)
print("keys", len(rc.keys()), flush=True)
seen = list(rc.scan_iter(count=7))
print("scan_distinct", len(set(seen)), flush=True)
print("scan_total", len(seen), flush=True)
print("primaries", len(rc.get_primaries()), flush=True)
plain = Redis(host=host, port=port, socket_timeout=10)
print("plain_scan", len(set(plain.scan_iter(count=7))), flush=True)
rk = rc.randomkey()
print("randomkey_ok", 1 if rk is not None and rk.decode() in keys else 0, flush=True)
rc.flushdb()
print("flush_dbsize", plain.dbsize(), flush=True)
