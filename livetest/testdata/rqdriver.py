"""Drives RQ (pinned by scripts/test) against a Synod node for
livetest/rq_test.go (TestRQThroughKills).

    rqdriver.py enqueue HOST:PORT N FIRST   enqueue square(FIRST..FIRST+N-1);
                                            prints "ID X" per acknowledged job
    rqdriver.py work HOST:PORT              run a burst worker until the queue
                                            is empty
    rqdriver.py check HOST:PORT ID:X ...    prints "ID STATUS VALUE" per job

A command that fails on a connection or a refused write (a node killed, an
election under way) is retried on a fresh connection for up to 60 s: an
enqueue whose reply was lost may then be enqueued twice, which the test
allows (it checks the acknowledged jobs).
"""
import os
import sys
import time

import redis
from rq import Queue, Worker
from rq.job import Job

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

QUEUE = "synod-rq"


def conn(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=10, socket_connect_timeout=5)


def retry(f, what):
    deadline = time.time() + 60
    while True:
        try:
            return f()
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
            if time.time() > deadline:
                raise
            print(f"retry {what}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            time.sleep(0.2)


def enqueue(addr, n, first):
    for x in range(first, first + n):
        job = retry(lambda: Queue(QUEUE, connection=conn(addr)).enqueue("rqjobs.square", x, result_ttl=3600), f"enqueue {x}")
        print(job.id, x, flush=True)


def work(addr):
    def run():
        r = conn(addr)
        w = Worker([Queue(QUEUE, connection=r)], connection=r)
        w.work(burst=True, logging_level="WARNING")
        if Queue(QUEUE, connection=r).count:
            raise redis.ConnectionError("queue not empty after a burst")
    retry(run, "worker")


def check(addr, pairs):
    r = conn(addr)
    for p in pairs:
        jid, x = p.split(":")
        job = retry(lambda: Job.fetch(jid, connection=r), f"fetch {jid}")
        status = retry(job.get_status, f"status {jid}")
        value = retry(job.return_value, f"result {jid}")
        print(jid, status.value if hasattr(status, "value") else status, value, flush=True)


def main():
    cmd, addr = sys.argv[1], sys.argv[2]
    if cmd == "enqueue":
        enqueue(addr, int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "work":
        work(addr)
    elif cmd == "check":
        check(addr, sys.argv[3:])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
