#!/usr/bin/python3
"""An app for rein's isolation tests: serves HTTP/1.1 on the socket rein passes as fd 3 and tells what it sees.

GET /      JSON: pid, uid, gid, hostname, the pids its /proc lists, NoNewPrivs, the entries of / and LISTEN_PID
GET /alloc allocates memory 16 MiB at a time, touching every page, until it is killed
GET /hold  allocates 64 MiB, touching every page, and keeps it
"""

import json
import os
import socket
from http.server import BaseHTTPRequestHandler, HTTPServer


def no_new_privs():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("NoNewPrivs:"):
                return int(line.split()[1])
    return None


HELD = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/hold":
            HELD.append(bytearray(64 << 20))
        if self.path == "/alloc":
            hoard = []
            while True:
                hoard.append(bytearray(16 << 20))
        body = json.dumps(
            {
                "pid": os.getpid(),
                "uid": os.getuid(),
                "gid": os.getgid(),
                "hostname": socket.gethostname(),
                "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
                "no_new_privs": no_new_privs(),
                "root": sorted(os.listdir("/")),
                "listen_pid": os.environ.get("LISTEN_PID"),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = HTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=3)
server.serve_forever()
