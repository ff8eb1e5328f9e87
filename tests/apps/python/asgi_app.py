"""An ASGI 3 app for rein's Python adapter tests, with lifespan.

Lifespan: startup sets state["started"] = True (or fails if ASGI_APP_FAIL_STARTUP is set); shutdown
prints "asgi_app: lifespan shutdown" to stderr.

Routes:
  /hello             plain text "Hello, world"
  /lifespan          JSON {"started": scope["state"]["started"]}
  /scope             JSON of the scope (path, raw_path, root_path, query_string, headers, client...)
  /echo              streams each request body chunk back as it comes (more_body=True), then ends
  /upload            reads the body: JSON {"bytes": N, "sha256": hex}
  /stream            5 body events
  /slow_stream       200 body events 20 ms apart; prints how send() failed once rein aborted
  /error             raises before http.response.start: the adapter answers 500
  /error_after_start sends the head and a chunk, then raises: the body is cut short
  /noresponse        returns without sending anything: the adapter answers 500
  /sleep?ms=N        sleeps N ms, then answers
  /wait_disconnect   reads the body, then waits for http.disconnect (rein aborts); /disconnects counts
  /after_response    answers, then waits for http.disconnect (which comes once the response is complete)
"""

import asyncio
import hashlib
import json
import os
import sys

DISCONNECTS = 0


async def lifespan(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if os.environ.get("ASGI_APP_FAIL_STARTUP"):
                await send({"type": "lifespan.startup.failed", "message": "asgi_app: startup refused"})
                return
            scope["state"]["started"] = True
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            print("asgi_app: lifespan shutdown", file=sys.stderr, flush=True)
            await send({"type": "lifespan.shutdown.complete"})
            return


async def respond(send, body, status=200, ctype=b"text/plain"):
    body = body.encode() if isinstance(body, str) else body
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive):
    chunks = []
    while True:
        message = await receive()
        assert message["type"] == "http.request", message
        chunks.append(message["body"])
        if not message.get("more_body"):
            return b"".join(chunks)


async def echo(receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream")]})
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return
        if message["body"]:
            await send({"type": "http.response.body", "body": message["body"], "more_body": True})
        if not message.get("more_body"):
            break
    await send({"type": "http.response.body", "body": b""})


async def upload(receive, send):
    digest, count = hashlib.sha256(), 0
    while True:
        message = await receive()
        digest.update(message["body"])
        count += len(message["body"])
        if not message.get("more_body"):
            break
    await respond(send, json.dumps({"bytes": count, "sha256": digest.hexdigest()}), ctype=b"application/json")


def scope_json(scope):
    return json.dumps({
        "type": scope["type"], "asgi": scope["asgi"], "http_version": scope["http_version"],
        "method": scope["method"], "scheme": scope["scheme"], "path": scope["path"],
        "raw_path": scope["raw_path"].decode("latin-1"), "root_path": scope["root_path"],
        "query_string": scope["query_string"].decode("latin-1"),
        "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
        "client": scope["client"], "server": scope["server"], "state": scope["state"],
    })


async def app(scope, receive, send):
    global DISCONNECTS
    if scope["type"] == "lifespan":
        return await lifespan(scope, receive, send)
    assert scope["type"] == "http"
    path = scope["path"][len(scope["root_path"]):] if scope["path"].startswith(scope["root_path"]) else scope["path"]
    if path == "/hello":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"Hello, world"})
    elif path == "/lifespan":
        await respond(send, json.dumps({"started": scope["state"].get("started", False)}), ctype=b"application/json")
    elif path.startswith("/scope"):
        await respond(send, scope_json(scope), ctype=b"application/json")
    elif path == "/echo":
        await echo(receive, send)
    elif path == "/upload":
        await upload(receive, send)
    elif path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for i in range(5):
            await send({"type": "http.response.body", "body": b"event %d\n" % i, "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"done\n"})
    elif path == "/slow_stream":  # 200 events 20 ms apart, until send() raises once rein aborts
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        try:
            for i in range(200):
                await send({"type": "http.response.body", "body": b"slow %03d\n" % i, "more_body": True})
                await asyncio.sleep(0.02)
            await send({"type": "http.response.body", "body": b""})
        except OSError as exc:
            print("asgi_app: slow_stream stopped: %s" % type(exc).__name__, file=sys.stderr, flush=True)
    elif path == "/error":
        raise ZeroDivisionError("the /error route always fails")
    elif path == "/error_after_start":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"partial ", "more_body": True})
        raise RuntimeError("boom after the head was sent")
    elif path == "/noresponse":
        return
    elif path == "/sleep":
        ms = int(scope["query_string"].decode().partition("ms=")[2] or "100")
        print("asgi_app: sleeping %d ms" % ms, file=sys.stderr, flush=True)
        await asyncio.sleep(ms / 1000)
        await respond(send, "slept %d ms" % ms)
    elif path == "/wait_disconnect":
        await read_body(receive)
        message = await receive()  # blocks until rein aborts the request
        if message["type"] == "http.disconnect":
            DISCONNECTS += 1
    elif path == "/disconnects":
        await respond(send, json.dumps({"disconnects": DISCONNECTS}), ctype=b"application/json")
    elif path == "/after_response":
        await read_body(receive)
        await respond(send, "done")
        message = await receive()  # the response is complete: http.disconnect at once
        print("asgi_app: after response got %s" % message["type"], file=sys.stderr, flush=True)
    else:
        await respond(send, "not found: %s\n" % path, status=404)


application = app
