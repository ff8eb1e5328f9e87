#!/usr/bin/env python3
"""Tests for rein's Perl adapter (src/supervisor/kind/perl/rein_adapter.pl), at the FastCGI level.

Each test class starts the adapter the way rein does (a listening socket as fd 3, LISTEN_FDS=1) and speaks
FastCGI with the client of the Python adapter's suite (tests/apps/python/test_adapter.py), imported from there.

    python3 tests/apps/perl/test_adapter.py
    SHOW_ADAPTER_STDERR=1 python3 tests/apps/perl/test_adapter.py    # prints each adapter's stderr
"""

import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def python_suite():
    """The Python adapter's suite as a module of its own name (this file has the same one)."""
    spec = importlib.util.spec_from_file_location(
        "python_test_adapter", os.path.join(HERE, "..", "python", "test_adapter.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_NAMES = """ABORT_REQUEST AUTHORIZER BEGIN_REQUEST CANT_MPX_CONN END_REQUEST KEEP_CONN PARAMS
    REQUEST_COMPLETE RESPONDER STDIN UNKNOWN_ROLE UNKNOWN_TYPE AdapterProcess FcgiClient encode_pairs payload
    record upload_in_thread wait_for""".split()
(ABORT_REQUEST, AUTHORIZER, BEGIN_REQUEST, CANT_MPX_CONN, END_REQUEST, KEEP_CONN, PARAMS,
 REQUEST_COMPLETE, RESPONDER, STDIN, UNKNOWN_ROLE, UNKNOWN_TYPE, AdapterProcess, FcgiClient, encode_pairs, payload,
 record, upload_in_thread, wait_for) = (lambda suite: [getattr(suite, name) for name in _NAMES])(python_suite())

ADAPTER = os.path.join(HERE, "..", "..", "..", "src", "supervisor", "kind", "perl", "rein_adapter.pl")


class Adapter(AdapterProcess):
    """The adapter as rein runs it: `perl rein_adapter.pl --script FILE ...` with a listening socket as fd 3."""

    tag = "pl"
    stdout_apart = False

    def __init__(self, script="app.psgi", *args, family="unix", env=None):
        cmd = [shutil.which("perl"), ADAPTER, "--script", os.path.join(HERE, script)] + list(args)
        super().__init__(cmd, family=family, env=env)

    def environment(self):
        self.conc_file = os.path.join(self.dir, "conc")
        return {"CONC_FILE": self.conc_file}


def run_check(script, *args):
    proc = subprocess.run(["perl", ADAPTER, "--script", os.path.join(HERE, script), "--check"] + list(args),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    return proc.returncode, proc.stderr.decode()


def bodiless(path, rid=1):
    """A request without a body written whole, as rein writes it."""
    params = encode_pairs(FcgiClient.params("GET", path))
    return (record(BEGIN_REQUEST, rid, struct.pack(">HB5x", RESPONDER, KEEP_CONN)) + record(PARAMS, rid, params)
            + record(PARAMS, rid) + record(STDIN, rid))


class Common:
    """FastCGI handling, the PSGI environment and every kind of response: with one thread and with several."""

    args = ()
    multithread = ""

    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter("app.psgi", *cls.args)
        cls.adapter.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.adapter.cleanup()

    def get(self, path, **kw):
        with self.adapter.client() as client:
            return client.request(path, **kw)

    def test_hello(self):
        response = self.get("/hello")
        self.assertEqual((response.status, response.body), (200, b"Hello, world"))
        self.assertEqual(response.headers["content-type"], "text/plain")
        self.assertEqual((response.app_status, response.protocol_status), (0, REQUEST_COMPLETE))
        self.assertEqual(response.stdout_records, 1, "head and body coalesced in one record")

    def test_keepalive_and_request_ids(self):
        with self.adapter.client() as client:
            for rid in list(range(1, 30)) + [65535]:
                self.assertEqual(client.request("/hello", rid=rid).body, b"Hello, world", rid)

    def test_get_values(self):
        with self.adapter.client() as client:
            values = client.get_values(("FCGI_MPXS_CONNS", "FCGI_MAX_CONNS", "FCGI_MAX_REQS", "X_UNKNOWN"))
            self.assertEqual(values["FCGI_MPXS_CONNS"], "0")
            self.assertEqual(values["FCGI_MAX_REQS"], str(self.threads))
            self.assertNotIn("X_UNKNOWN", values)
            self.assertEqual(client.request("/hello").body, b"Hello, world")
            self.assertEqual(client.get_values(("FCGI_MPXS_CONNS",)), {"FCGI_MPXS_CONNS": "0"})

    def test_unknown_management_record_and_role(self):
        with self.adapter.client() as client:
            client.send(record(99, 0, b"whatever"))
            self.assertEqual(client.read_record(), (UNKNOWN_TYPE, 0, bytes((99,)) + bytes(7)))
            client.begin(client.params(path="/hello"), role=AUTHORIZER)
            client.send(record(STDIN, 1))
            self.assertEqual(client.read_response().protocol_status, UNKNOWN_ROLE)
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_without_keep_conn_the_connection_closes(self):
        with self.adapter.client() as client:
            self.assertEqual(client.request("/hello", keep=False).body, b"Hello, world")
            self.assertIsNone(client.read_record())

    def test_a_second_request_while_the_body_comes_is_refused(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=b"x" * 30))
            client.send(record(STDIN, 1, b"first line\n"))
            client.begin(client.params(path="/hello"), rid=2)  # no multiplexing
            rtype, rid, content = client.read_record()
            self.assertEqual((rtype, rid, content[4]), (END_REQUEST, 2, CANT_MPX_CONN))
            client.send(record(STDIN, 1, b"x" * 19) + record(STDIN, 1))
            self.assertEqual(client.read_response().body, b"first line\n" + b"x" * 19)
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_env(self):
        response = self.get("/env", query="a=1&b=%20", headers=[("X-Test", "yes")], script_name="/app",
                            extra=[("HTTPS", "on")])
        env = response.json()
        expected = {
            "REQUEST_METHOD": "GET", "SCRIPT_NAME": "/app", "PATH_INFO": "/env", "REQUEST_URI": "/app/env?a=1&b=%20",
            "QUERY_STRING": "a=1&b=%20", "SERVER_NAME": "example.test", "SERVER_PORT": "8080",
            "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "192.0.2.7", "HTTP_X_TEST": "yes",
            "HTTP_HOST": "example.test:8080", "psgi.version": [1, 1], "psgi.url_scheme": "https",
            "psgi.multithread": self.multithread, "psgi.multiprocess": 1, "psgi.run_once": "",
            "psgi.nonblocking": "", "psgi.streaming": 1, "psgix.input.buffered": 1, "psgi.errors": "GLOB",
            "psgi.input.seekable": 1, "psgi.errors.is_stderr": 1,
        }
        self.assertEqual({k: env.get(k) for k in expected}, expected)
        self.assertNotIn("CONTENT_LENGTH", env)
        self.assertEqual(self.get("/env").json()["psgi.url_scheme"], "http")

    def test_a_root_script_name_becomes_empty(self):
        env = self.get("/env", extra=[("SCRIPT_NAME", "/")]).json()
        self.assertEqual(env["SCRIPT_NAME"], "")

    def test_long_params(self):
        env = self.get("/env", headers=[("X-Long", "v" * 70000)]).json()
        self.assertEqual(env["HTTP_X_LONG"], "v" * 70000)

    def test_echo_300k_and_seek(self):
        body = payload(300000)
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=body))
            sender = upload_in_thread(client, 1, body)
            response = client.read_response()
            sender.join(10)
            self.assertEqual((response.status, response.body), (200, body))

    def test_upload_5mb_goes_through_a_temporary_file(self):
        body = payload(5 * 1024 * 1024)
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=body))
            sender = upload_in_thread(client, 1, body)
            response = client.read_response()
            sender.join(10)
            self.assertEqual(hashlib.sha256(response.body).hexdigest(), hashlib.sha256(body).hexdigest())
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_a_chunked_body_gets_its_content_length(self):
        with self.adapter.client() as client:
            params = [p for p in client.params("POST", "/upload", body=b"abcdef") if p[0] != "CONTENT_LENGTH"]
            client.begin(params)
            client.send(record(STDIN, 1, b"abc") + record(STDIN, 1, b"def") + record(STDIN, 1))
            self.assertEqual(client.read_response().json(),
                             {"bytes": 6, "sha256": hashlib.sha256(b"abcdef").hexdigest(), "content_length": "6"})

    def test_stream(self):
        response = self.get("/stream")
        self.assertEqual(response.body, b"".join(b"chunk %03d\n" % i for i in range(100)))
        self.assertGreater(response.stdout_records, 1, "each chunk goes out as it comes")
        self.assertEqual(response.app_status, 0)

    def test_delayed(self):
        response = self.get("/delayed")
        self.assertEqual((response.status, response.body), (202, b"delayed answer\n"))
        self.assertEqual(response.headers["x-delayed"], "yes")

    def test_filehandle_bodies(self):
        with open(os.path.join(HERE, "app.psgi"), "rb") as f:
            self.assertEqual(self.get("/file").body, f.read())
        closed = self.adapter.stderr().count("object body closed")
        self.assertEqual(self.get("/object").body, b"one\ntwo\nthree\n")
        wait_for(lambda: self.adapter.stderr().count("object body closed") == closed + 1, what="close() called")

    def test_errors_are_500_and_logged(self):
        for path in ("/error", "/wide"):
            response = self.get(path)
            self.assertEqual((response.status, response.body), (500, b"Internal Server Error\n"), path)
        self.adapter.wait_stderr("error in PSGI app (GET /error): this app fails on purpose")
        self.adapter.wait_stderr("wide character")
        self.assertEqual(self.get("/hello").body, b"Hello, world")

    def test_error_after_head_cuts_the_body(self):
        response = self.get("/error_after_head")
        self.assertEqual((response.status, response.body, response.app_status), (200, b"partial\n", 1))
        self.adapter.wait_stderr("this app fails after its head")

    def test_psgi_errors_and_cleanup_reach_stderr(self):
        self.assertEqual(self.get("/errors").body, b"logged")
        self.adapter.wait_stderr("a line on psgi.errors")
        self.assertEqual(self.get("/cleanup").body, b"cleanup registered")
        self.adapter.wait_stderr("cleanup ran for /cleanup")

    def test_status(self):
        for code in (201, 404, 503):
            self.assertEqual(self.get("/status/%d" % code).status, code)

    def test_abort_while_streaming(self):
        with self.adapter.client() as client:
            client.begin(client.params(path="/slow_stream"))
            client.send(record(STDIN, 1))
            client.read_response(until=lambda r: b"slow 001" in r.stdout)
            client.send(record(ABORT_REQUEST, 1))
            response = client.read_response()  # END_REQUEST comes early: the writer died
            self.assertLess(response.body.count(b"\n"), 100, response.body)
            self.assertEqual(response.app_status, 1)
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_abort_while_the_body_comes(self):
        with self.adapter.client() as client:
            client.begin(client.params("POST", "/echo", body=b"x" * 100))
            client.send(record(STDIN, 1, b"first line\n") + record(ABORT_REQUEST, 1))
            self.assertEqual(client.read_response().app_status, 1)
            client.send(record(STDIN, 1, b"late") + record(STDIN, 1))  # the rest of the aborted body: dropped
            self.assertEqual(client.request("/hello").body, b"Hello, world")

    def test_pipelined_requests_are_answered_in_turn(self):
        streamed = b"".join(b"chunk %03d\n" % i for i in range(100))
        with self.adapter.client() as client:
            client.send(bodiless("/stream") + bodiless("/hello") + bodiless("/stream") + bodiless("/hello"))
            for expected in (streamed, b"Hello, world", streamed, b"Hello, world"):
                response = client.read_response()
                self.assertEqual((response.status, response.body), (200, expected))

    def test_connections_with_pipelined_requests_take_turns(self):
        clients = [self.adapter.client() for _ in range(2)]
        try:
            paths = [("/hello", "/status/201", "/hello"), ("/status/202", "/hello", "/status/203")]
            for client, mine in zip(clients, paths):
                client.send(b"".join(bodiless(p) for p in mine))
            for client, mine in zip(clients, paths):
                for path in mine:
                    status = int(path.rsplit("/", 1)[1]) if path.startswith("/status") else 200
                    self.assertEqual(client.read_response().status, status, path)
        finally:
            for client in clients:
                client.close()

    def test_a_partial_record_holds_no_other_connection(self):
        with self.adapter.client() as slow, self.adapter.client() as other:
            request = bodiless("/hello")
            slow.send(request[:5])
            self.assertEqual(other.request("/hello").body, b"Hello, world")
            slow.send(request[5:])
            self.assertEqual(slow.read_response().body, b"Hello, world")

    def test_idle_connections_hold_nothing(self):
        idle = [self.adapter.client() for _ in range(5)]
        try:
            for client in idle:
                self.assertEqual(client.request("/hello").body, b"Hello, world")
            idle.pop().close()
            self.assertEqual(self.get("/hello").body, b"Hello, world")
        finally:
            for client in idle:
                client.close()

    def test_connections_rein_closes_are_closed(self):
        """A connection closed at the other end is closed here too (and costs no CPU: not watched again)."""
        fds = lambda: len(os.listdir("/proc/%d/fd" % self.adapter.proc.pid))  # noqa: E731
        with self.adapter.client() as client:
            client.request("/hello")
            baseline = fds()
        wait_for(lambda: fds() < baseline, what="the first connection closed")
        baseline = fds()
        clients = [self.adapter.client() for _ in range(4)]
        for client in clients:
            client.get_values()
        clients[0].request("/hello")
        clients[1].begin(clients[1].params("POST", "/echo", body=b"x" * 10))  # gone in the middle of a request
        self.assertEqual(fds(), baseline + 4)
        for client in clients:
            client.close()
        wait_for(lambda: fds() == baseline, what="the adapter to close its side")
        self.assertEqual(self.get("/hello").body, b"Hello, world")

    def test_sigterm_finishes_requests_in_flight(self):
        adapter = Adapter("app.psgi", *self.args)
        try:
            adapter.wait_ready()
            idle = adapter.client()
            self.assertEqual(idle.request("/hello").body, b"Hello, world")
            busy = adapter.client()
            busy.begin(busy.params(path="/sleep", query="ms=700"))
            busy.send(record(STDIN, 1))
            adapter.wait_stderr("sleeping 700 ms")
            adapter.proc.send_signal(signal.SIGTERM)
            response = busy.read_response()
            self.assertEqual((response.status, response.body), (200, b"slept 700 ms"))
            self.assertIsNone(idle.read_record(), "idle connection closed at shutdown")
            self.assertEqual(adapter.proc.wait(15), 0)
            with self.assertRaises(OSError):
                FcgiClient(adapter.address, timeout=2).get_values()  # nobody accepts any more
            idle.close()
            busy.close()
        finally:
            adapter.cleanup()

    def test_tcp_listener(self):
        adapter = Adapter("app.psgi", *self.args, family="tcp")
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                for _ in range(3):
                    self.assertEqual(client.request("/hello").body, b"Hello, world")
        finally:
            adapter.cleanup()


class OneThreadTests(Common, unittest.TestCase):
    threads = 1


class ThreadsTests(Common, unittest.TestCase):
    args = ("--threads", "3")
    threads = 3
    multithread = 1

    def test_at_most_threads_requests_at_once(self):
        self.get("/maxconc")
        results = []

        def one():
            with self.adapter.client() as client:
                results.append(client.request("/sleep", query="ms=300").status)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        self.assertEqual(results, [200] * 6)
        self.assertEqual(self.get("/maxconc").body, b"3")

    def test_each_thread_loads_the_app(self):
        seen = set()
        clients = [self.adapter.client() for _ in range(3)]
        try:
            for client in clients:
                client.begin(client.params(path="/sleep", query="ms=300"))
                client.send(record(STDIN, 1))
            for client in clients:
                client.read_response()
            for _ in range(30):
                seen.add(self.get("/runtime").json()["tid"])
        finally:
            for client in clients:
                client.close()
        self.assertTrue(seen and 0 not in seen, seen)

    def test_thread_stack_size(self):
        adapter = Adapter("app.psgi", "--threads", "2", "--thread-stack-size", "262144")
        try:
            adapter.wait_ready()
            with adapter.client() as client:
                self.assertEqual(client.request("/runtime").json()["stack"], 262144)
        finally:
            adapter.cleanup()


class PlackTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.adapter = Adapter("plack_app.psgi")
        cls.adapter.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.adapter.cleanup()

    def test_builder_mounts_and_middleware(self):
        with self.adapter.client() as client:
            response = client.request("/hello/x", query="name=rein")
            self.assertEqual(response.body, b"Hello, rein, from /hello\n")
            self.assertEqual(response.headers["x-plack"], "builder")
            self.assertEqual(response.headers["content-length"], str(len(response.body)))
            self.assertEqual(client.request("/echo", method="POST", body=b"abc").body, b"posted: abc")
            self.assertEqual(client.request("/other").status, 404)


class LoadTests(unittest.TestCase):
    def test_check_ok(self):
        self.assertEqual(run_check("app.psgi"), (0, ""))
        self.assertEqual(run_check("app.psgi", "--threads", "4"), (0, ""))

    def test_check_failures_show_perl_s_error(self):
        for script, error in (("broken.psgi", "cannot connect to the database at startup"),
                              ("syntax_error.psgi", "syntax error at %s" % os.path.join(HERE, "syntax_error.psgi")),
                              ("not_an_app.psgi", "does not return a PSGI app (a code reference): its last value "
                                                  "is '42'"),
                              ("missing.psgi", "cannot read %s" % os.path.join(HERE, "missing.psgi"))):
            code, stderr = run_check(script)
            self.assertEqual(code, 1, script)
            self.assertIn(error, stderr, script)

    def test_serving_fails_the_same_way(self):
        for args in ((), ("--threads", "2")):
            adapter = Adapter("broken.psgi", *args)
            try:
                self.assertEqual(adapter.proc.wait(20), 1)
                self.assertIn("cannot connect to the database at startup", adapter.stderr())
            finally:
                adapter.cleanup()


if __name__ == "__main__":
    unittest.main()
