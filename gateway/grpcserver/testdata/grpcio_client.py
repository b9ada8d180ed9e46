"""A gRPC client that is not Go's: Python's grpcio (gRPC's C core), for
TestGRPCIOClient (interop_test.go). It reads a JSON plan from the file
named by its first argument and prints one JSON result per step.

The plan: {"target", "ca" (a CA certificate file: TLS; absent: plaintext),
"server_name", "steps": [...]}. A step: {"name", "method" (the full
method), "kind" ("unary" or "stream": a bidirectional stream sending
"reqs" then closing its side), "req" or "reqs" (base64 protobuf
messages: the Go test makes and reads them, so this needs no generated
code), "metadata" ([[key, value]]), "timeout" (seconds), "compress"
(gzip the request), "fresh" (on a channel of its own), "cancel_when" (a file: the call is cancelled once the
server's handler has created it)}. A result: {"name", "code" (a
grpc.StatusCode name), "details", "resp" / "resps" (base64), "trailing"
(the trailing metadata's keys)}.
"""

import base64
import json
import os
import sys
import time

import grpc


def ident(b):
    return b


def main():
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    channel = dial(plan)
    out = []
    for step in plan["steps"]:
        if step.get("fresh"):
            # A channel of its own: its first call, before the server
            # said which encodings it accepts.
            ch = dial(plan)
            out.append(run(ch, step))
            ch.close()
        else:
            out.append(run(channel, step))
    channel.close()
    json.dump(out, sys.stdout)


def dial(plan):
    options = []
    if plan.get("ca"):
        with open(plan["ca"], "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        if plan.get("server_name"):
            options.append(("grpc.ssl_target_name_override", plan["server_name"]))
        return grpc.secure_channel(plan["target"], creds, options=options)
    return grpc.insecure_channel(plan["target"], options=options)


def run(channel, step):
    md = [tuple(kv) for kv in step.get("metadata", [])]
    kw = {"metadata": md}
    if step.get("timeout"):
        kw["timeout"] = step["timeout"]
    if step.get("compress"):
        kw["compression"] = grpc.Compression.Gzip
    res = {"name": step["name"], "code": "OK", "details": "", "trailing": []}
    try:
        if step["kind"] == "unary":
            call = channel.unary_unary(step["method"], request_serializer=ident, response_deserializer=ident)
            req = base64.b64decode(step.get("req", ""))
            if step.get("cancel_when"):
                fut = call.future(req, **kw)
                deadline = time.time() + 30
                while not os.path.exists(step["cancel_when"]) and time.time() < deadline:
                    time.sleep(0.01)
                fut.cancel()
                try:
                    fut.result()
                except grpc.FutureCancelledError:
                    res["code"] = "CANCELLED"
                    return res
                resp, c = None, fut
            else:
                resp, c = call.with_call(req, **kw)
            res["resp"] = base64.b64encode(resp).decode() if resp is not None else None
            res["trailing"] = sorted(k for k, _ in (c.trailing_metadata() or ()))
        else:
            call = channel.stream_stream(step["method"], request_serializer=ident, response_deserializer=ident)
            reqs = [base64.b64decode(r) for r in step["reqs"]]
            it = call(iter(reqs), **kw)
            res["resps"] = [base64.b64encode(r).decode() for r in it]
            res["trailing"] = sorted(k for k, _ in (it.trailing_metadata() or ()))
    except grpc.RpcError as e:
        res["code"] = e.code().name
        res["details"] = e.details() or ""
        res["trailing"] = sorted(k for k, _ in (e.trailing_metadata() or ()))
    return res


if __name__ == "__main__":
    main()
