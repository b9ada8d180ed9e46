# Writes service/testdata/hll_redis.json from a real redis-server 7.0.15:
#   redis-server --port 0 --unixsocket /tmp/r.sock --save "" &
#   python3 service/testdata/hll_redis.py /tmp/r.sock service/testdata/hll_redis.json  (needs redis-py)
import hashlib, json, sys, redis
r = redis.Redis(unix_socket_path=sys.argv[1])
r.flushall()
cases = []
def rec(cmd, *args, gen=None):
    full = list(args)
    if gen:
        full += ["%s%d" % (gen[0], i) for i in range(gen[1], gen[2])]
    try:
        v = r.execute_command(cmd, *full)
    except redis.ResponseError as e:
        v = {"err": str(e)}
    if isinstance(v, bytes):
        v = {"hex": v.hex()} if len(v) <= 256 else {"sha256": hashlib.sha256(v).hexdigest(), "len": len(v)}
    c = {"cmd": [cmd] + list(args), "reply": v}
    if gen:
        c["gen"] = list(gen)
    cases.append(c)
rec("PFADD", "s")
rec("GET", "s")
rec("PFADD", "s", *["e%d" % i for i in range(100)])
rec("GET", "s")
rec("PFCOUNT", "s")
rec("GET", "s")
rec("PFADD", "s", "")
rec("PFCOUNT", "s")
for b in range(0, 20000, 500):
    rec("PFADD", "d", gen=("x", b, b + 500))
    rec("PFCOUNT", "d")
rec("GET", "d")
rec("PFADD", "m1", *["a%d" % i for i in range(300)])
rec("PFADD", "m2", gen=("a", 200, 700))
rec("PFCOUNT", "m1", "m2", "nokey")
rec("PFMERGE", "m3", "m1", "m2")
rec("GET", "m3")
rec("PFCOUNT", "m3")
rec("PFMERGE", "m4", "m1", "d")
rec("PFCOUNT", "m4")
rec("PFADD", "small", "x")
rec("SET", "cfg", "x")
rec("CONFIG", "SET", "hll-sparse-max-bytes", "100")
rec("PFADD", "p", *["p%d" % i for i in range(60)])
rec("PFDEBUG", "ENCODING", "p")
rec("GET", "p")
rec("CONFIG", "SET", "hll-sparse-max-bytes", "3000")
rec("PFDEBUG", "DECODE", "small")
rec("APPEND", "small", "hello")
rec("PFCOUNT", "small")
rec("SETRANGE", "m1", "4", "x")
rec("PFCOUNT", "m1")
json.dump(cases, open(sys.argv[2], "w"), separators=(",", ":"))
