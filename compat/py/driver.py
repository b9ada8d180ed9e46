"""redis-py side of Synod's compatibility suite (package compat).

Reads one JSON request per line on stdin:
    {"addr": "127.0.0.1:6379", "db": 0, "ns": "py-paxos", "args": [base64, ...]}
sends the command through a raw redis-py Connection (RESP2, no response
callbacks, so the answer is what the server said) and writes one JSON answer
per line on stdout: {"s": base64} for strings, {"i": n}, {"d": x}, {"b": t},
{"n": true} for nil, {"e": message} for an error answer, {"a": [...]} for
arrays, {"m": [[k, v], ...]} for maps, {"x": text} when the driver itself
failed. One connection per (addr, db, ns); "ns" is selected with SYNOD NS.
"""

import base64
import json
import sys

import redis

conns = {}
selectors = []


class NamespaceSelector:
    def __init__(self, ns):
        self.ns = ns

    def select(self, conn):
        conn.send_command("SYNOD", "NS", self.ns)
        conn.read_response()


def connection(req):
    key = (req["addr"], req.get("db", 0), req.get("ns", ""))
    c = conns.get(key)
    if c is None:
        host, port = req["addr"].rsplit(":", 1)
        c = redis.Connection(host=host, port=int(port), db=req.get("db", 0),
                             socket_timeout=15)
        if req.get("ns"):
            # Also after redis-py reconnects on its own (it drops the
            # connection on an AuthenticationError, for one). redis-py keeps
            # a weak reference to a bound method: keep the object alive.
            sel = NamespaceSelector(req["ns"])
            selectors.append(sel)
            c.register_connect_callback(sel.select)
        c.connect()
        conns[key] = c
    return c


def enc(v):
    if v is None:
        return {"n": True}
    if isinstance(v, redis.exceptions.RedisError):
        name = type(v).__name__
        text = str(v)
        # redis-py strips the ERR code and maps some codes to classes; keep
        # the class so that two servers' answers stay comparable.
        return {"e": text if name == "ResponseError" else name + ": " + text}
    if isinstance(v, bytes):
        return {"s": base64.b64encode(v).decode()}
    if isinstance(v, str):
        return {"s": base64.b64encode(v.encode()).decode()}
    if isinstance(v, bool):
        return {"b": v}
    if isinstance(v, int):
        return {"i": v}
    if isinstance(v, float):
        return {"d": v}
    if isinstance(v, dict):
        return {"m": [[enc(k), enc(x)] for k, x in v.items()]}
    if isinstance(v, (list, tuple, set)):
        return {"a": [enc(x) for x in v]}
    return {"x": "unexpected answer type %s" % type(v).__name__}


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        args = [base64.b64decode(a) for a in req["args"]]
        try:
            c = connection(req)
            c.send_command(*args)
            try:
                out = enc(c.read_response())
            except redis.exceptions.ResponseError as e:
                out = enc(e)
            if args[0].upper() == b"QUIT":
                # The server closes the connection: open a new one next time.
                c.disconnect()
                conns.pop((req["addr"], req.get("db", 0), req.get("ns", "")), None)
        except redis.exceptions.RedisError as e:
            out = enc(e)
        except Exception as e:  # the driver's own failure
            out = {"x": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
