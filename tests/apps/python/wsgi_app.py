"""A WSGI app for rein's Python adapter tests: one route per part of PEP 3333.

Routes:
  /hello          plain text "Hello, world"
  /env            JSON of selected environ keys (CGI variables, wsgi.*, HTTP_X_TEST, PATH_INFO decoded)
  /echo           streams wsgi.input back (readline, then read(n) in a loop), then "\\n#total=N\\n"
  /lines          counts the lines of wsgi.input (iteration) and readlines()
  /upload         reads wsgi.input in 64 KiB chunks: JSON {"bytes": N, "sha256": hex}
  /stream         100 chunks from an iterable whose close() is counted; /closed returns the count
  /slow_stream    200 chunks 20 ms apart (also counted by /closed): for aborts
  /write          the legacy write() callable, then a returned chunk
  /file           wsgi.file_wrapper over an in-memory file
  /exc_info       start_response, an exception, start_response again with exc_info: 500, custom body
  /error          raises before start_response: the adapter answers 500
  /error_after_head  yields a chunk, then raises: the body is cut short
  /errors         writes a line to wsgi.errors
  /status/<code>  answers that status
  /sleep?ms=N     sleeps N ms (tracks concurrency); /maxconc returns and resets the highest seen
  /runtime        JSON {"prefix": sys.prefix, "greeting": $GREETING}: what `home` and `environment` gave the process
"""

import hashlib
import io
import json
import os
import sys
import threading
import time

CLOSED = 0
ACTIVE = 0
MAX_ACTIVE = 0
LOCK = threading.Lock()


def text(start_response, body, status="200 OK", ctype="text/plain; charset=utf-8"):
    body = body.encode() if isinstance(body, str) else body
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]


def as_json(start_response, obj):
    return text(start_response, json.dumps(obj), ctype="application/json")


class Stream:
    """An iterable with close(), as PEP 3333 allows: close() must be called once it is done."""

    def __init__(self, count):
        self.count = count

    def __iter__(self):
        for i in range(self.count):
            yield b"chunk %03d\n" % i

    def close(self):
        global CLOSED
        with LOCK:
            CLOSED += 1


class SlowStream(Stream):
    def __init__(self, count, pause):
        self.count, self.pause = count, pause

    def __iter__(self):
        for i in range(self.count):
            yield b"slow %03d\n" % i
            time.sleep(self.pause)


def echo(environ, start_response):
    stream = environ["wsgi.input"]
    start_response("200 OK", [("Content-Type", "application/octet-stream")])
    total = 0
    line = stream.readline()  # the first line comes back on its own, before the rest is read
    if line:
        total += len(line)
        yield line
    while True:
        data = stream.read(8192)
        if not data:
            break
        total += len(data)
        yield data
    yield b"\n#total=%d\n" % total


def lines(environ, start_response):
    stream = environ["wsgi.input"]
    first = stream.readline(5)  # a limited readline: at most 5 bytes
    count = sum(1 for _ in stream)  # iteration reads line by line
    rest = stream.readlines()  # nothing left: []
    return as_json(start_response, {"first": first.decode(), "iterated": count, "rest": len(rest),
                                    "eof": stream.read() == b"" and stream.read(10) == b""})


def upload(environ, start_response):
    stream = environ["wsgi.input"]
    digest, count, reads = hashlib.sha256(), 0, 0
    while True:
        data = stream.read(65536)
        if not data:
            break
        reads += 1
        count += len(data)
        digest.update(data)
    return as_json(start_response, {"bytes": count, "sha256": digest.hexdigest(), "reads": reads,
                                    "content_length": environ.get("CONTENT_LENGTH")})


def write_route(environ, start_response):
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"written 1\n")
    write(b"written 2\n")
    return [b"returned\n"]


def exc_info(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    try:
        raise ValueError("something broke after start_response")
    except ValueError:
        start_response("500 Internal Server Error", [("Content-Type", "text/plain"), ("X-Exc-Info", "yes")],
                       sys.exc_info())
    return [b"custom error body\n"]


def error_after_head(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    yield b"partial "
    raise RuntimeError("boom after the head was sent")


def sleep(environ, start_response):
    global ACTIVE, MAX_ACTIVE
    ms = int(environ["QUERY_STRING"].partition("ms=")[2] or "100")
    with LOCK:
        ACTIVE += 1
        MAX_ACTIVE = max(MAX_ACTIVE, ACTIVE)
    print("wsgi_app: sleeping %d ms" % ms, file=sys.stderr, flush=True)
    try:
        time.sleep(ms / 1000)
    finally:
        with LOCK:
            ACTIVE -= 1
    return text(start_response, "slept %d ms" % ms)


def max_concurrency(environ, start_response):
    global MAX_ACTIVE
    with LOCK:
        seen, MAX_ACTIVE = MAX_ACTIVE, 0
    return as_json(start_response, {"max": seen})


def env(environ, start_response):
    keys = ["REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE", "CONTENT_LENGTH",
            "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "REMOTE_ADDR", "REQUEST_URI", "HTTP_HOST",
            "HTTP_X_TEST", "wsgi.url_scheme", "wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once",
            "wsgi.version", "wsgi.input_terminated"]
    out = {k: environ[k] for k in keys if k in environ}
    if environ.get("QUERY_STRING") == "all":  # every str entry, for the tests of what rein sends
        out.update((k, v) for k, v in environ.items() if type(v) is str)
    out["PATH_INFO_decoded"] = environ["PATH_INFO"].encode("latin-1").decode("utf-8")
    out["native_strings"] = all(type(environ[k]) is str for k in environ if k.isupper())
    out["has_file_wrapper"] = callable(environ.get("wsgi.file_wrapper"))
    return as_json(start_response, out)


def runtime(environ, start_response):
    """The interpreter's prefix (a virtualenv's directory under `home`) and the process's GREETING variable."""
    return as_json(start_response, {"prefix": sys.prefix, "greeting": os.environ.get("GREETING")})


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/runtime":
        return runtime(environ, start_response)
    if path == "/hello":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"Hello, world"]
    if path.startswith("/env"):
        return env(environ, start_response)
    if path == "/echo":
        return echo(environ, start_response)
    if path == "/lines":
        return lines(environ, start_response)
    if path == "/upload":
        return upload(environ, start_response)
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return Stream(100)
    if path == "/slow_stream":  # 200 chunks, 20 ms apart: long enough to be aborted
        start_response("200 OK", [("Content-Type", "text/plain")])
        return SlowStream(200, 0.02)
    if path == "/closed":
        return as_json(start_response, {"closed": CLOSED})
    if path == "/write":
        return write_route(environ, start_response)
    if path == "/file":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return environ["wsgi.file_wrapper"](io.BytesIO(b"0123456789" * 10000), 4096)
    if path == "/exc_info":
        return exc_info(environ, start_response)
    if path == "/error":
        raise ZeroDivisionError("the /error route always fails")
    if path == "/error_after_head":
        return error_after_head(environ, start_response)
    if path == "/errors":
        environ["wsgi.errors"].write("wsgi_app: message to wsgi.errors\n")
        return text(start_response, "logged")
    if path.startswith("/status/"):
        code = int(path[len("/status/"):])
        reasons = {200: "OK", 201: "Created", 204: "No Content", 404: "Not Found", 418: "I'm a teapot",
                   503: "Service Unavailable"}
        start_response("%d %s" % (code, reasons.get(code, "Whatever")), [("X-Status", str(code))])
        return [] if code == 204 else [b"status %d\n" % code]
    if path == "/sleep":
        return sleep(environ, start_response)
    if path == "/maxconc":
        return max_concurrency(environ, start_response)
    if path == "/stack_size":  # the stack size threads started now get (0: the system's default)
        return text(start_response, "%d\n" % threading.stack_size())
    return text(start_response, "not found: %s\n" % path, status="404 Not Found")
