#!/usr/bin/env python3
"""Tests for rein's Python adapter (src/supervisor/kind/python/rein_adapter.py), standard library only.

Each test class starts the adapter the way rein does: a listening socket (Unix, or TCP for the family
tests) passed as fd 3 with LISTEN_FDS=1 and LISTEN_PID set to the adapter's pid (a small Python
wrapper moves the socket to fd 3 and execs, keeping the pid). The tests speak FastCGI with the minimal client
below.

    python3 tests/apps/python/test_adapter.py            # the suite
    python3 tests/apps/python/test_adapter.py --bench    # requests/second of /hello on one connection
    SHOW_ADAPTER_STDERR=1 python3 tests/apps/python/test_adapter.py    # prints each adapter's stderr
"""

import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTER = os.path.join(HERE, "..", "..", "..", "src", "supervisor", "kind", "python", "rein_adapter.py")

BEGIN_REQUEST, ABORT_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT, STDERR, DATA = range(1, 9)
GET_VALUES, GET_VALUES_RESULT, UNKNOWN_TYPE = 9, 10, 11
RESPONDER, AUTHORIZER = 1, 2
KEEP_CONN = 1
REQUEST_COMPLETE, CANT_MPX_CONN, OVERLOADED, UNKNOWN_ROLE = range(4)
HEADER = struct.Struct(">BBHHBx")


def wait_for(predicate, timeout=10.0, what="condition"):
    """Polls predicate until it returns something true, or fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.01)


# ----------------------------------------------------------------------------- FastCGI client

def encode_pairs(pairs):
    out = []
    for name, value in pairs:
        name = name.encode("latin-1") if isinstance(name, str) else name
        value = value.encode("latin-1") if isinstance(value, str) else value
        for n in (len(name), len(value)):
            out.append(bytes((n,)) if n < 128 else struct.pack(">I", n | 0x80000000))
        out += (name, value)
    return b"".join(out)


def decode_pairs(data):
    pairs, pos = {}, 0
    while pos < len(data):
        lens = []
        for _ in range(2):
            n = data[pos]
            if n < 128:
                pos += 1
            else:
                n = struct.unpack_from(">I", data, pos)[0] & 0x7FFFFFFF
                pos += 4
            lens.append(n)
        name = data[pos:pos + lens[0]].decode()
        pos += lens[0]
        pairs[name] = data[pos:pos + lens[1]].decode()
        pos += lens[1]
    return pairs


def record(rtype, rid, content=b""):
    return HEADER.pack(1, rtype, rid, len(content), 0) + content


def stdin_records(rid, data, size=65535):
    return b"".join(record(STDIN, rid, data[i:i + size]) for i in range(0, len(data), size))


class Response:
    def __init__(self):
        self.stdout = bytearray()
        self.stdout_records = 0  # non-empty STDOUT records
        self.stderr = bytearray()
        self.app_status = None
        self.protocol_status = None
        self.status = None
        self.headers = {}
        self.body = b""

    def parse(self):
        head, sep, body = bytes(self.stdout).partition(b"\r\n\r\n")
        if not sep:
            return self
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self.status = int(self.headers.get("status", "200").split()[0])
        self.body = body
        return self

    def json(self):
        return json.loads(self.body)


class FcgiClient:
    """A minimal FastCGI client: one request at a time on one connection."""

    def __init__(self, address, timeout=20.0):
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(address)
        except OSError:
            self.sock.close()
            raise
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def read_record(self):
        """(type, request id, content), or None at EOF."""
        while True:
            if len(self.buf) >= 8:
                _, rtype, rid, clen, plen = HEADER.unpack_from(self.buf)
                if len(self.buf) >= 8 + clen + plen:
                    content = self.buf[8:8 + clen]
                    self.buf = self.buf[8 + clen + plen:]
                    return rtype, rid, content
            data = self.sock.recv(1 << 18)
            if not data:
                if self.buf:
                    raise AssertionError("EOF inside a record")
                return None
            self.buf += data

    @staticmethod
    def params(method="GET", path="/", query="", body=b"", headers=(), script_name="", extra=()):
        uri = script_name + path + ("?" + query if query else "")
        params = [
            ("REQUEST_METHOD", method), ("REQUEST_URI", uri), ("QUERY_STRING", query),
            ("SCRIPT_NAME", script_name), ("PATH_INFO", path), ("SERVER_NAME", "example.test"),
            ("SERVER_PORT", "8080"), ("SERVER_PROTOCOL", "HTTP/1.1"), ("REMOTE_ADDR", "192.0.2.7"),
            ("REMOTE_PORT", "54321"), ("REQUEST_SCHEME", "http"), ("HTTP_HOST", "example.test:8080"),
        ]
        if body or method in ("POST", "PUT"):
            params += [("CONTENT_LENGTH", str(len(body))), ("CONTENT_TYPE", "application/octet-stream")]
        params += [("HTTP_" + k.upper().replace("-", "_"), v) for k, v in headers]
        params += list(extra)
        return params

    def begin(self, params, rid=1, keep=True, role=RESPONDER):
        """BEGIN_REQUEST and PARAMS (split across two records, as any server may do)."""
        encoded = encode_pairs(params)
        half = len(encoded) // 2
        self.send(record(BEGIN_REQUEST, rid, struct.pack(">HB5x", role, KEEP_CONN if keep else 0))
                  + record(PARAMS, rid, encoded[:half]) + record(PARAMS, rid, encoded[half:])
                  + record(PARAMS, rid))

    def read_response(self, rid=1, response=None, until=None):
        """Reads records up to END_REQUEST (or until until(response) is true); returns the Response."""
        response = response or Response()
        while True:
            if until is not None and until(response):
                return response
            rec = self.read_record()
            if rec is None:
                raise AssertionError("connection closed before END_REQUEST; got %r" % bytes(response.stdout))
            rtype, rrid, content = rec
            assert rrid == rid, (rtype, rrid, content)
            if rtype == STDOUT:
                response.stdout += content
                response.stdout_records += 1 if content else 0
            elif rtype == STDERR:
                response.stderr += content
            elif rtype == END_REQUEST:
                response.app_status, response.protocol_status = struct.unpack(">IB3x", content)
                return response.parse()
            else:
                raise AssertionError("unexpected record type %d" % rtype)

    def request(self, path="/", method="GET", body=b"", rid=1, keep=True, **kw):
        self.begin(self.params(method, path, body=body, **kw), rid=rid, keep=keep)
        self.send(stdin_records(rid, body) + record(STDIN, rid))
        return self.read_response(rid)

    def get_values(self, names=("FCGI_MAX_CONNS", "FCGI_MAX_REQS", "FCGI_MPXS_CONNS")):
        self.send(record(GET_VALUES, 0, encode_pairs((n, "") for n in names)))
        rtype, rid, content = self.read_record()
        assert (rtype, rid) == (GET_VALUES_RESULT, 0), (rtype, rid)
        return decode_pairs(content)


# ----------------------------------------------------------------------------- the adapter process

# moves the socket to fd 3, sets LISTEN_PID to its own pid and execs the adapter (same pid)
EXEC_WITH_FD3 = """
import os, sys
fd = int(sys.argv[1])
os.dup2(fd, 3)
os.close(fd)
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[2], sys.argv[2:])
"""


class AdapterProcess:
    """An adapter as rein runs it: a listening socket as fd 3, LISTEN_FDS=1, LISTEN_PID=its pid, in a temp dir of
    its own. `command` is its program and arguments; `environment()` what it adds to the environment (called once
    the dir exists). The Ruby and Perl adapters' suites run theirs through it too."""

    tag = "adapter"
    stdout_apart = True  # its stdout in stdout.log; else with stderr in stderr.log

    def __init__(self, command, family="unix", env=None):
        self.dir = tempfile.mkdtemp(prefix="rein-%s-" % self.tag)
        if family == "unix":
            self.address = os.path.join(self.dir, "app.sock")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(self.address)
        else:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
            self.address = listener.getsockname()
        listener.listen(128)
        fd = fcntl.fcntl(listener.fileno(), fcntl.F_DUPFD_CLOEXEC, 10)  # never 3 itself
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        self.stdout_path = os.path.join(self.dir, "stdout.log") if self.stdout_apart else self.stderr_path
        cmd = [sys.executable, "-c", EXEC_WITH_FD3, str(fd)] + list(command)
        environ = dict(os.environ, LISTEN_FDS="1", **self.environment(), **(env or {}))
        with open(self.stderr_path, "wb") as err, open(self.stdout_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(fd,),
                                         env=environ, cwd=self.dir)
        os.close(fd)
        listener.close()  # the adapter has its own copy, as with rein

    def environment(self):
        return {}

    def wait_ready(self, timeout=20.0):
        """rein's readiness probe: GET_VALUES answered on a fresh connection."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with FcgiClient(self.address, timeout=timeout) as client:
                    return client.get_values()
            except (OSError, AssertionError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("adapter not ready; stderr:\n" + self.stderr())
                time.sleep(0.01)

    def client(self):
        return FcgiClient(self.address)

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_stderr(self, text, timeout=10.0):
        return wait_for(lambda: text in self.stderr(), timeout, "%r in the adapter's stderr" % text)

    def terminate(self, timeout=15.0):
        """SIGTERM, then the exit code (the process must exit within timeout)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("adapter did not exit within %s s after SIGTERM" % timeout)

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if os.environ.get("SHOW_ADAPTER_STDERR"):
            sys.stderr.write("\n--- adapter stderr (%s)\n%s---\n" % (" ".join(self.proc.args[4:]), self.stderr()))
        shutil.rmtree(self.dir, ignore_errors=True)


class Adapter(AdapterProcess):
    """rein's Python adapter serving `module` (`-`: a canned responder, --bench's floor)."""

    tag = "py"

    def __init__(self, module, *args, family="unix", env=None):
        cmd = [sys.executable, ADAPTER, "--module", module, "--path", HERE] + list(args)
        if module == "-":
            cmd = [sys.executable, "-c", CANNED_RESPONDER]
        super().__init__(cmd, family=family, env=env)

    def wait_ready(self, timeout=10.0):
        return super().wait_ready(timeout)


def run_check(module, *args):
    proc = subprocess.run([sys.executable, ADAPTER, "--module", module, "--path", HERE, "--check"] + list(args),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    return proc.returncode, proc.stderr.decode()


def upload_in_thread(client, rid, data, chunk=32768):
    """Sends data as STDIN records from another thread, so that the response can be read meanwhile."""
    def send():
        for i in range(0, len(data), chunk):
            client.send(record(STDIN, rid, data[i:i + chunk]))
        client.send(record(STDIN, rid))
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def payload(size):
    block = hashlib.sha256(b"rein").digest() * 2048  # 64 KiB of varied bytes
    return (block * (size // len(block) + 1))[:size]


# ----------------------------------------------------------------------------- tests shared by both protocols

class Common:
    """Behaviour every protocol must have: FastCGI handling, keep-alive, errors, streaming."""

    adapter = None

    def get(self, path, **kw):
        with self.adapter.client() as client:
            return client.request(path, **kw)

    def test_hello(self):
        response = self.get("/hello")
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, b"Hello, world")
        self.assertEqual(response.headers["content-type"], "text/plain")
        self.assertEqual((response.app_status, response.protocol_status), (0, REQUEST_COMPLETE))
        self.assertEqual(response.stdout_records, 1, "head and body coalesced in one record")

    def test_keepalive(self):
        with self.adapter.client() as client:
            for i in range(50):
                response = client.request("/hello")
                self.assertEqual((response.status, response.body), (200, b"Hello, world"), i)

    def test_request_ids_are_honoured(self):
        with self.adapter.client() as client:
            for rid in (7, 65535, 1):
                self.assertEqual(client.request("/hello", rid=rid).body, b"Hello, world")

    def test_get_values_before_any_request(self):
        with self.adapter.client() as client:
            values = client.get_values(("FCGI_MPXS_CONNS", "FCGI_MAX_CONNS", "FCGI_MAX_REQS", "X_UNKNOWN"))
            self.assertEqual(values["FCGI_MPXS_CONNS"], "0")
            self.assertGreater(int(values["FCGI_MAX_CONNS"]), 0)
            self.assertGreater(int(values["FCGI_MAX_REQS"]), 0)
            self.assertNotIn("X_UNKNOWN", values)
            self.assertEqual(client.request("/hello").body, b"Hello, world")
            self.assertEqual(client.get_values(("FCGI_MPXS_CONNS",)), {"FCGI_MPXS_CONNS": "0"})

    def test_unknown_management_record(self):
        with self.adapter.client() as client:
            client.send(record(99, 0, b"whatever"))
            self.assertEqual(client.read_record(), (UNKNOWN_TYPE, 0, bytes((99,)) + bytes(7)))
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_unknown_role(self):
        with self.adapter.client() as client:
            client.begin(client.params(path="/hello"), role=AUTHORIZER)
            client.send(record(STDIN, 1))
            response = client.read_response()
            self.assertEqual(response.protocol_status, UNKNOWN_ROLE)
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_without_keep_conn_the_connection_closes(self):
        with self.adapter.client() as client:
            response = client.request("/hello", keep=False)
            self.assertEqual(response.body, b"Hello, world")
            self.assertIsNone(client.read_record())

    def test_a_second_request_on_a_busy_connection_is_refused(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=b"x" * 30))
            client.send(record(STDIN, 1, b"first line\n"))
            response = client.read_response(until=lambda r: b"first line\n" in r.stdout)
            client.begin(client.params(path="/hello"), rid=2)  # no multiplexing
            rtype, rid, content = client.read_record()
            self.assertEqual((rtype, rid, content[4]), (END_REQUEST, 2, CANT_MPX_CONN))
            client.send(record(STDIN, 1, b"x" * 19) + record(STDIN, 1))
            response = client.read_response(response=response)
            self.assertTrue(response.body.startswith(b"first line\n" + b"x" * 19), response.body)
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_half_closed_connection_still_gets_the_response(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/upload", body=b"abc"), keep=False)
            client.send(record(STDIN, 1, b"abc") + record(STDIN, 1))
            client.sock.shutdown(socket.SHUT_WR)
            self.assertEqual(client.read_response().json()["bytes"], 3)
            self.assertIsNone(client.read_record())

    def test_unread_body_is_dropped_before_the_next_request(self):
        with self.adapter.client() as client:
            body = payload(300000)
            client.begin(client.params("POST", "/hello", body=body))
            sender = upload_in_thread(client, 1, body)
            self.assertEqual(client.read_response().body, b"Hello, world")
            sender.join(10)
            for _ in range(3):
                self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_error_is_500(self):
        response = self.get("/error")
        self.assertEqual(response.status, 500)
        self.assertEqual(response.body, b"Internal Server Error\n")
        self.assertEqual(response.protocol_status, REQUEST_COMPLETE)
        self.adapter.wait_stderr("ZeroDivisionError: the /error route always fails")
        self.assertIn("Traceback (most recent call last)", self.adapter.stderr())
        self.assertEqual(self.get("/hello").body, b"Hello, world")

    def test_upload_5mb_streamed(self):
        body = payload(5 * 1024 * 1024)
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/upload", body=body))
            sender = upload_in_thread(client, 1, body)
            response = client.read_response()
            sender.join(10)
            self.assertEqual(response.status, 200)
            result = response.json()
            self.assertEqual(result["bytes"], len(body))
            self.assertEqual(result["sha256"], hashlib.sha256(body).hexdigest())
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_abort_while_streaming(self):
        with self.adapter.client() as client:
            client.begin(client.params(path="/slow_stream"))
            client.send(record(STDIN, 1))
            client.read_response(until=lambda r: b"slow 001" in r.stdout)
            client.send(record(ABORT_REQUEST, 1))
            response = client.read_response()  # END_REQUEST comes early: the app stopped
            self.assertLess(response.body.count(b"\n"), 100, response.body)
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_tcp_listener(self):
        adapter = Adapter(*self.module_args, family="tcp")
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                for _ in range(3):
                    self.assertEqual(client.request("/hello").body, b"Hello, world")
            self.assertEqual(adapter.terminate(), 0)
        finally:
            adapter.cleanup()

    def test_sigterm_finishes_requests_in_flight(self):
        adapter = Adapter(*self.module_args)
        try:
            adapter.wait_ready()
            idle = adapter.client()  # an idle keep-alive connection: closed by the adapter
            self.assertEqual(idle.request("/hello").body, b"Hello, world")
            busy = adapter.client()
            busy.begin(busy.params(path="/sleep", query="ms=700"))
            busy.send(record(STDIN, 1))
            adapter.wait_stderr("sleeping 700 ms")  # the request reached the app
            adapter.proc.send_signal(signal.SIGTERM)
            self.assertIsNone(idle.read_record(), "idle connection closed at shutdown")
            response = busy.read_response()
            self.assertEqual((response.status, response.body), (200, b"slept 700 ms"))
            self.assertEqual(adapter.proc.wait(15), 0)
            with self.assertRaises(OSError):
                FcgiClient(adapter.address, timeout=2).get_values()  # nobody accepts any more
            idle.close()
            busy.close()
        finally:
            adapter.cleanup()


# ----------------------------------------------------------------------------- WSGI

class WsgiTests(Common, unittest.TestCase):
    module_args = ("wsgi_app", "--threads", "4")
    multithread = True

    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter(*cls.module_args)
        cls.adapter.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.adapter.cleanup()

    def test_env(self):
        response = self.get("/env/caf\u00e9".encode("utf-8").decode("latin-1"),
                            query="a=1&b=%20", headers=[("X-Test", "yes")])
        env = response.json()
        self.assertEqual(env["PATH_INFO_decoded"], "/env/caf\u00e9")
        self.assertEqual(env["SCRIPT_NAME"], "")
        self.assertEqual(env["QUERY_STRING"], "a=1&b=%20")
        self.assertEqual(env["HTTP_X_TEST"], "yes")
        self.assertEqual(env["wsgi.url_scheme"], "http")
        self.assertIs(env["wsgi.multithread"], self.multithread)
        self.assertIs(env["wsgi.multiprocess"], True)
        self.assertIs(env["wsgi.run_once"], False)
        self.assertEqual(env["wsgi.version"], [1, 0])
        self.assertEqual((env["SERVER_NAME"], env["SERVER_PORT"]), ("example.test", "8080"))
        self.assertTrue(env["native_strings"])
        self.assertTrue(env["has_file_wrapper"])

    def test_long_params(self):
        value = "v" * 70000  # four-byte lengths, params spread over two records
        env = self.get("/env", headers=[("X-Test", value)]).json()
        self.assertEqual(env["HTTP_X_TEST"], value)

    def test_env_https_and_script_name(self):
        env = self.get("/env", script_name="/app", extra=[("HTTPS", "on"), ("REQUEST_SCHEME", "https")]).json()
        self.assertEqual(env["wsgi.url_scheme"], "https")
        self.assertEqual((env["SCRIPT_NAME"], env["PATH_INFO"]), ("/app", "/env"))
        self.assertEqual(env["REQUEST_URI"], "/app/env")

    @staticmethod
    def ready_made(entries):
        """What rein sends a WSGI app: the environ's str entries in one REIN_WSGI_ENVIRON param."""
        blob = "\0".join(x.encode("utf-8").decode("latin-1") for pair in entries for x in pair)
        return [("REIN_WSGI_ENVIRON", blob)]

    def test_ready_made_environ(self):
        entries = [("SCRIPT_NAME", "/app"), ("PATH_INFO", "/env/caf\u00e9"), ("REQUEST_URI", "/app/env/caf%C3%A9?all"),
                   ("QUERY_STRING", "all"), ("REQUEST_METHOD", "GET"), ("SERVER_PROTOCOL", "HTTP/1.1"),
                   ("REMOTE_ADDR", "192.0.2.7"), ("REMOTE_PORT", "54321"), ("SERVER_NAME", "example.test"),
                   ("SERVER_PORT", "8443"), ("HTTPS", "on"), ("HTTP_X_EMPTY", ""), ("HTTP_HOST", "example.test"),
                   ("wsgi.url_scheme", "https")]
        with self.adapter.client() as client:
            client.begin(self.ready_made(entries))
            client.send(record(STDIN, 1))
            env = client.read_response().json()
        self.assertEqual(env["PATH_INFO_decoded"], "/env/caf\u00e9", "bytes as latin-1, as PEP 3333 wants")
        for name, value in entries:
            if name != "PATH_INFO":
                self.assertEqual(env[name], value, name)
        self.assertNotIn("REIN_WSGI_ENVIRON", env)
        self.assertEqual((env["wsgi.version"], env["wsgi.multithread"]), ([1, 0], self.multithread))
        self.assertTrue(env["native_strings"])

    def test_malformed_ready_made_environ_closes_the_connection(self):
        with self.adapter.client() as client:
            client.begin([("REIN_WSGI_ENVIRON", "PATH_INFO\0/env\0REQUEST_METHOD")])
            try:
                client.send(record(STDIN, 1))
                answer = client.read_record()
            except (BrokenPipeError, ConnectionResetError):
                answer = None
            self.assertIsNone(answer, "closed without an answer: rein answers 502")
        self.assertEqual(self.get("/hello").status, 200, "the adapter still serves")

    def test_echo_streams_both_ways(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=b"x" * 23))
            client.send(record(STDIN, 1, b"first line\n"))
            # the first line comes back before the rest of the body is even sent
            response = client.read_response(until=lambda r: b"first line\n" in r.stdout)
            self.assertIn(b"Status: 200 OK", response.stdout)
            client.send(record(STDIN, 1, b"second") + record(STDIN, 1, b" part\n") + record(STDIN, 1))
            response = client.read_response(response=response)
            self.assertEqual(response.body, b"first line\nsecond part\n\n#total=23\n")
            self.assertEqual(response.app_status, 0)

    def test_echo_large(self):
        body = payload(2 * 1024 * 1024 + 17)
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=body))
            sender = upload_in_thread(client, 1, body, chunk=60000)
            response = client.read_response()
            sender.join(10)
            self.assertEqual(response.body, body + b"\n#total=%d\n" % len(body))

    def test_input_lines_and_eof(self):
        body = b"abcdefgh\n" + b"line\n" * 40 + b"no newline at the end"
        result = self.get("/lines", method="POST", body=body).json()
        self.assertEqual(result, {"first": "abcde", "iterated": 42, "rest": 0, "eof": True})

    def test_stream_and_close(self):
        with self.adapter.client() as client:
            before = client.request("/closed").json()["closed"]
            response = client.request("/stream")
            self.assertEqual(response.body, b"".join(b"chunk %03d\n" % i for i in range(100)))
            self.assertGreaterEqual(response.stdout_records, 100, "every chunk sent as produced")
            self.assertEqual(client.request("/closed").json()["closed"], before + 1)

    def test_write_callable(self):
        self.assertEqual(self.get("/write").body, b"written 1\nwritten 2\nreturned\n")

    def test_file_wrapper(self):
        self.assertEqual(self.get("/file").body, b"0123456789" * 10000)

    def test_exc_info_replaces_the_response(self):
        response = self.get("/exc_info")
        self.assertEqual(response.status, 500)
        self.assertEqual(response.headers["x-exc-info"], "yes")
        self.assertEqual(response.body, b"custom error body\n")

    def test_error_after_head_cuts_the_body(self):
        response = self.get("/error_after_head")
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, b"partial ")
        self.assertEqual((response.app_status, response.protocol_status), (1, REQUEST_COMPLETE))
        self.adapter.wait_stderr("RuntimeError: boom after the head was sent")
        self.assertEqual(self.get("/hello").body, b"Hello, world")

    def test_wsgi_errors(self):
        self.assertEqual(self.get("/errors").body, b"logged")
        self.adapter.wait_stderr("wsgi_app: message to wsgi.errors\n")

    def test_status(self):
        for code in (201, 404, 418, 503):
            response = self.get("/status/%d" % code)
            self.assertEqual((response.status, response.headers["x-status"]), (code, str(code)))
            self.assertEqual(response.body, b"status %d\n" % code)
        response = self.get("/status/204")
        self.assertEqual((response.status, response.body), (204, b""))

    def test_abort_while_streaming_closes_the_iterable(self):
        with self.adapter.client() as client:
            before = client.request("/closed").json()["closed"]
            self.test_abort_while_streaming()
            self.assertEqual(client.request("/closed").json()["closed"], before + 1)

    def test_streamed_response_with_an_unread_body(self):
        body = payload(3 * 1024 * 1024)
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/stream", body=body))
            sender = upload_in_thread(client, 1, body)
            response = client.read_response()
            sender.join(10)
            self.assertEqual(response.body, b"".join(b"chunk %03d\n" % i for i in range(100)))
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_pipelined_requests_are_answered_in_turn(self):
        """rein pipelines bodiless requests to WSGI instances as to PHP-FPM: the next request's records are
        already in the socket while a streamed response is polled for aborts between its chunks."""
        streamed = b"".join(b"chunk %03d\n" % i for i in range(100))
        closed = self.get("/closed").json()["closed"]
        with self.adapter.client() as client:
            for path in ("/stream", "/hello", "/stream", "/hello"):
                client.begin(client.params("GET", path))
                client.send(record(STDIN, 1))
            for expected in (streamed, b"Hello, world", streamed, b"Hello, world"):
                response = client.read_response()
                self.assertEqual((response.status, response.body), (200, expected))
            self.assertEqual(self.get("/closed").json()["closed"], closed + 2, "each streamed iterable closed")

    def test_requests_written_whole_as_rein_writes_them(self):
        """rein writes a request's records in one go (PARAMS in one record, its end, and for a request without a
        body the empty STDIN): several such requests at once, one with a body among them, each answered."""
        def whole(path, body=b""):
            params = encode_pairs(FcgiClient.params("POST" if body else "GET", path, body=body))
            return (record(BEGIN_REQUEST, 1, struct.pack(">HB5x", RESPONDER, KEEP_CONN)) + record(PARAMS, 1, params)
                    + record(PARAMS, 1) + stdin_records(1, body) + record(STDIN, 1))
        with self.adapter.client() as client:
            client.send(whole("/hello") + whole("/echo", b"line\nrest") + whole("/hello") + whole("/hello"))
            for expected in (b"Hello, world", b"line\nrest\n#total=9\n", b"Hello, world", b"Hello, world"):
                response = client.read_response()
                self.assertEqual((response.status, response.body), (200, expected))

    def test_abort_while_the_app_reads(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=b"x" * 100))
            client.send(record(STDIN, 1, b"first line\n"))
            client.read_response(until=lambda r: b"first line\n" in r.stdout)
            client.send(record(ABORT_REQUEST, 1))
            response = client.read_response()
            self.assertEqual(response.protocol_status, REQUEST_COMPLETE)
            self.assertEqual(client.request("/hello").body, b"Hello, world")


class WsgiOneLoopTests(WsgiTests):
    """--threads 1: everything above, with every connection served by the main thread's one loop."""

    module_args = ("wsgi_app",)
    multithread = False

    @staticmethod
    def bodiless(path):
        params = encode_pairs(FcgiClient.params("GET", path))
        return (record(BEGIN_REQUEST, 1, struct.pack(">HB5x", RESPONDER, KEEP_CONN)) + record(PARAMS, 1, params)
                + record(PARAMS, 1) + record(STDIN, 1))

    def test_connections_with_pipelined_requests_take_turns(self):
        """Two connections, as from rein's two worker threads, each with requests queued: every request is
        answered on its own connection, in its order."""
        clients = [self.adapter.client() for _ in range(2)]
        try:
            paths = [("/hello", "/status/201", "/hello"), ("/status/202", "/hello", "/status/203")]
            for client, mine in zip(clients, paths):
                client.send(b"".join(self.bodiless(p) for p in mine))
            for client, mine in zip(clients, paths):
                for path in mine:
                    status = int(path.rsplit("/", 1)[1]) if path.startswith("/status") else 200
                    self.assertEqual(client.read_response().status, status, path)
        finally:
            for client in clients:
                client.close()

    def test_a_partial_record_holds_no_other_connection(self):
        """The loop never waits for a request to come: a connection holding half a record leaves the others
        served, and its request runs once the rest arrives."""
        with self.adapter.client() as slow, self.adapter.client() as other:
            request = self.bodiless("/hello")
            slow.send(request[:5])
            self.assertEqual(other.request("/hello").body, b"Hello, world")
            slow.send(request[5:])
            self.assertEqual(slow.read_response().body, b"Hello, world")

    def test_idle_and_closed_connections_cost_nothing(self):
        idle = [self.adapter.client() for _ in range(5)]
        try:
            for client in idle:
                self.assertEqual(client.request("/hello").body, b"Hello, world")
            idle.pop().close()
            with self.adapter.client() as client:
                self.assertEqual(client.request("/hello").body, b"Hello, world")
                self.assertEqual(client.get_values()["FCGI_MAX_REQS"], "1")
        finally:
            for client in idle:
                client.close()


class WsgiThreadsTests(unittest.TestCase):
    """--threads bounds the requests running at once; idle connections do not hold a slot."""

    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter("wsgi_app", "--threads", "2")
        cls.adapter.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.adapter.cleanup()

    def test_values_and_multithread(self):
        with self.adapter.client() as client:
            self.assertEqual(client.get_values()["FCGI_MAX_REQS"], "2")
            self.assertIs(client.request("/env").json()["wsgi.multithread"], True)

    def test_idle_connections_hold_no_slot(self):
        idle = [self.adapter.client() for _ in range(5)]
        try:
            for client in idle:
                self.assertEqual(client.request("/hello").body, b"Hello, world")
            with self.adapter.client() as client:
                self.assertEqual(client.request("/hello").body, b"Hello, world")
        finally:
            for client in idle:
                client.close()

    def test_thread_stack_size_applies_to_the_threads(self):
        adapter = Adapter("wsgi_app", "--thread-stack-size", "262144")
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                self.assertEqual(client.request("/stack_size").body, b"262144\n")
            with self.adapter.client() as client:
                self.assertEqual(client.request("/stack_size").body, b"0\n")
        finally:
            adapter.cleanup()

    def test_at_most_threads_requests_at_once(self):
        with self.adapter.client() as client:
            client.request("/maxconc")
        results = []

        def one():
            with self.adapter.client() as client:
                results.append(client.request("/sleep", query="ms=300").status)

        threads = [threading.Thread(target=one) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        self.assertEqual(results, [200] * 5)
        with self.adapter.client() as client:
            self.assertEqual(client.request("/maxconc").json()["max"], 2)

    def test_single_thread_is_not_multithread(self):
        adapter = Adapter("wsgi_app")
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                self.assertIs(client.request("/env").json()["wsgi.multithread"], False)
                self.assertEqual(client.get_values()["FCGI_MAX_REQS"], "1")
        finally:
            adapter.cleanup()


# ----------------------------------------------------------------------------- ASGI

class AsgiTests(Common, unittest.TestCase):
    module_args = ("asgi_app", "--protocol", "asgi")

    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter(*cls.module_args)
        cls.adapter.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.adapter.cleanup()

    def test_lifespan_state(self):
        self.assertEqual(self.get("/lifespan").json(), {"started": True})

    def test_scope(self):
        scope = self.get("/scope/caf\u00e9".encode("utf-8").decode("latin-1"), query="a=1&b=%20",
                         headers=[("X-Test", "yes"), ("X-Two-Words", "a b")]).json()
        self.assertEqual(scope["type"], "http")
        self.assertEqual(scope["asgi"], {"version": "3.0", "spec_version": "2.3"})
        self.assertEqual(scope["http_version"], "1.1")
        self.assertEqual(scope["method"], "GET")
        self.assertEqual(scope["scheme"], "http")
        self.assertEqual(scope["path"], "/scope/caf\u00e9")
        self.assertEqual(scope["raw_path"], "/scope/caf\u00e9".encode("utf-8").decode("latin-1"))
        self.assertEqual(scope["root_path"], "")
        self.assertEqual(scope["query_string"], "a=1&b=%20")
        self.assertIn(["x-test", "yes"], scope["headers"])
        self.assertIn(["x-two-words", "a b"], scope["headers"])
        self.assertIn(["host", "example.test:8080"], scope["headers"])
        self.assertEqual(scope["client"], ["192.0.2.7", 54321])
        self.assertEqual(scope["server"], ["example.test", 8080])
        self.assertEqual(scope["state"], {"started": True})

    def test_long_params(self):
        value = "v" * 70000  # four-byte lengths, params spread over two records
        scope = self.get("/scope", headers=[("X-Test", value)]).json()
        self.assertIn(["x-test", value], scope["headers"])

    @staticmethod
    def compact(fields, target=None):
        """What rein sends an ASGI app: the scope's fields in one REIN_ASGI_SCOPE param (then REIN_TARGET)."""
        blob = "\0".join(f.encode("utf-8").decode("latin-1") for f in fields)
        return [("REIN_ASGI_SCOPE", blob)] + ([("REIN_TARGET", target)] if target else [])

    def test_ready_made_scope(self):
        fields = ["PUT", "2", "https", "/app/scope/caf\u00e9", "/app/scope/caf%C3%A9", "a=1", "/app",
                  "192.0.2.7", "54321", "example.test", "8443",
                  "host", "example.test:8443", "x-two", "a", "x-two", "b", "content-length", "0"]
        with self.adapter.client() as client:
            client.begin(self.compact(fields))
            client.send(record(STDIN, 1))
            scope = client.read_response().json()
        self.assertEqual((scope["method"], scope["http_version"], scope["scheme"]), ("PUT", "2", "https"))
        self.assertEqual((scope["path"], scope["raw_path"], scope["root_path"]),
                         ("/app/scope/caf\u00e9", "/app/scope/caf%C3%A9", "/app"))
        self.assertEqual(scope["query_string"], "a=1")
        self.assertEqual((scope["client"], scope["server"]), (["192.0.2.7", 54321], ["example.test", 8443]))
        self.assertEqual(scope["headers"], [["host", "example.test:8443"], ["x-two", "a"], ["x-two", "b"],
                                            ["content-length", "0"]])
        self.assertEqual(scope["state"], {"started": True})

    def test_ready_made_scope_without_client_or_headers(self):
        fields = ["GET", "1.1", "http", "/scope", "/scope", "", "", "", "", "localhost", "80"]
        with self.adapter.client() as client:
            client.begin(self.compact(fields))
            client.send(record(STDIN, 1))
            scope = client.read_response().json()
        self.assertEqual((scope["client"], scope["headers"]), (None, []))

    def test_malformed_ready_made_scope_closes_the_connection(self):
        with self.adapter.client() as client:
            client.begin(self.compact(["GET", "1.1", "http", "/scope"]))
            # The adapter may close as soon as it has read the scope, before the body's end is sent: the
            # connection ends without an answer either way.
            try:
                client.send(record(STDIN, 1))
                answer = client.read_record()
            except (BrokenPipeError, ConnectionResetError):
                answer = None
            self.assertIsNone(answer, "closed without an answer: rein answers 502")
        self.assertEqual(self.get("/hello").status, 200, "the adapter still serves")

    def test_scope_https_root_path_and_body_headers(self):
        scope = self.get("/scope", method="POST", body=b"abc", script_name="/app",
                         extra=[("HTTPS", "on"), ("SERVER_PROTOCOL", "HTTP/2.0")]).json()
        self.assertEqual(scope["scheme"], "https")
        self.assertEqual(scope["http_version"], "2")
        self.assertEqual((scope["root_path"], scope["path"], scope["raw_path"]), ("/app", "/app/scope", "/app/scope"))
        self.assertIn(["content-length", "3"], scope["headers"])
        self.assertIn(["content-type", "application/octet-stream"], scope["headers"])

    def test_echo_streams_both_ways(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=b"x" * 12))
            client.send(record(STDIN, 1, b"first chunk "))
            response = client.read_response(until=lambda r: b"first chunk " in r.stdout)
            client.send(record(STDIN, 1, b"second") + record(STDIN, 1))
            response = client.read_response(response=response)
            self.assertEqual(response.body, b"first chunk second")
            self.assertEqual(response.app_status, 0)

    def test_echo_5mb_with_backpressure(self):
        body = payload(5 * 1024 * 1024)
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=body))
            sender = upload_in_thread(client, 1, body)
            response = client.read_response()
            sender.join(10)
            self.assertEqual(len(response.body), len(body))
            self.assertEqual(response.body, body)
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_stream(self):
        response = self.get("/stream")
        self.assertEqual(response.body, b"".join(b"event %d\n" % i for i in range(5)) + b"done\n")
        self.assertGreaterEqual(response.stdout_records, 6)

    def test_error_after_start_cuts_the_body(self):
        response = self.get("/error_after_start")
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, b"partial ")
        self.assertEqual((response.app_status, response.protocol_status), (1, REQUEST_COMPLETE))
        self.adapter.wait_stderr("RuntimeError: boom after the head was sent")

    def test_no_response_is_500(self):
        response = self.get("/noresponse")
        self.assertEqual(response.status, 500)
        self.adapter.wait_stderr("without sending a response")

    def test_abort_gives_http_disconnect(self):
        with self.adapter.client() as client:
            before = client.request("/disconnects").json()["disconnects"]
            client.begin(client.params("POST", "/wait_disconnect", body=b"abc"))
            client.send(record(STDIN, 1, b"abc") + record(STDIN, 1))
            # nothing comes back until the abort: the app is blocked in receive()
            client.sock.settimeout(0.3)
            with self.assertRaises(socket.timeout):
                client.read_record()
            client.sock.settimeout(20)
            client.send(record(ABORT_REQUEST, 1))
            response = client.read_response()
            self.assertEqual(response.protocol_status, REQUEST_COMPLETE)
            wait_for(lambda: client.request("/disconnects").json()["disconnects"] == before + 1,
                     what="http.disconnect seen by the app")

    def test_abort_while_streaming_raises_in_send(self):
        self.test_abort_while_streaming()
        self.adapter.wait_stderr("asgi_app: slow_stream stopped: ClientDisconnected")

    def test_disconnect_after_the_response(self):
        self.assertEqual(self.get("/after_response", method="POST", body=b"x").body, b"done")
        self.adapter.wait_stderr("asgi_app: after response got http.disconnect")

    def test_sigterm_runs_lifespan_shutdown(self):
        adapter = Adapter(*self.module_args)
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                self.assertEqual(client.request("/lifespan").json(), {"started": True})
            self.assertEqual(adapter.terminate(), 0)
            self.assertIn("asgi_app: lifespan shutdown", adapter.stderr())
        finally:
            adapter.cleanup()

    def test_lifespan_startup_failure_exits_1(self):
        adapter = Adapter(*self.module_args, env={"ASGI_APP_FAIL_STARTUP": "1"})
        try:
            self.assertEqual(adapter.proc.wait(15), 1)
            self.assertIn("asgi_app: startup refused", adapter.stderr())
        finally:
            adapter.cleanup()


class PrefixTests(unittest.TestCase):
    """--prefix splits PATH_INFO only when rein sends no SCRIPT_NAME; otherwise SCRIPT_NAME is trusted."""

    def check(self, module_args, env_route, read):
        adapter = Adapter(*module_args, "--prefix", "/app/")
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                params = [(k, v) for k, v in client.params(path="/app" + env_route) if k != "SCRIPT_NAME"]
                client.begin(params)
                client.send(record(STDIN, 1))
                self.assertEqual(read(client.read_response().json()), ("/app", env_route))
                sent = client.request(env_route, script_name="/mounted")  # trusted as sent
                self.assertEqual(read(sent.json()), ("/mounted", env_route))
        finally:
            adapter.cleanup()

    def test_wsgi(self):
        self.check(("wsgi_app",), "/env", lambda env: (env["SCRIPT_NAME"], env["PATH_INFO"]))

    def test_asgi(self):
        self.check(("asgi_app", "--protocol", "asgi"), "/scope",
                   lambda scope: (scope["root_path"], scope["path"][len(scope["root_path"]):]))


# ----------------------------------------------------------------------------- loading and --check

class LoadTests(unittest.TestCase):
    def test_check_ok(self):
        self.assertEqual(run_check("wsgi_app"), (0, ""))
        self.assertEqual(run_check("asgi_app", "--protocol", "asgi", "--callable", "app"), (0, ""))

    def test_check_warns_about_the_wrong_protocol(self):
        code, stderr = run_check("asgi_app")  # protocol wsgi by default
        self.assertEqual(code, 0)
        self.assertIn("is a coroutine function: an ASGI app?", stderr)
        code, stderr = run_check("wsgi_app", "--protocol", "asgi")
        self.assertEqual(code, 0)
        self.assertIn("a WSGI app?", stderr)

    def test_check_syntax_error(self):
        code, stderr = run_check("broken_syntax")
        self.assertEqual(code, 1)
        self.assertIn("Traceback (most recent call last)", stderr)
        self.assertIn("broken_syntax.py\", line 4", stderr)
        self.assertIn("SyntaxError", stderr)

    def test_check_import_error(self):
        code, stderr = run_check("import_error")
        self.assertEqual(code, 1)
        self.assertIn("import_error.py\", line 3, in <module>", stderr)
        self.assertIn("ModuleNotFoundError: No module named 'rein_no_such_module_xyz'", stderr)
        self.assertNotIn("<frozen importlib", stderr)

    def test_check_missing_module(self):
        code, stderr = run_check("rein_no_such_app")
        self.assertEqual(code, 1)
        self.assertIn("ModuleNotFoundError: No module named 'rein_no_such_app'", stderr)

    def test_check_no_callable(self):
        self.assertEqual(run_check("no_callable"), (1, "module 'no_callable' has no callable 'application'\n"))
        code, stderr = run_check("no_callable", "--callable", "app")
        self.assertEqual(code, 1)
        self.assertIn("not callable", stderr)
        self.assertEqual(run_check("no_callable", "--callable", "something_else"), (0, ""))

    def test_serving_mode_fails_the_same_way(self):
        for module in ("broken_syntax", "import_error", "no_callable"):
            adapter = Adapter(module)
            try:
                self.assertEqual(adapter.proc.wait(15), 1, module)
                self.assertTrue(adapter.stderr().strip(), module)
            finally:
                adapter.cleanup()


# ----------------------------------------------------------------------------- --bench

def cpu_seconds(pid):
    """User + system CPU time of a process (Linux /proc), 0 elsewhere."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


# --bench's floor: a responder that answers each recv() with a canned response, parsing nothing
CANNED_RESPONDER = """
import socket, struct
def record(rtype, content):
    return struct.pack(">BBHHBx", 1, rtype, 0 if rtype == 10 else 1, len(content), 0) + content
listener = socket.socket(fileno=3)
conn, _ = listener.accept()
conn.recv(4096)
conn.sendall(record(10, b""))  # an empty GET_VALUES_RESULT for wait_ready()
conn.close()
conn, _ = listener.accept()
response = (record(6, b"Status: 200 OK\\r\\nContent-Type: text/plain\\r\\n\\r\\nHello, world")
            + record(6, b"") + record(3, bytes(8)))
while conn.recv(65536):
    conn.sendall(response)
"""


def bench(seconds=2.0):
    """Requests/second of /hello, sequential on one keep-alive connection, for both protocols."""
    for label, args in (("floor (canned)", ("-",)), ("wsgi", ("wsgi_app",)),
                        ("wsgi --threads 4", ("wsgi_app", "--threads", "4")),
                        ("asgi", ("asgi_app", "--protocol", "asgi"))):
        adapter = Adapter(*args)
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                params = encode_pairs(client.params(path="/hello"))
                request = (record(BEGIN_REQUEST, 1, struct.pack(">HB5x", RESPONDER, KEEP_CONN))
                           + record(PARAMS, 1, params) + record(PARAMS, 1) + record(STDIN, 1))
                for _ in range(1000):  # warm up
                    client.send(request)
                    client.read_response()
                count, start, cpu = 0, time.perf_counter(), cpu_seconds(adapter.proc.pid)
                while time.perf_counter() - start < seconds:
                    client.send(request)
                    assert client.read_response().body == b"Hello, world"
                    count += 1
                elapsed = time.perf_counter() - start
                cpu = cpu_seconds(adapter.proc.pid) - cpu
            print("%-18s %7.0f req/s  %6.1f us/request round trip, adapter CPU %5.1f us/request"
                  % (label, count / elapsed, elapsed / count * 1e6, cpu / count * 1e6))
            adapter.terminate()
        finally:
            adapter.cleanup()


if __name__ == "__main__":
    if "--bench" in sys.argv:
        bench()
    else:
        unittest.main()
