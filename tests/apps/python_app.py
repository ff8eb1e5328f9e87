#!/usr/bin/env python3
"""A Python app for rein's supervisor tests: serves HTTP/1.1 keep-alive on the socket rein passes as fd 3.

Usage: python_app.py TAG [--sleep S] [--fail-at-start] [--crash-if PATH] [--unhealthy-while PATH]
  --sleep S        waits S seconds before serving (a slow start)
  --unhealthy-while PATH  while PATH exists, /health answers 503 (and prints `health 503` on stdout)
  --fail-at-start  exits 1 at once (a broken release)
  --crash-if PATH  while PATH exists: serves its first request, then exits 1 0.2 s later
Prints `start TAG pid=PID t=TIME` on stdout and `stderr TAG pid=PID` on stderr at start, `exit TAG t=TIME`
before a crash. Endpoints: /env (JSON: pid, cwd and the socket-activation environment), /health, and
anything else answers `python:TAG:PID`.
"""

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TAG = sys.argv[1] if len(sys.argv) > 1 else "python"
ARGS = sys.argv[2:]


def option(name):
    return ARGS[ARGS.index(name) + 1] if name in ARGS else None


print(f"start {TAG} pid={os.getpid()} t={time.time():.3f}", flush=True)
print(f"stderr {TAG} pid={os.getpid()}", file=sys.stderr, flush=True)
if "--fail-at-start" in ARGS:
    print(f"{TAG}: failing at start", file=sys.stderr, flush=True)
    sys.exit(1)
if option("--sleep"):
    time.sleep(float(option("--sleep")))
CRASH_IF = option("--crash-if")
UNHEALTHY_WHILE = option("--unhealthy-while")
CRASH_ARMED = threading.Lock()


def crash_later():
    time.sleep(0.2)
    print(f"exit {TAG} t={time.time():.3f}", flush=True)
    os._exit(1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.endswith("/env"):
            body = json.dumps(
                {
                    "pid": os.getpid(),
                    "cwd": os.getcwd(),
                    **{
                        k: os.environ.get(k)
                        for k in ("PORT", "REIN_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "GREETING")
                    },
                }
            ).encode()
        else:
            body = f"python:{TAG}:{os.getpid()}".encode()
        if self.path == "/health" and UNHEALTHY_WHILE and os.path.exists(UNHEALTHY_WHILE):
            print("health 503", flush=True)
            body = b"not yet"
            self.send_response(503)
        else:
            self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if CRASH_IF and os.path.exists(CRASH_IF) and CRASH_ARMED.acquire(blocking=False):
            threading.Thread(target=crash_later, daemon=True).start()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=3)
server.daemon_threads = True
server.serve_forever()
