#!/usr/bin/env python3
"""Tests for rein's Ruby adapter (src/supervisor/ruby/rein_adapter.rb) on a raw FastCGI socket.

The adapter is started as rein starts it (a listening socket as fd 3, LISTEN_FDS=1) with the apps of this
directory; the FastCGI client and helpers are the Python adapter's suite's (tests/apps/python/test_adapter.py).

    python3 tests/apps/ruby/test_rack_adapter.py
    SHOW_ADAPTER_STDERR=1 python3 tests/apps/ruby/test_rack_adapter.py    # prints each adapter's stderr
"""

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
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from test_adapter import (  # noqa: E402
    ABORT_REQUEST, BEGIN_REQUEST, CANT_MPX_CONN, END_REQUEST, KEEP_CONN, PARAMS, REQUEST_COMPLETE,
    RESPONDER, STDIN, STDOUT, UNKNOWN_ROLE, UNKNOWN_TYPE, AdapterProcess, FcgiClient, encode_pairs, payload, record,
    upload_in_thread, wait_for,
)

ADAPTER = os.path.join(HERE, "..", "..", "..", "src", "supervisor", "kind", "ruby", "rein_adapter.rb")
AUTHORIZER = 2


class Adapter(AdapterProcess):
    """The adapter as rein runs it: `ruby rein_adapter.rb --script ...` with a listening socket as fd 3."""

    tag = "rb"
    stdout_apart = False

    def __init__(self, script, *args, family="unix", env=None):
        cmd = [shutil.which("ruby"), ADAPTER, "--script", os.path.join(HERE, script)] + list(args)
        super().__init__(cmd, family=family, env=env)

    def environment(self):
        self.hooks_log = os.path.join(self.dir, "hooks.log")
        return {"HOOKS_LOG": self.hooks_log}

    def hooks(self):
        try:
            with open(self.hooks_log) as f:
                return [line.split() for line in f]
        except FileNotFoundError:
            return []


def bodiless(path, rid=1, query=""):
    """A request without a body written whole, as rein writes it."""
    params = encode_pairs(FcgiClient.params("GET", path, query=query))
    return (record(BEGIN_REQUEST, rid, struct.pack(">HB5x", RESPONDER, KEEP_CONN)) + record(PARAMS, rid, params)
            + record(PARAMS, rid) + record(STDIN, rid))


def run_check(script, *args):
    proc = subprocess.run(["ruby", ADAPTER, "--script", os.path.join(HERE, script), "--check"] + list(args),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return proc.returncode, proc.stderr.decode()


class RackTests(unittest.TestCase):
    """FastCGI handling, the Rack environment and every kind of body: with one thread (one loop in the main
    thread) and, in RackThreadsTests, several (a thread per connection, app threads)."""

    threads = 1
    family = "unix"
    gates = 0

    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter("app.ru", "--threads", str(cls.threads), family=cls.family)
        cls.adapter.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.adapter.cleanup()

    def get(self, path, **kw):
        with self.adapter.client() as client:
            return client.request(path, **kw)

    def gate(self):
        """A file that does not exist yet: /stream?gate=F sends its last chunk once it does."""
        RackTests.gates += 1
        return os.path.join(self.adapter.dir, "gate-%d" % RackTests.gates)

    @staticmethod
    def open_gate(path):
        with open(path, "w"):
            pass

    def test_env(self):
        env = self.get("/env", query="a=1&b=%20", headers=[("X-Thing", "yes"), ("Cookie", "c=1; d=2")],
                       extra=[("HTTPS", "on"), ("SERVER_ADDR", "10.0.0.1")]).json()
        self.assertEqual(env["REQUEST_METHOD"], "GET")
        self.assertEqual((env["SCRIPT_NAME"], env["PATH_INFO"]), ("", "/env"))
        self.assertEqual(env["QUERY_STRING"], "a=1&b=%20")
        self.assertEqual(env["REQUEST_URI"], "/env?a=1&b=%20")
        self.assertEqual((env["SERVER_NAME"], env["SERVER_PORT"]), ("example.test", "8080"))
        self.assertEqual(env["SERVER_PROTOCOL"], "HTTP/1.1")
        self.assertEqual((env["REMOTE_ADDR"], env["REMOTE_PORT"]), ("192.0.2.7", "54321"))
        self.assertEqual(env["HTTP_X_THING"], "yes")
        self.assertEqual(env["HTTP_COOKIE"], "c=1; d=2")
        self.assertEqual(env["rack.url_scheme"], "https")
        self.assertEqual(env["rack.version"], [1, 3])
        self.assertEqual(env["rack.multithread"], self.threads > 1)
        self.assertIs(env["rack.multiprocess"], True)
        self.assertIs(env["rack.run_once"], False)
        self.assertIs(env["rack.hijack?"], False)
        self.assertEqual(env["rack.after_reply"], [])
        self.assertEqual(env["test.input_encoding"], "ASCII-8BIT")
        self.assertEqual(env["SERVER_SOFTWARE"], "rein")
        self.assertNotIn("CONTENT_LENGTH", env)

    def test_env_with_a_prefix(self):
        env = self.get("/env", script_name="/app").json()
        self.assertEqual((env["SCRIPT_NAME"], env["PATH_INFO"], env["REQUEST_URI"]), ("/app", "/env", "/app/env"))
        self.assertEqual(env["rack.url_scheme"], "http")

    def test_keepalive_and_request_ids(self):
        with self.adapter.client() as client:
            for rid in [1] * 20 + [7, 65535, 2]:
                self.assertEqual(client.request("/pid", rid=rid).status, 200)

    def test_get_values(self):
        with self.adapter.client() as client:
            values = client.get_values(("FCGI_MPXS_CONNS", "FCGI_MAX_CONNS", "FCGI_MAX_REQS", "X_UNKNOWN"))
            self.assertEqual(values, {"FCGI_MPXS_CONNS": "0", "FCGI_MAX_CONNS": "1024",
                                      "FCGI_MAX_REQS": str(self.threads)})
            self.assertEqual(client.request("/pid").status, 200)

    def test_unknown_management_record_and_role(self):
        with self.adapter.client() as client:
            client.send(record(99, 0, b"whatever"))
            self.assertEqual(client.read_record(), (UNKNOWN_TYPE, 0, bytes((99,)) + bytes(7)))
            client.begin(client.params(path="/pid"), role=AUTHORIZER)
            client.send(record(STDIN, 1))
            self.assertEqual(client.read_response().protocol_status, UNKNOWN_ROLE)
            self.assertEqual(client.request("/pid").status, 200)

    def test_without_keep_conn_the_connection_closes(self):
        with self.adapter.client() as client:
            self.assertEqual(client.request("/pid", keep=False).status, 200)
            self.assertIsNone(client.read_record())

    def test_echo_small_and_large_bodies_rewind(self):
        for size, kind in ((10, "StringIO"), (300000, "Tempfile")):
            body = payload(size)
            with self.adapter.client() as client:
                client.begin(client.params("POST", "/echo", body=body))
                sender = upload_in_thread(client, 1, body)
                response = client.read_response()
                sender.join(10)
            self.assertEqual(response.body, body)
            self.assertEqual(response.headers["x-length"], str(size))
            self.assertEqual(response.headers["x-rewound"], "true")
            self.assertEqual(response.headers["x-input"], kind)

    def test_chunked_body_gets_its_length(self):
        params = [p for p in FcgiClient.params("POST", "/env") if p[0] != "CONTENT_LENGTH"]
        with self.adapter.client() as client:
            client.begin(params)
            client.send(record(STDIN, 1, b"12345") + record(STDIN, 1, b"678") + record(STDIN, 1))
            self.assertEqual(client.read_response().json()["CONTENT_LENGTH"], "8")

    def test_stream_goes_out_chunk_by_chunk(self):
        gate = self.gate()
        with self.adapter.client() as client:
            client.begin(client.params(path="/stream", query="n=3&gate=" + gate))
            client.send(record(STDIN, 1))
            response = client.read_response(until=lambda r: b"chunk 1\n" in r.stdout)
            self.assertIn(b"Status: 200 OK\r\n", response.stdout)
            self.open_gate(gate)
            response = client.read_response(response=response)
        self.assertEqual(response.body, b"chunk 0\nchunk 1\nlast\n")
        self.assertEqual(response.app_status, 0)

    def test_abort_while_streaming(self):
        gate = self.gate()
        with self.adapter.client() as client:
            client.begin(client.params(path="/stream", query="n=3&gate=" + gate))
            client.send(record(STDIN, 1))
            response = client.read_response(until=lambda r: b"chunk 1\n" in r.stdout)
            client.send(record(ABORT_REQUEST, 1))
            if self.threads > 1:
                # The connection's thread answers this once it has seen the abort (one thread: at the next
                # chunk, after the gate).
                client.send(record(99, 0))
                self.assertEqual(client.read_record()[0], UNKNOWN_TYPE)
            self.open_gate(gate)
            response = client.read_response(response=response)
            self.assertEqual(response.app_status, 1)
            self.assertNotIn(b"last", response.body)
            self.assertEqual(client.request("/pid").status, 200)

    def test_file_and_call_bodies(self):
        with open(os.path.join(HERE, "app.ru"), "rb") as f:
            self.assertEqual(self.get("/file").body, f.read())
        self.assertEqual(self.get("/call").body, b"called\ntwice\n")

    def test_header_with_newlines_is_several_fields(self):
        response = self.get("/headers")
        self.assertIn(b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n", bytes(response.stdout))

    def test_after_reply_runs_after_the_response(self):
        path = os.path.join(self.adapter.dir, "after_reply")
        self.assertEqual(self.get("/after_reply", query="path=" + path).body, b"replied\n")
        wait_for(lambda: os.path.exists(path), what="the after_reply file")

    def test_error_is_500_and_logged(self):
        response = self.get("/raise")
        self.assertEqual((response.status, response.body), (500, b"Internal Server Error\n"))
        self.adapter.wait_stderr("the app failed on purpose (RuntimeError)")
        self.assertIn("app.ru:", self.adapter.stderr())
        self.assertEqual(self.get("/pid").status, 200)

    def test_pipelined_request_waits_for_the_one_in_progress(self):
        gate = self.gate()
        with self.adapter.client() as client:
            client.begin(client.params(path="/stream", query="n=2&gate=" + gate))
            client.send(record(STDIN, 1))
            first = client.read_response(until=lambda r: b"chunk 0\n" in r.stdout)
            client.send(bodiless("/pid", rid=2) + record(ABORT_REQUEST, 1))  # the abort is behind rid 2: unseen
            self.open_gate(gate)
            first = client.read_response(response=first)
            self.assertEqual((first.body, first.app_status), (b"chunk 0\nlast\n", 0))
            self.assertEqual(client.read_response(rid=2).status, 200)
            self.assertEqual(client.request("/pid").status, 200)

    def test_pipelined_requests_are_answered_in_turn(self):
        with self.adapter.client() as client:
            client.send(bodiless("/stream", query="n=4") + bodiless("/pid", rid=2) + bodiless("/headers")
                        + bodiless("/stream", rid=3, query="n=2"))
            for rid, body in ((1, b"chunk 0\nchunk 1\nchunk 2\nlast\n"), (2, b"%d\n" % self.adapter.proc.pid),
                              (1, b"ok\n"), (3, b"chunk 0\nlast\n")):
                response = client.read_response(rid=rid)
                self.assertEqual((response.status, response.body), (200, body))

    def test_connections_take_turns(self):
        clients = [self.adapter.client() for _ in range(3)]
        try:
            for client in clients:
                client.send(b"".join(bodiless("/stream", rid=rid, query="n=2") for rid in (1, 2, 3)))
            for client in clients:
                for rid in (1, 2, 3):
                    self.assertEqual(client.read_response(rid=rid).body, b"chunk 0\nlast\n")
        finally:
            for client in clients:
                client.close()

    def test_a_partial_record_holds_no_other_connection(self):
        with self.adapter.client() as slow, self.adapter.client() as other:
            request = bodiless("/pid")
            slow.send(request[:5])
            self.assertEqual(other.request("/pid").status, 200)
            slow.send(request[5:])
            self.assertEqual(slow.read_response().status, 200)

    def test_management_record_while_a_request_streams(self):
        """Answered between two chunks or after the response (one thread), or at once (several)."""
        gate = self.gate()
        with self.adapter.client() as client:
            client.begin(client.params(path="/stream", query="n=3&gate=" + gate))
            client.send(record(STDIN, 1))
            client.read_response(until=lambda r: b"chunk 0\n" in r.stdout)
            client.send(record(99, 0))
            self.open_gate(gate)
            records = []
            while {END_REQUEST, UNKNOWN_TYPE} - {r[0] for r in records}:
                records.append(client.read_record())
            self.assertIn((UNKNOWN_TYPE, 0, bytes((99,)) + bytes(7)), records)
            self.assertIn((END_REQUEST, 1, bytes(8)), records)
            self.assertEqual(b"".join(r[2] for r in records if r[0] == STDOUT).split(b"\r\n\r\n")[-1],
                             b"chunk 1\nlast\n")

    def test_a_second_request_on_a_busy_connection_is_refused(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=b"abc"))
            client.begin(client.params(path="/pid"), rid=2)  # no multiplexing
            rtype, rid, content = client.read_record()
            self.assertEqual((rtype, rid, content[4]), (END_REQUEST, 2, CANT_MPX_CONN))
            client.send(record(STDIN, 1, b"abc") + record(STDIN, 1))
            self.assertEqual(client.read_response().body, b"abc")


class RackTcpTests(RackTests):
    family = "tcp"


class RackThreadsTests(RackTests):
    threads = 3


class ThreadsTests(unittest.TestCase):
    def setUp(self):
        self.adapter = Adapter("app.ru", "--threads", "3", "--hooks", os.path.join(HERE, "hooks.rb"))
        self.adapter.wait_ready()

    def tearDown(self):
        self.adapter.cleanup()

    def test_at_most_threads_requests_at_once_and_hooks(self):
        results = []

        def one():
            with self.adapter.client() as client:
                results.append(client.request("/sleep", query="ms=300").json())

        threads = [threading.Thread(target=one) for _ in range(7)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(len(results), 7)
        self.assertEqual(max(r["most"] for r in results), 3)
        self.assertLessEqual(len({r["thread"] for r in results}), 3)
        self.assertEqual(self.get_json("/thread"), {"pid": self.adapter.proc.pid, "thread_booted": True,
                                                    "worker_booted": True})
        self.assertEqual(self.adapter.terminate(), 0)
        events = [e[0] for e in self.adapter.hooks()]
        self.assertEqual(events[0], "worker_boot")
        self.assertEqual(events[-1], "worker_shutdown")
        self.assertEqual(sorted(events[1:-1]), ["thread_boot"] * 3 + ["thread_shutdown"] * 3)
        self.assertEqual({e[1] for e in self.adapter.hooks()}, {str(self.adapter.proc.pid)})

    def get_json(self, path):
        with self.adapter.client() as client:
            return client.request(path).json()


class OneThreadHooksTests(unittest.TestCase):
    def test_thread_hooks_run_once_in_the_thread_that_serves(self):
        adapter = Adapter("app.ru", "--threads", "1", "--hooks", os.path.join(HERE, "hooks.rb"))
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                self.assertEqual(client.request("/thread").json(), {"pid": adapter.proc.pid, "thread_booted": True,
                                                                    "worker_booted": True})
            self.assertEqual(adapter.terminate(), 0)
            events = adapter.hooks()
            self.assertEqual([e[0] for e in events], ["worker_boot", "thread_boot", "thread_shutdown",
                                                      "worker_shutdown"])
            self.assertEqual(events[1][2], events[2][2])
        finally:
            adapter.cleanup()


class ShutdownTests(unittest.TestCase):
    def test_sigterm_finishes_requests_in_flight(self):
        for threads in ("1", "2"):
            with self.subTest(threads=threads):
                self.sigterm_with_a_request_in_flight(threads)

    def sigterm_with_a_request_in_flight(self, threads):
        adapter = Adapter("app.ru", "--threads", threads)
        try:
            adapter.wait_ready()
            idle = adapter.client()
            self.assertEqual(idle.request("/pid").status, 200)
            busy = adapter.client()
            busy.begin(busy.params(path="/sleep", query="ms=500"))
            busy.send(record(STDIN, 1))
            adapter.wait_stderr("sleeping 500 ms")
            adapter.proc.send_signal(signal.SIGTERM)
            self.assertEqual(busy.read_response().status, 200)
            self.assertIsNone(busy.read_record(), "the connection closes after the request in flight")
            self.assertIsNone(idle.read_record(), "idle connection closed at shutdown")
            self.assertEqual(adapter.proc.wait(15), 0)
            with self.assertRaises(OSError):
                FcgiClient(adapter.address, timeout=2).get_values()  # nobody accepts any more
            idle.close()
            busy.close()
        finally:
            adapter.cleanup()


class SinatraTests(unittest.TestCase):
    def test_sinatra(self):
        adapter = Adapter("sinatra.ru")
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                response = client.request("/hi/bob", script_name="/pre")
                self.assertEqual(response.body, b"hi bob from /pre/hi/bob\n")
                body = b"a=1&b=two"
                response = client.request("/form", method="POST", body=body,
                                          extra=[("CONTENT_TYPE", "application/x-www-form-urlencoded")])
                self.assertEqual(response.body, b"got 1 and two\n")
        finally:
            adapter.cleanup()


class LoadTests(unittest.TestCase):
    def test_check_ok(self):
        self.assertEqual(run_check("app.ru"), (0, ""))

    def test_check_raising_rackup(self):
        code, err = run_check("broken.ru")
        self.assertEqual(code, 1)
        self.assertIn("broken.ru:3:", err)
        self.assertIn("this app refuses to boot (ArgumentError)", err)
        self.assertNotIn("rein_adapter.rb", err)

    def test_check_syntax_error(self):
        code, err = run_check("syntax_error.ru")
        self.assertEqual(code, 1)
        self.assertIn("syntax_error.ru:3", err)
        self.assertIn("SyntaxError", err)

    def test_check_missing_file(self):
        code, err = run_check("missing.ru")
        self.assertEqual(code, 1)
        self.assertIn("missing.ru", err)

    def test_check_runs_no_hook(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "hooks.log")
            proc = subprocess.run(["ruby", ADAPTER, "--script", os.path.join(HERE, "app.ru"), "--hooks",
                                   os.path.join(HERE, "hooks.rb"), "--check"], capture_output=True,
                                  env=dict(os.environ, HOOKS_LOG=log), timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertFalse(os.path.exists(log))

    def test_serving_mode_fails_the_same_way(self):
        adapter = Adapter("broken.ru")
        try:
            self.assertEqual(adapter.proc.wait(30), 1)
            self.assertIn("this app refuses to boot (ArgumentError)", adapter.stderr())
        finally:
            adapter.cleanup()


if __name__ == "__main__":
    unittest.main()
