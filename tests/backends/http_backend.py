#!/usr/bin/env python3
"""A small HTTP/1.1 keep-alive backend for rein's proxy tests (stdlib only).

Usage: http_backend.py NAME LISTEN [--delay-ms N] [--backlog N] [--accept-every-ms N]
  LISTEN is a TCP port ("0" picks one) on 127.0.0.1, or "unix:/path".
  --delay-ms N: every request is answered after N ms (a slow server).
  --backlog N: the listen queue holds N connections (default 128).
  --accept-every-ms N: a connection is accepted every N ms at most (a server slow to accept: with a small
    backlog, connects beyond it are refused, at once with EAGAIN on a Unix socket).
Prints the bound port (or the socket path) on its first line of stdout.

Every answer carries `X-Backend: NAME`. Endpoints:
  /whoami                 NAME
  /slow?ms=N              NAME after N ms
  /big?mb=N               N MiB of data, streamed with a Content-Length
  /echo                   the request body (Content-Length or chunked)
  /count-upload           the number of body bytes received (read in a stream, never kept)
  /headers[/...]          {"method", "target", "headers": [[name, value]...]} as JSON
  /status?code=N          status N, plus a hop-by-hop `Connection: x-resp-secret` / `X-Resp-Secret: 1` pair
  /health                 200 or 503 as toggled by /health/down and /health/up
  /die?who=A,B            reads the body, then, if NAME is listed, closes the connection without answering
  /count?path=P | ?tag=T  how many requests this backend received for path P / with tag=T (/count not counted)
  A HEAD gets the head of the GET answer, without its body.
"""

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

NAME = sys.argv[1]
LISTEN = sys.argv[2]
DELAY_MS = 0
if "--delay-ms" in sys.argv:
    DELAY_MS = int(sys.argv[sys.argv.index("--delay-ms") + 1])


def option(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


BACKLOG = option("--backlog", 128)
ACCEPT_EVERY_MS = option("--accept-every-ms", 0)

LOCK = threading.Lock()
BY_PATH = {}
BY_TAG = {}
HEALTHY = [True]
CHUNK = b"x" * 65536


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and the body are two writes: without TCP_NODELAY, Nagle holds the body for the proxy's
    # delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def body_chunks(self):
        """Yields the request body in pieces, Content-Length or chunked."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                left = size
                while left:
                    piece = self.rfile.read(min(left, 65536))
                    if not piece:
                        return
                    left -= len(piece)
                    yield piece
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                piece = self.rfile.read(min(left, 65536))
                if not piece:
                    return
                left -= len(piece)
                yield piece

    def answer(self, status, body, ctype="text/plain", extra=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Backend", NAME)
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        url = urlsplit(self.path)
        q = parse_qs(url.query, keep_blank_values=True)
        path = url.path
        if path != "/count":
            with LOCK:
                BY_PATH[path] = BY_PATH.get(path, 0) + 1
                for tag in q.get("tag", []):
                    BY_TAG[tag] = BY_TAG.get(tag, 0) + 1
        if DELAY_MS:
            time.sleep(DELAY_MS / 1000)

        if path == "/echo":
            body = b"".join(self.body_chunks())
            return self.answer(200, body, "application/octet-stream")
        if path == "/count-upload":
            n = 0
            for piece in self.body_chunks():
                n += len(piece)
            return self.answer(200, str(n))
        # Every other endpoint drains the body first (keep-alive stays in sync).
        for _ in self.body_chunks():
            pass
        if path == "/whoami":
            return self.answer(200, NAME)
        if path == "/slow":
            time.sleep(int(q.get("ms", ["1000"])[0]) / 1000)
            return self.answer(200, NAME)
        if path == "/big":
            total = int(q.get("mb", ["1"])[0]) * 1024 * 1024
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(total))
            self.send_header("X-Backend", NAME)
            self.end_headers()
            left = total
            while left:
                piece = CHUNK[: min(left, len(CHUNK))]
                self.wfile.write(piece)
                left -= len(piece)
            return
        if path == "/headers" or path.startswith("/headers/"):
            doc = {
                "method": self.command,
                "target": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
            }
            return self.answer(200, json.dumps(doc), "application/json")
        if path == "/status":
            code = int(q.get("code", ["200"])[0])
            return self.answer(
                code,
                f"status {code} from {NAME}",
                extra=[
                    ("X-Custom", "yes"),
                    ("Connection", "x-resp-secret"),
                    ("X-Resp-Secret", "1"),
                ],
            )
        if path == "/health":
            return self.answer(200 if HEALTHY[0] else 503, "ok" if HEALTHY[0] else "down")
        if path == "/health/down":
            HEALTHY[0] = False
            return self.answer(200, "down")
        if path == "/health/up":
            HEALTHY[0] = True
            return self.answer(200, "up")
        if path == "/die":
            who = ",".join(q.get("who", [""])).split(",")
            if NAME in who:
                # Abort: no answer at all, the connection is closed under the proxy.
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            return self.answer(200, NAME)
        if path == "/count":
            with LOCK:
                if "tag" in q:
                    n = BY_TAG.get(q["tag"][0], 0)
                else:
                    n = BY_PATH.get(q.get("path", [""])[0], 0)
            return self.answer(200, str(n))
        return self.answer(404, "no such endpoint")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any


class UnixServer(ThreadingHTTPServer):
    address_family = socket.AF_UNIX

    def server_bind(self):
        if os.path.exists(self.server_address):
            os.unlink(self.server_address)
        self.socket.bind(self.server_address)
        self.server_name, self.server_port = "localhost", 0

    def get_request(self):
        if ACCEPT_EVERY_MS:
            time.sleep(ACCEPT_EVERY_MS / 1000)  # the pace of a server slow to accept, not a wait for anything
        sock, _ = self.socket.accept()
        return sock, ("unix", 0)


def main():
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = BACKLOG
    if LISTEN.startswith("unix:"):
        Handler.disable_nagle_algorithm = False  # TCP_NODELAY is no option of a Unix socket
        server = UnixServer(LISTEN[5:], Handler)
        print(LISTEN[5:], flush=True)
    else:
        server = ThreadingHTTPServer(("127.0.0.1", int(LISTEN)), Handler)
        print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
