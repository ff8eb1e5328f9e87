#!/usr/bin/env python3
"""A Python app for rein's memory-limit tests: serves HTTP/1.1 keep-alive on the socket rein passes as fd 3.

Usage: grow_app.py TAG
  GET /grow  allocates (and touches) 64 MiB more, kept until the process exits
  anything else answers `grow:TAG:PID`
"""

import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TAG = sys.argv[1] if len(sys.argv) > 1 else "grow"
HELD = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.endswith("/grow"):
            HELD.append(b"x" * (64 << 20))
            print(f"grow {TAG} pid={os.getpid()} held={len(HELD) * 64}M", flush=True)
        body = f"grow:{TAG}:{os.getpid()}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=3)
server.daemon_threads = True
server.serve_forever()
