#!/usr/bin/env python3
"""rein's adapter for Python applications: serves one WSGI or ASGI app over FastCGI.

rein starts each instance of a `"type": "python"` application as

    python3 rein_adapter.py --module M [--callable C] [--protocol wsgi|asgi] [--threads N]
                            [--thread-stack-size BYTES] [--path DIR]... [--prefix /p] [--check]

with a listening socket (Unix or TCP) as fd 3, systemd style (LISTEN_FDS=1; LISTEN_PID is not
checked: a parent that execs directly cannot know the pid in advance). The file uses only the
standard library (Python >= 3.9) so that it runs under any interpreter or virtualenv.

Design
------
* FastCGI 1.0, responder role, one request at a time per connection (no multiplexing). rein keeps
  connections alive (FCGI_KEEP_CONN); management records (FCGI_GET_VALUES, rein's readiness probe)
  are answered whenever they arrive, before the first request or between the records of one.
  FCGI_ABORT_REQUEST ends the request at once (END_REQUEST) and the app learns it as it can: WSGI
  through wsgi.input raising or its streamed response being cut, ASGI through http.disconnect and
  send() raising ClientDisconnected (an OSError).
* Responses go out as STDOUT records holding a CGI head (`Status: 200 OK`, headers, blank line)
  then the body, an empty STDOUT record and END_REQUEST. The head is held back until the first
  body bytes (or the end) and sent with them; a response known to be complete (a list from WSGI,
  `more_body: False` from ASGI) goes out with its end records in a single write. END_REQUEST
  carries appStatus 0 for a complete response, 1 when it was cut short (app error after the head
  was sent, abort): a hint for rein not to present a cut body as complete.
* WSGI (PEP 3333): the main thread accepts connections. With --threads 1 it serves them all too,
  from one selector loop (rein keeps a connection to each instance per worker thread of its own):
  a request whose BEGIN_REQUEST has arrived runs to its end (reading its body from its connection
  as the app asks), then the next connection with a request waiting gets its turn; an idle
  connection costs nothing. With more threads, every connection has its own thread that reads
  records and runs the app for the requests it carries, so an idle keep-alive connection costs a
  blocked thread but no worker slot: --threads tokens bound the requests running the app at once.
  wsgi.input pulls STDIN records as the app reads. Between the chunks of a streamed response the
  connection is polled (non-blocking) for an abort. Whatever body the app left unread is dropped
  while the connection waits for its next BEGIN_REQUEST. A connection reads a request exactly to
  its end (its empty STDIN; the abort poll stops at a BEGIN_REQUEST), so rein may pipeline: send
  the next request, without a body, while the one before it is being answered.
* ASGI 3 (HTTP + lifespan): one asyncio event loop; each connection is an asyncio.Protocol that
  parses records, each request an asyncio task (started eagerly on Python >= 3.12, so that a
  simple request completes within the read that brought it). The request body flows through
  receive() as it arrives (reading pauses while more than 1 MiB waits unread); send() honours the
  socket's write flow control; http.disconnect comes once the response is complete or rein went
  away. rein sends an ASGI app its scope ready-made in one param, REIN_ASGI_SCOPE (see
  compact_scope); requests carrying CGI variables instead (other clients, the tests) get a scope built
  from them.
* A connection without FCGI_KEEP_CONN is closed after its request, once rein has finished sending
  the body (or after 5 s), so that rein's writes do not fail.
* Shutdown (SIGTERM or SIGINT): stop accepting (closing only our copy of the listening socket,
  which rein and other instances share), close idle connections, let requests in flight finish
  for up to 10 s, run the ASGI lifespan shutdown, exit 0.
* `--check` imports the module and resolves the callable, then exits: 0, or 1 with the traceback
  (or a one-line message) on stderr, which rein shows to whoever submitted the configuration.
"""

import argparse
import asyncio
import contextvars
import gc
import http
import importlib
import inspect
import os
import queue
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback

# --------------------------------------------------------------------------- FastCGI records

FCGI_VERSION = 1
(BEGIN_REQUEST, ABORT_REQUEST, END_REQUEST, PARAMS, STDIN, STDOUT, STDERR, DATA,
 GET_VALUES, GET_VALUES_RESULT, UNKNOWN_TYPE) = range(1, 12)
RESPONDER = 1
KEEP_CONN = 1
REQUEST_COMPLETE, CANT_MPX_CONN, OVERLOADED, UNKNOWN_ROLE = range(4)
APP_OK, APP_FAILED = 0, 1  # END_REQUEST appStatus: complete response / response cut short

HEADER = struct.Struct(">BBHHBx")  # version, type, request id, content length, padding length
BEGIN_BODY = struct.Struct(">HB5x")  # role, flags
END_BODY = struct.Struct(">IB3x")  # app status, protocol status
LEN4 = struct.Struct(">I")
MAX_CONTENT = 65535
RECV_SIZE = 65536
SHUTDOWN_GRACE = 10.0  # seconds given to requests in flight (and to the ASGI lifespan shutdown)
STASH_LIMIT = 1 << 20  # unread body kept while polling for aborts during a streamed WSGI response
DRAIN_TIMEOUT = 5.0  # seconds to read the unread rest of a body before closing a connection

ERROR_500 = b"Internal Server Error\n"


def record(rtype, rid, content=b""):
    return HEADER.pack(FCGI_VERSION, rtype, rid, len(content), 0) + content


def end_request(rid, app_status=APP_OK, protocol_status=REQUEST_COMPLETE):
    return (HEADER.pack(FCGI_VERSION, END_REQUEST, rid, 8, 0)
            + END_BODY.pack(app_status, protocol_status))


def stdout_records(rid, data, end=False, app_status=APP_OK):
    """STDOUT records carrying data (split at 64 KiB), then, if end, an empty STDOUT and END_REQUEST."""
    n = len(data)
    if n <= MAX_CONTENT:
        parts = [HEADER.pack(FCGI_VERSION, STDOUT, rid, n, 0), data] if n else []
    else:
        parts, view = [], memoryview(data)
        for i in range(0, n, MAX_CONTENT):
            chunk = view[i:i + MAX_CONTENT]
            parts += (HEADER.pack(FCGI_VERSION, STDOUT, rid, len(chunk), 0), chunk)
    if end:
        parts += (HEADER.pack(FCGI_VERSION, STDOUT, rid, 0, 0), end_request(rid, app_status))
    return b"".join(parts)


def decode_pairs(data):
    """FastCGI name-value pairs -> {name: value} as latin-1 str (byte for byte, as PEP 3333 wants)."""
    text = data.decode("latin-1")  # one character per byte: slices of text match slices of data
    pairs, pos, end = {}, 0, len(data)
    try:
        while pos < end:
            nlen, vlen = data[pos], data[pos + 1]
            if nlen < 128 and vlen < 128:  # the usual case: two one-byte lengths
                pos += 2
            else:
                if nlen < 128:
                    pos += 1
                else:
                    nlen = LEN4.unpack_from(data, pos)[0] & 0x7FFFFFFF
                    pos += 4
                vlen = data[pos]
                if vlen < 128:
                    pos += 1
                else:
                    vlen = LEN4.unpack_from(data, pos)[0] & 0x7FFFFFFF
                    pos += 4
            mid = pos + nlen
            pos = mid + vlen
            pairs[text[mid - nlen:mid]] = text[mid:pos]
    except (IndexError, struct.error):
        pos = end + 1
    if pos != end:
        raise ValueError("truncated FastCGI name-value pairs")
    return pairs


def encode_pairs(pairs):
    out = []
    for name, value in pairs:
        name, value = name.encode("latin-1"), value.encode("latin-1")
        for n in (len(name), len(value)):
            out.append(bytes((n,)) if n < 128 else LEN4.pack(n | 0x80000000))
        out += (name, value)
    return b"".join(out)


def management_reply(rtype, content, values):
    """The answer to a management record (request id 0): GET_VALUES_RESULT or UNKNOWN_TYPE."""
    if rtype == GET_VALUES:
        asked = decode_pairs(content)
        return record(GET_VALUES_RESULT, 0, encode_pairs((n, values[n]) for n in asked if n in values))
    return record(UNKNOWN_TYPE, 0, struct.pack("B7x", rtype))


# --------------------------------------------------------------------------- shared helpers

class RequestAborted(OSError):
    """rein aborted the request (FCGI_ABORT_REQUEST) or closed the connection: the client is gone."""


def log(message):
    sys.stderr.write("rein_adapter: %s\n" % message)
    sys.stderr.flush()


def log_exception(message):
    sys.stderr.write("rein_adapter: %s\n%s" % (message, traceback.format_exc()))
    sys.stderr.flush()


def https(params):
    return params.get("HTTPS", "").lower() in ("on", "1") or params.get("REQUEST_SCHEME") == "https"


def split_prefix(params, prefix):
    """(SCRIPT_NAME, PATH_INFO): as rein sent them; split at --prefix only if SCRIPT_NAME is absent."""
    path_info = params.get("PATH_INFO", "")
    if "SCRIPT_NAME" in params or not prefix:
        return params.get("SCRIPT_NAME", ""), path_info
    if path_info == prefix or path_info.startswith(prefix + "/"):
        return prefix, path_info[len(prefix):]
    return "", path_info


# --------------------------------------------------------------------------- WSGI

class RecordReader:
    """Reads FastCGI records from a blocking socket through one buffer (several records per recv)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.pos = 0

    def read(self):
        """The next record as (type, request id, content); None on a clean EOF between records."""
        buf, pos = self.buf, self.pos
        if len(buf) - pos < 8:
            buf, pos = self._fill(8), 0
            if buf is None:
                return None
        _, rtype, rid, clen, plen = HEADER.unpack_from(buf, pos)
        end = pos + 8 + clen + plen
        if len(buf) < end:
            buf, pos = self._fill(8 + clen + plen), 0
            if buf is None:
                raise ConnectionResetError("connection closed inside a FastCGI record")
            end = 8 + clen + plen
        self.pos = end
        return rtype, rid, buf[pos + 8:pos + 8 + clen]

    def _fill(self, need):
        parts = [self.buf[self.pos:]]
        have = len(parts[0])
        while have < need:
            data = self.sock.recv(max(RECV_SIZE, need - have))
            if not data:
                if have:
                    raise ConnectionResetError("connection closed inside a FastCGI record")
                return None
            parts.append(data)
            have += len(data)
        self.buf, self.pos = b"".join(parts), 0
        return self.buf

    def whole_params(self, rid):
        """The usual case, taken without a record at a time: a PARAMS record of request rid and the empty one
        ending the stream, both buffered, then whether the empty STDIN of a request without a body follows
        (taken too). (content, body ended), or None to read record by record."""
        buf, pos = self.buf, self.pos
        have = len(buf)
        if have - pos < 16:
            return None
        _, rtype, rrid, clen, plen = HEADER.unpack_from(buf, pos)
        end = pos + 8 + clen + plen
        if rtype != PARAMS or rrid != rid or not clen or have < end + 8:
            return None
        _, rtype, rrid, elen, eplen = HEADER.unpack_from(buf, end)
        if rtype != PARAMS or rrid != rid or elen or have < end + 8 + eplen:
            return None
        content = buf[pos + 8:pos + 8 + clen]
        self.pos = end = end + 8 + eplen
        if have - end >= 8:
            _, rtype, rrid, slen, splen = HEADER.unpack_from(buf, end)
            if rtype == STDIN and rrid == rid and not slen and have >= end + 8 + splen:
                self.pos = end + 8 + splen
                return content, True
        return content, False

    def read_nowait(self):
        """A record already received (or receivable without blocking), else None. EOF raises. A BEGIN_REQUEST
        is left unread (None): it is the next request, pipelined behind the one in progress."""
        if not self.complete():
            try:
                data = self.sock.recv(RECV_SIZE, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return None
            if not data:
                raise ConnectionResetError("connection closed by rein")
            self.buf, self.pos = self.buf[self.pos:] + data, 0
            if not self.complete():
                return None
        if self.buf[self.pos + 1] == BEGIN_REQUEST:
            return None
        return self.read()

    def complete(self):
        """Whether a whole record is buffered."""
        avail = len(self.buf) - self.pos
        if avail < 8:
            return False
        _, _, _, clen, plen = HEADER.unpack_from(self.buf, self.pos)
        return avail >= 8 + clen + plen


class InputStream:
    """wsgi.input: STDIN records are read lazily, as the app asks for bytes; b"" at the end."""

    def __init__(self, request):
        self._request = request
        self._buf = b""
        self._stash = []  # chunks met while polling for an abort, before the app asked for them
        self.stashed = 0
        self.eof = False

    def _more(self):
        if self.eof:
            return b""
        data = self._stash.pop(0) if self._stash else self._request.read_stdin()
        if not data:
            self.eof = True
        return data

    def stash(self, data):
        self._stash.append(data)
        self.stashed += len(data)

    @property
    def received(self):
        """True once the whole body has arrived (read by the app or not)."""
        return self.eof or (bool(self._stash) and not self._stash[-1])

    def read(self, size=-1):
        buf = self._buf
        if size is None or size < 0:
            parts = [buf]
            while True:
                data = self._more()
                if not data:
                    break
                parts.append(data)
            self._buf = b""
            return b"".join(parts)
        if len(buf) < size:
            parts, have = [buf], len(buf)
            while have < size:
                data = self._more()
                if not data:
                    break
                parts.append(data)
                have += len(data)
            buf = b"".join(parts)
        self._buf = buf[size:]
        return buf[:size]

    def readline(self, size=-1):
        if size is None or size < 0:
            size = sys.maxsize
        parts, have, buf = [], 0, self._buf
        while True:
            i = buf.find(b"\n", 0, size - have)
            if i >= 0:
                cut = i + 1
            elif have + len(buf) >= size:
                cut = size - have
            else:
                parts.append(buf)
                have += len(buf)
                buf = self._more()
                if buf:
                    continue
                self._buf = b""
                return b"".join(parts)
            parts.append(buf[:cut])
            self._buf = buf[cut:]
            return b"".join(parts)

    def readlines(self, hint=-1):
        lines, total = [], 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if 0 < hint <= total:
                return lines

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class ErrorStream:
    """wsgi.errors: text written to the process's stderr, flushed at every write."""

    def write(self, text):
        sys.stderr.write(text)
        sys.stderr.flush()

    def writelines(self, lines):
        for line in lines:
            sys.stderr.write(line)
        sys.stderr.flush()

    def flush(self):
        sys.stderr.flush()


class FileWrapper:
    """wsgi.file_wrapper: iterates a file-like object in blocks."""

    def __init__(self, filelike, blksize=8192):
        self.filelike = filelike
        self.blksize = blksize
        if hasattr(filelike, "close"):
            self.close = filelike.close

    def __iter__(self):
        return self

    def __next__(self):
        data = self.filelike.read(self.blksize)
        if data:
            return data
        raise StopIteration


HEADS = {}  # (status, tuple(headers)) -> the head: an app answers with the same few heads over and over
HEADS_MAX = 256  # heads that vary (a cookie, a date) are not kept once this many are


def wsgi_head(status, headers):
    """The CGI head for start_response's arguments, validated; raises TypeError/ValueError."""
    key = head = None
    if type(headers) is list or type(headers) is tuple:  # not an iterator, which tuple() would consume
        try:
            key = (status, tuple(headers))
            head = HEADS.get(key)
        except TypeError:  # something unhashable: the checks below say what
            key = None
    if head is not None:
        return head
    head, dropped = build_wsgi_head(status, headers)
    if key is not None and not dropped and len(HEADS) < HEADS_MAX:
        HEADS[key] = head
    return head


def build_wsgi_head(status, headers):
    """wsgi_head's work: the head, and whether a header was left out (logged, so that head is not kept)."""
    dropped = False
    if type(status) is not str:
        raise TypeError("WSGI status must be a str, not %s" % type(status).__name__)
    # A bare code ("200") is accepted, as Unit does: the reason phrase is the client's business.
    if len(status) < 3 or not status[:3].isdigit() or status[3:4] not in ("", " "):
        raise ValueError("WSGI status must look like '200 OK', not %r" % status)
    lines = ["Status: ", status, "\r\n"]
    for name, value in headers:
        if type(name) is not str or type(value) is not str:
            raise TypeError("WSGI header names and values must be str: %r" % ((name, value),))
        if not name or ":" in name:
            raise ValueError("invalid WSGI header name %r" % name)
        if name.lower() == "content-length" and not valid_length(value):
            # Unit passes the app's body on whatever this says; rein frames the body itself instead of
            # refusing the response (a Content-Length nobody can parse would leave the client unable to).
            log("ignored the app's invalid Content-Length %r" % value[:64])
            dropped = True
            continue
        lines += (name, ": ", value, "\r\n")
    lines.append("\r\n")
    head = "".join(lines)
    # The status line, each header kept (4 items each) and the empty line.
    expected = (len(lines) - 4) // 4 + 2
    if head.count("\n") != expected or head.count("\r") != expected:
        raise ValueError("CR or LF in WSGI status or headers: %r %r" % (status, headers))
    return head.encode("latin-1"), dropped


ENVIRON_PARAM = "REIN_WSGI_ENVIRON"


def wsgi_environ(params, server):
    """The environ of a request, without wsgi.input. rein sends its str entries ready-made in one param,
    REIN_WSGI_ENVIRON: names and values separated by NUL bytes (CGI variables, HTTP_* headers and, over
    https, wsgi.url_scheme; see src/fastcgi/wsgi_environ.rs). One split in C, against a pair decoded and a
    dict entry made in Python for each of a dozen CGI variables. Requests carrying CGI variables instead
    (other clients, the tests, a path holding a NUL byte) get an environ built from them."""
    environ = server.base_environ.copy()
    blob = params.get(ENVIRON_PARAM)
    if blob is not None:
        fields = blob.split("\0")
        if len(fields) % 2:
            raise ValueError("malformed %s: %d fields" % (ENVIRON_PARAM, len(fields)))
        pairs = iter(fields)
        environ.update(zip(pairs, pairs))
        return environ
    environ.update(params)
    if server.prefix and "SCRIPT_NAME" not in params:
        environ["SCRIPT_NAME"], environ["PATH_INFO"] = split_prefix(params, server.prefix)
    if https(params):
        environ["wsgi.url_scheme"] = "https"
    return environ


def valid_length(value):
    """Whether a Content-Length value is one decimal number."""
    value = value.strip(" \t")
    return value.isascii() and value.isdigit()


class WsgiRequest:
    """One request on a WSGI connection: environ, start_response, the response stream."""

    def __init__(self, conn, rid, params):
        self.conn = conn
        self.rid = rid
        self.head = None  # encoded CGI head, set by start_response
        self.head_sent = False
        self.ended = False  # END_REQUEST sent
        self.aborted = False
        self.input = InputStream(self)
        environ = wsgi_environ(params, conn.server)
        environ["wsgi.input"] = self.input
        self.environ = environ

    # -- the app's side

    def start_response(self, status, headers, exc_info=None):
        if exc_info:
            try:
                if self.head_sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.head is not None:
            raise AssertionError("start_response() called a second time without exc_info")
        self.head = wsgi_head(status, headers)
        return self.write

    def write(self, data):
        """The legacy write() callable: sends at once."""
        if self.head is None:
            raise AssertionError("write() called before start_response()")
        if type(data) is not bytes:
            data = as_bytes(data)
        if data:
            self._send(data)

    def read_stdin(self):
        """The next STDIN chunk of this request (b"" at its end), for wsgi.input."""
        conn = self.conn
        while True:
            try:
                rec = conn.reader.read()
            except OSError:
                rec = None
            if rec is None:
                conn.alive = False
                raise RequestAborted("connection closed by rein while reading the request body")
            rtype, rid, content = rec
            if rid == self.rid:
                if rtype == STDIN:
                    return content
                if rtype == ABORT_REQUEST:
                    self.aborted = True
                    raise RequestAborted("request aborted by rein")
            elif rid == 0:
                conn.send(management_reply(rtype, content, conn.server.values))
            elif rtype == BEGIN_REQUEST:
                conn.send(end_request(rid, APP_OK, CANT_MPX_CONN))

    # -- the server's side

    def run(self):
        """Runs the app and sends its response; returns False if the connection is unusable."""
        server = self.conn.server
        slots = server.slots
        slot = slots.get()
        try:
            result = None
            try:
                result = server.app_for(self.environ)(self.environ, self.start_response)
                self._respond(result)
            except Exception:
                self._failed("error in WSGI app")
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    try:
                        close()
                    except Exception:
                        self._failed("error in close() of the WSGI app's iterable")
            if not self.ended:  # aborted while streaming
                self._end(APP_FAILED)
        finally:
            slots.put(slot)
        return self.conn.alive

    def _respond(self, result):
        if type(result) is bytes or type(result) is bytearray:  # one body, as Unit takes it: not its bytes
            self._finish(bytes(result))
            return
        if type(result) is list or type(result) is tuple:  # complete already: one write
            data = result[0] if len(result) == 1 else b"".join(result)
            self._finish(data if type(data) is bytes else as_bytes(data))
            return
        if type(result) is FileWrapper and result.blksize < RECV_SIZE:
            result.blksize = RECV_SIZE
        try:
            count = len(result)  # PEP 3333: if len() works it is accurate; the last chunk can wait
        except Exception:
            count = -1
        last, i = b"", 0
        for chunk in result:
            i += 1
            if type(chunk) is not bytes:
                chunk = as_bytes(chunk)
            if not chunk:
                continue
            if last:
                self._send(last)
                last = b""
            if i == count:
                last = chunk
                continue
            if self.head_sent and self.input.stashed < STASH_LIMIT and self.conn.poll_aborted(self):
                return
            self._send(chunk)
        self._finish(last)

    def _send(self, data):
        if self.aborted:
            raise RequestAborted("request aborted by rein")
        if not self.head_sent:
            self.head_sent = True
            data = self.head + data
        self.conn.send(stdout_records(self.rid, data))

    def _finish(self, data):
        if self.aborted:  # the app went on after wsgi.input raised: rein wants no response
            return
        if self.head is None:
            raise AssertionError("the WSGI app returned without calling start_response()")
        if not self.head_sent:
            self.head_sent = True
            data = self.head + data
        self.ended = True
        self.conn.send(stdout_records(self.rid, data, True))

    def _end(self, app_status):
        self.ended = True
        if self.conn.alive:
            try:
                self.conn.send(stdout_records(self.rid, b"", True, app_status))
            except OSError:
                pass

    def _failed(self, what):
        """An exception in the app: 500 if nothing was sent yet, else end the request short."""
        if not self.conn.alive or self.aborted:
            if not self.ended:
                self._end(APP_FAILED)
            return
        env = self.environ
        log_exception("%s (%s %s)" % (what, env.get("REQUEST_METHOD"), env.get("REQUEST_URI")))
        if self.ended:
            return
        if self.head_sent:
            self._end(APP_FAILED)
            return
        self.ended = True
        head = ("Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                "Content-Length: %d\r\n\r\n" % len(ERROR_500)).encode()
        try:
            self.conn.send(stdout_records(self.rid, head + ERROR_500, True))
        except OSError:
            pass


def as_bytes(data):
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError("WSGI response data must be bytes, not %s" % type(data).__name__)


CLOSE = object()  # WsgiConnection._take: the server is stopping, the connection closes


class WsgiConnection:
    """A connection from rein: one request after another, served by its own thread (thread mode) or by the one
    loop serving every connection (loop mode, --threads 1)."""

    def __init__(self, server, sock):
        self.server = server
        self.sock = sock
        self.reader = RecordReader(sock)
        self.alive = True
        self.busy = False  # between BEGIN_REQUEST and END_REQUEST (guarded by server.lock)

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            self.alive = False
            raise

    def serve(self):
        """Thread mode: this connection's own thread, blocking, one request after another."""
        try:
            while True:
                request = self._next_request()
                if request is None or not self.serve_request(request):
                    break
        except (OSError, ValueError) as exc:
            self.dropped(exc)
        finally:
            self.close()

    def serve_request(self, request):
        """Runs one request; whether the connection takes another."""
        rid, keep, params, bodiless = request
        request = WsgiRequest(self, rid, params)
        request.input.eof = bodiless
        try:
            ok = request.run()
        finally:
            self.server.request_done(self)
        if not (ok and keep) or self.server.stopping:
            if ok and not request.input.received:
                self._drain_input(rid)
            return False
        return True

    def dropped(self, exc):
        if self.alive and not self.server.stopping:
            log("connection dropped: %s" % exc)

    def close(self):
        self.server.forget(self)
        try:
            self.sock.close()
        except OSError:
            pass

    def _next_request(self):
        """Waits for the next request: (request id, keep connection, params, whether its body is known to be
        empty); None to close."""
        read = self.reader.read
        while True:
            rec = read()
            if rec is None:
                return None
            request = self._take(rec)
            if request is CLOSE:
                return None
            if request is not None:
                return request

    # -- loop mode: one thread serves every connection (see WsgiServer._serve_loop)

    def fill(self):
        """Takes what the socket holds, without waiting; False once rein closed the connection."""
        try:
            data = self.sock.recv(RECV_SIZE, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return True
        if not data:
            return False
        reader = self.reader
        reader.buf, reader.pos = reader.buf[reader.pos:] + data, 0
        return True

    def step(self):
        """Handles the whole records already received, up to and including the one request they begin (run
        to its end, reading the rest of it from the socket as it needs); False once the connection is to be
        closed. Never waits for a request to come."""
        reader = self.reader
        while reader.complete():
            request = self._take(reader.read())
            if request is CLOSE:
                return False
            if request is not None:
                return self.serve_request(request)
        return True

    def _take(self, rec):
        """A record met between requests: the request it begins ((request id, keep connection, params,
        whether its body is known to be empty)), CLOSE when the server is stopping, else None (answered or
        dropped)."""
        rtype, rid, content = rec
        if rid == 0:
            self.send(management_reply(rtype, content, self.server.values))
            return None
        if rtype != BEGIN_REQUEST:
            return None  # the rest of an earlier request (unread body, late abort): dropped
        if len(content) < 8:
            raise ValueError("short FCGI_BEGIN_REQUEST record")
        role, flags = BEGIN_BODY.unpack_from(content)
        if role != RESPONDER:
            self.send(end_request(rid, APP_OK, UNKNOWN_ROLE))
            return None
        if not self.server.request_started(self):
            return CLOSE  # shutting down
        whole = self.reader.whole_params(rid)
        if whole is not None:
            return rid, flags & KEEP_CONN, decode_pairs(whole[0]), whole[1]
        params = self._read_params(rid)
        if params is not None:
            return rid, flags & KEEP_CONN, params, False
        self.server.request_done(self)  # aborted before it started
        return None

    def _read_params(self, rid):
        chunks = []
        while True:
            rec = self.reader.read()
            if rec is None:
                raise ConnectionResetError("connection closed inside a request's params")
            rtype, rrid, content = rec
            if rrid == rid:
                if rtype == PARAMS:
                    if not content:
                        return decode_pairs(b"".join(chunks))
                    chunks.append(content)
                elif rtype == ABORT_REQUEST:
                    self.send(end_request(rid, APP_FAILED))
                    return None
            elif rrid == 0:
                self.send(management_reply(rtype, content, self.server.values))
            elif rtype == BEGIN_REQUEST:
                self.send(end_request(rrid, APP_OK, CANT_MPX_CONN))

    def _drain_input(self, rid):
        """Before closing: reads what is left of the request body, so that rein's writes do not fail."""
        self.sock.settimeout(DRAIN_TIMEOUT)
        try:
            while True:
                rec = self.reader.read()
                if rec is None or (rec[0] == STDIN and rec[1] == rid and not rec[2]):
                    return
        except OSError:
            pass

    def poll_aborted(self, request):
        """Between two chunks of a streamed response: has rein aborted the request or gone away?"""
        try:
            while True:
                rec = self.reader.read_nowait()  # stops before a pipelined request, left for _next_request
                if rec is None:
                    return False
                rtype, rid, content = rec
                if rid == request.rid:
                    if rtype == ABORT_REQUEST:
                        request.aborted = True
                        return True
                    if rtype == STDIN and not request.input.received:
                        request.input.stash(content)  # body the app has not read (yet)
                        if request.input.stashed >= STASH_LIMIT:
                            return False
                elif rid == 0:
                    self.send(management_reply(rtype, content, self.server.values))
                elif rtype == BEGIN_REQUEST:
                    self.send(end_request(rid, APP_OK, CANT_MPX_CONN))
        except OSError:
            self.alive = False
            return True


class Targets:
    """Unit's `targets`: other callables of the same code, picked per request by rein's REIN_TARGET."""

    targets = {}

    def app_for(self, params):
        if self.targets:
            return self.targets.get(params.get("REIN_TARGET"), self.app)
        return self.app


class WsgiServer(Targets):
    """Accepts connections on the main thread. With --threads 1 (loop mode) the main thread serves every
    connection too: rein keeps a connection per worker thread of its own to each instance, and a thread per
    connection would pass the one app slot (and the GIL) between threads at nearly every request. With more
    threads (thread mode), one thread per connection and --threads app slots."""

    def __init__(self, app, listener, threads, prefix):
        self.app = app
        self.listener = listener
        self.prefix = prefix
        self.selector = None  # loop mode: the selector every connection is registered with
        self.loop = threads == 1
        # --threads tokens: a request runs the app holding one. SimpleQueue's get() and put() are C, where a
        # BoundedSemaphore is Python code around a Condition (1.1 µs a request against 0.1).
        self.slots = queue.SimpleQueue()
        for token in range(threads):
            self.slots.put(token)
        self.lock = threading.Lock()  # guards conns, stopping and each conn.busy
        self.changed = threading.Condition(self.lock)  # a connection went away
        self.conns = set()
        self.stopping = False
        self.stop_requested = False
        self.values = {"FCGI_MAX_CONNS": "1024", "FCGI_MAX_REQS": str(threads), "FCGI_MPXS_CONNS": "0"}
        self.base_environ = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": ErrorStream(),
            "wsgi.multithread": threads > 1,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.file_wrapper": FileWrapper,
            "wsgi.input_terminated": True,
            "SERVER_SOFTWARE": "rein",
            "REQUEST_METHOD": "GET",
            "SCRIPT_NAME": "",
            "PATH_INFO": "",
            "QUERY_STRING": "",
            "SERVER_NAME": "localhost",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
        }

    def serve(self):
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)  # a signal wakes select() below

        def on_signal(signum, frame):
            if self.loop and not self.stop_requested:
                # The request running, if any, runs on this thread: the loop stops after it, or this ends it.
                timer = threading.Timer(SHUTDOWN_GRACE, self._give_up)
                timer.daemon = True
                timer.start()
            self.stop_requested = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.listener.setblocking(False)
        with selectors.DefaultSelector() as selector:
            selector.register(self.listener, selectors.EVENT_READ)
            selector.register(wake_r, selectors.EVENT_READ)
            if self.loop:
                self.selector = selector
            ready = {}  # loop mode: connections with a whole record buffered, in the order they came
            while not self.stop_requested:
                # Loop mode: the connections ready are served in turns, one request each, until nothing whole
                # is left in their buffers; only then does the loop look at the sockets again (one system call
                # for a batch of requests). Buffers refill only from here, so a look comes within the requests
                # rein queued (at most eight per connection), and every connection gets its turn.
                if ready:
                    self._serve_round(ready)
                    continue
                for key, _ in selector.select():
                    conn = key.data
                    if conn is not None:
                        if not conn.fill():
                            ready.pop(conn, None)
                            self._close(conn)
                        elif conn.reader.complete():
                            ready[conn] = None
                    elif key.fd == wake_r:
                        while True:
                            try:
                                if not os.read(wake_r, 512):
                                    break
                            except OSError:
                                break
                    else:
                        self._accept()
        return self._shutdown()

    def _serve_round(self, ready):
        """Loop mode: one request (or the records before it) from each connection in `ready`, in turn; a
        connection leaves `ready` once nothing whole is left in its buffer."""
        for conn in list(ready):
            if self.stop_requested:
                return
            try:
                keep = conn.step()
            except (OSError, ValueError) as exc:
                conn.dropped(exc)
                keep = False
            if not keep:
                del ready[conn]
                self._close(conn)
            elif not conn.reader.complete():
                del ready[conn]

    def _close(self, conn):
        self.selector.unregister(conn.sock)
        conn.close()

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and the like: let it breathe
                log("accept failed: %s" % exc)
                time.sleep(0.05)
                return
            sock.setblocking(True)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = WsgiConnection(self, sock)
            with self.lock:
                self.conns.add(conn)
            if self.loop:
                self.selector.register(sock, selectors.EVENT_READ, conn)
            else:
                threading.Thread(target=conn.serve, name="rein-fcgi", daemon=True).start()

    def request_started(self, conn):
        with self.lock:
            if self.stopping:
                return False
            conn.busy = True
            return True

    def request_done(self, conn):
        conn.busy = False  # no lock needed: the thread checks `stopping` next

    def forget(self, conn):
        with self.changed:
            self.conns.discard(conn)
            self.changed.notify_all()

    def _give_up(self):
        log("a request still running after %.0f s; exiting anyway" % SHUTDOWN_GRACE)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def _shutdown(self):
        self.listener.close()  # only our descriptor: rein and other instances keep theirs
        if self.loop:  # the loop is done: no request is running
            self.stopping = True
            for conn in list(self.conns):
                conn.close()
            return 0
        deadline = time.monotonic() + SHUTDOWN_GRACE
        with self.changed:
            self.stopping = True
            for conn in self.conns:
                if not conn.busy:  # idle: wake its thread, which then exits
                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            while self.conns:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            pending = len(self.conns)
        if pending:
            log("%d connection(s) still busy after %.0f s; exiting anyway" % (pending, SHUTDOWN_GRACE))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return 0


# --------------------------------------------------------------------------- ASGI

REASONS = {s.value: s.phrase.encode("latin-1") for s in http.HTTPStatus}
BODY_HIGH_WATER = 1 << 20  # unread request body that pauses reading from rein
EAGER_TASKS = sys.version_info >= (3, 12)  # asyncio.Task(..., eager_start=True)


def start_eagerly(loop, coro):
    """Before Python 3.12: what eager_start does. The coroutine runs until its first suspension now (a simple
    request completes here, without a task and two more turns of the loop); a task drives the rest. Each
    request runs in a context of its own, as in a task."""
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration:
        return None
    # Created inside the request's context, the task copies it (`context=` is only Python 3.11+).
    return context.run(loop.create_task, resume(coro, yielded))


async def resume(coro, yielded):
    """Drives a started coroutine as a task would: waits for the future it yielded, then steps it again (it
    reads the future's outcome itself). A cancellation is thrown into it."""
    while True:
        try:
            if yielded is None:
                await asyncio.sleep(0)  # a bare yield: one turn of the loop
            else:
                yielded._asyncio_future_blocking = False  # taken over, as a task's step does
                await yielded
        except asyncio.CancelledError as exc:
            step = lambda: coro.throw(exc)  # noqa: E731
        except BaseException:
            step = lambda: coro.send(None)  # noqa: E731
        else:
            step = lambda: coro.send(None)  # noqa: E731
        try:
            yielded = step()
        except StopIteration:
            return


class ClientDisconnected(OSError):
    """Raised by send() once rein has aborted the request or the connection is gone."""


def asgi_head(status, headers):
    if type(status) is not int or not 100 <= status <= 999:
        raise ValueError("invalid ASGI response status %r" % (status,))
    parts = [b"Status: %d %s\r\n" % (status, REASONS.get(status, b"Unknown"))]
    count = 0
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
        count += 1
    parts.append(b"\r\n")
    head = b"".join(parts)  # TypeError unless the names and values are bytes
    if head.count(b"\n") != count + 2 or head.count(b"\r") != count + 2:
        raise ValueError("CR or LF in ASGI response headers: %r" % (headers,))
    return head


def http_version(protocol):
    version = protocol[5:] if protocol.startswith("HTTP/") else "1.1"
    return {"2.0": "2", "3.0": "3"}.get(version, version or "1.1")


HEADER_NAMES = {}  # "HTTP_X_FOO" -> b"x-foo", filled as names are seen


def header_name(param):
    name = HEADER_NAMES.get(param)
    if name is None:
        name = param[5:].lower().replace("_", "-").encode("latin-1")
        if len(HEADER_NAMES) < 4096:
            HEADER_NAMES[param] = name
    return name


def asgi_scope(params, server):
    headers = [(header_name(k), v.encode("latin-1")) for k, v in params.items() if k[:5] == "HTTP_"]
    for name, key in (("CONTENT_TYPE", b"content-type"), ("CONTENT_LENGTH", b"content-length")):
        if params.get(name):
            if "HTTP_" + name in params:  # not a CGI habit, but let it not be doubled
                headers = [h for h in headers if h[0] != key]
            headers.append((key, params[name].encode("latin-1")))
    if server.prefix:
        script_name, path_info = split_prefix(params, server.prefix)
    else:
        script_name, path_info = params.get("SCRIPT_NAME", ""), params.get("PATH_INFO", "")
    full_path = script_name + path_info
    path = full_path if full_path.isascii() else full_path.encode("latin-1").decode("utf-8", "replace")
    uri = params.get("REQUEST_URI")
    raw_path = (uri.partition("?")[0] if uri else full_path).encode("latin-1")
    client = None
    if params.get("REMOTE_ADDR"):
        client = [params["REMOTE_ADDR"], int(params.get("REMOTE_PORT") or 0)]
    protocol = params.get("SERVER_PROTOCOL", "HTTP/1.1")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1" if protocol == "HTTP/1.1" else http_version(protocol),
        "method": params.get("REQUEST_METHOD", "GET"),
        "scheme": "https" if https(params) else "http",
        "path": path,
        "raw_path": raw_path,
        "query_string": params.get("QUERY_STRING", "").encode("latin-1"),
        "root_path": script_name.encode("latin-1").decode("utf-8", "replace") if script_name else "",
        "headers": headers,
        "client": client,
        "server": [params.get("SERVER_NAME", "localhost"), int(params.get("SERVER_PORT") or 80)],
        "state": server.state.copy(),
    }


SCOPE_PARAM = "REIN_ASGI_SCOPE"


def compact_scope(blob, server):
    """The scope rein sends ready-made in one param (REIN_ASGI_SCOPE, see src/fastcgi/asgi_scope.rs): its
    fields separated by NUL bytes, in order method, HTTP version, scheme, path (UTF-8), raw path, query string,
    root path, client host and port (the host empty when there is none), server name and port, then each
    header's name (lowercase) and value as they came. Split in C, it costs a third of the dozen pairs decoded
    one by one in Python that asgi_scope() reads."""
    fields = blob.encode("latin-1").split(b"\0")
    if len(fields) < 11 or len(fields) % 2 == 0:
        raise ValueError("malformed %s: %d fields" % (SCOPE_PARAM, len(fields)))
    method, version, scheme, path, raw_path, query, root, host, port, name, server_port = fields[:11]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": version.decode("latin-1"),
        "method": method.decode("latin-1"),
        "scheme": scheme.decode("latin-1"),
        "path": path.decode("utf-8", "replace"),
        "raw_path": raw_path,
        "query_string": query,
        "root_path": root.decode("utf-8", "replace"),
        "headers": list(zip(fields[11::2], fields[12::2])),
        "client": [host.decode("latin-1"), int(port)] if host else None,
        "server": [name.decode("latin-1"), int(server_port)],
        "state": server.state.copy(),
    }


class AsgiRequest:
    """One HTTP request: its body queue, receive() and send(), and the task running the app."""

    def __init__(self, conn, rid, keep):
        self.conn = conn
        self.rid = rid
        self.keep = keep
        self.params = []  # PARAMS chunks until the empty one; then None
        self.chunks = []  # request body received, not yet given to the app
        self.chunks_size = 0
        self.body_done = False  # empty STDIN received
        self.body_given = False  # the last http.request event was returned
        self.head = None  # encoded CGI head from http.response.start
        self.head_sent = False
        self.complete = False  # END_REQUEST sent (or the connection is gone)
        self.disconnected = False
        self.waiters = []

    # -- fed by the connection

    def on_stdin(self, data):
        if data:
            self.chunks.append(data)
            self.chunks_size += len(data)
            if self.chunks_size > BODY_HIGH_WATER:
                self.conn.pause_reading()
        else:
            self.body_done = True
        self._wake()

    def abort(self):
        """FCGI_ABORT_REQUEST: the client went away; end the request at once."""
        self.disconnected = True
        if not self.complete:
            self.conn.write(end_request(self.rid, APP_FAILED))
            self._completed()
        self._wake()

    def connection_lost(self):
        self.disconnected = True
        self.complete = True
        self._wake()

    def _wake(self):
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # -- the app's side

    async def receive(self):
        while True:
            if self.disconnected or self.complete:
                return {"type": "http.disconnect"}
            if self.chunks or (self.body_done and not self.body_given):
                body = b"".join(self.chunks)
                self.chunks.clear()
                self.chunks_size = 0
                self.conn.resume_reading()
                more = not self.body_done
                self.body_given = not more
                return {"type": "http.request", "body": body, "more_body": more}
            fut = self.conn.loop.create_future()
            self.waiters.append(fut)
            await fut

    async def send(self, message):
        if self.disconnected:
            raise ClientDisconnected("the client went away")
        mtype = message["type"]
        if mtype == "http.response.body":
            if self.head is None:
                raise RuntimeError("http.response.body sent before http.response.start")
            if self.complete:
                raise RuntimeError("http.response.body sent after the response was complete")
            data = message.get("body", b"")
            if not self.head_sent:
                self.head_sent = True
                data = self.head + data
            if message.get("more_body", False):
                if data:
                    self.conn.write(stdout_records(self.rid, data))
                    if self.conn.write_paused:
                        await self.conn.drain()
            else:
                self.conn.write(stdout_records(self.rid, data, True))
                self._completed()
        elif mtype == "http.response.start":
            if self.head is not None:
                raise RuntimeError("http.response.start sent twice")
            self.head = asgi_head(message["status"], message.get("headers", ()))
        elif mtype == "http.response.trailers":
            pass  # trailers are not forwarded
        else:
            raise RuntimeError("unexpected ASGI message type %r" % (mtype,))

    # -- the server's side

    async def run(self, app, scope):
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            self._fail()
            raise
        except Exception as exc:
            if not self.disconnected:
                log_exception("error in ASGI app (%s %s)" % (scope["method"], scope["path"]))
                self._fail()
            elif not isinstance(exc, ClientDisconnected):
                log("ASGI app raised after the client went away (%s %s): %s: %s"
                    % (scope["method"], scope["path"], type(exc).__name__, exc))
        else:
            if not self.complete:
                log("ASGI app returned without %s (%s %s)"
                    % ("completing the response" if self.head_sent else "sending a response",
                       scope["method"], scope["path"]))
                self._fail()

    def _fail(self):
        if self.complete:
            return
        if self.head_sent:
            self.conn.write(stdout_records(self.rid, b"", True, APP_FAILED))
        else:
            head = (b"Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(ERROR_500))
            self.conn.write(stdout_records(self.rid, head + ERROR_500, True))
        self._completed()

    def _completed(self):
        self.complete = True
        self.chunks.clear()
        self.chunks_size = 0
        self.conn.request_done(self)
        self._wake()


class AsgiConnection(asyncio.Protocol):
    """A connection from rein: parses records, starts a task per request, writes responses."""

    def __init__(self, server):
        self.server = server
        self.loop = server.loop
        self.transport = None
        self.closing = False
        self.buf = b""
        self.req = None  # the request in progress: from BEGIN_REQUEST until END_REQUEST is sent
        self.draining = None  # id of the last request, whose body is read before closing
        self.ready = None  # a request whose params are complete, started after the current batch
        self.peer_eof = False
        self.reading_paused = False
        self.write_paused = False
        self.drain_waiters = []

    # -- asyncio callbacks

    def connection_made(self, transport):
        self.transport = transport
        self.server.conns.add(self)

    def connection_lost(self, exc):
        self.server.conns.discard(self)
        self.closing = True
        if self.req is not None:
            self.req.connection_lost()
            self.req = None
        self.resume_writing()

    def eof_received(self):
        """rein shut down its side: finish the request in progress (if its body is all here), then close."""
        self.peer_eof = True
        req = self.req
        if req is None:
            return False  # asyncio closes the transport
        if not req.body_done:
            req.abort()  # the body can never be complete
            return False
        return True  # keep the transport open to send the response

    def pause_writing(self):
        self.write_paused = True

    def resume_writing(self):
        self.write_paused = False
        waiters, self.drain_waiters = self.drain_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def data_received(self, data):
        if self.buf:
            data = self.buf + data
        pos, n = 0, len(data)
        try:
            while n - pos >= 8:
                _, rtype, rid, clen, plen = HEADER.unpack_from(data, pos)
                end = pos + 8 + clen + plen
                if end > n:
                    break
                self.on_record(rtype, rid, data[pos + 8:pos + 8 + clen])
                pos = end
                if self.closing:
                    return
            self.buf = data[pos:] if pos < n else b""
            if self.ready is not None:  # after the whole batch: a GET's empty body is known already
                self.start(self.ready)
        except (ValueError, struct.error) as exc:
            log("bad FastCGI input, closing the connection: %s" % exc)
            self.close()

    # -- records

    def on_record(self, rtype, rid, content):
        req = self.req
        if req is not None and rid == req.rid:
            if rtype == STDIN:
                if not req.body_done:
                    req.on_stdin(content)
            elif rtype == PARAMS:
                if req.params is not None:
                    if content:
                        req.params.append(content)
                    else:
                        self.ready = req
            elif rtype == ABORT_REQUEST:
                req.abort()
            elif rtype == BEGIN_REQUEST:
                self.write(end_request(rid, APP_OK, CANT_MPX_CONN))
        elif rid == 0:
            self.write(management_reply(rtype, content, self.server.values))
        elif rtype == BEGIN_REQUEST:
            if len(content) < 8:
                raise ValueError("short FCGI_BEGIN_REQUEST record")
            role, flags = BEGIN_BODY.unpack_from(content)
            if req is not None:
                self.write(end_request(rid, APP_OK, CANT_MPX_CONN))
            elif role != RESPONDER:
                self.write(end_request(rid, APP_OK, UNKNOWN_ROLE))
            elif self.server.stopping:
                self.close()
            else:
                self.req = AsgiRequest(self, rid, flags & KEEP_CONN)
        elif rid == self.draining and rtype == STDIN and not content:
            self.close()  # the body of the last request is over
        # anything else belongs to a request already ended (its unread body): dropped

    def start(self, req):
        """Runs the app for a request whose params are complete (eagerly where asyncio can)."""
        self.ready = None
        params = decode_pairs(b"".join(req.params))
        req.params = None
        if req.complete:  # aborted already
            return
        server = self.server
        blob = params.get(SCOPE_PARAM)
        scope = asgi_scope(params, server) if blob is None else compact_scope(blob, server)
        coro = req.run(server.app_for(params), scope)
        if EAGER_TASKS:  # runs until its first suspension now: a simple request completes here
            task = asyncio.Task(coro, loop=self.loop, eager_start=True)
            if task.done():
                return
        else:
            task = start_eagerly(self.loop, coro)
            if task is None:
                return
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    def request_done(self, req):
        if self.req is req:
            self.req = None
            self.resume_reading()  # the rest of an unread body is dropped as it comes
            if not req.keep or self.server.stopping or self.peer_eof:
                if req.body_done or self.peer_eof:
                    self.close()
                else:  # let rein finish sending the body first, so that its writes do not fail
                    self.draining = req.rid
                    self.loop.call_later(DRAIN_TIMEOUT, self.close)

    # -- transport helpers

    def write(self, data):
        if not self.closing:
            self.transport.write(data)

    async def drain(self):
        if not self.closing and self.write_paused:
            fut = self.loop.create_future()
            self.drain_waiters.append(fut)
            await fut

    def pause_reading(self):
        if not self.reading_paused and not self.closing:
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self):
        if self.reading_paused and not self.closing:
            self.reading_paused = False
            self.transport.resume_reading()

    def close(self):
        if not self.closing:
            self.closing = True
            self.transport.close()


class Lifespan:
    """The ASGI lifespan protocol: startup before serving, shutdown after."""

    def __init__(self, app):
        self.app = app
        self.state = {}
        self.task = None
        self.received = False  # the app asked for the first event
        self.queue = None
        self.startup_result = None
        self.shutdown_result = None

    async def run(self):
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, self.receive, self.send)
        except Exception:
            if self.startup_result is None or not self.startup_result.done():
                if self.received:
                    log_exception("ASGI lifespan startup raised; continuing without lifespan")
                else:
                    log("ASGI app does not support lifespan; continuing without it")
            else:
                log_exception("ASGI lifespan task raised")

    async def receive(self):
        self.received = True
        return await self.queue.get()

    async def send(self, message):
        mtype = message["type"]
        if mtype in ("lifespan.startup.complete", "lifespan.startup.failed"):
            if not self.startup_result.done():
                self.startup_result.set_result(message)
        elif mtype in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            if not self.shutdown_result.done():
                self.shutdown_result.set_result(message)
        else:
            raise RuntimeError("unexpected ASGI lifespan message type %r" % (mtype,))

    async def startup(self):
        """True to serve (started, or lifespan unsupported), False if startup failed."""
        loop = asyncio.get_running_loop()
        self.queue = asyncio.Queue()
        self.startup_result = loop.create_future()
        self.shutdown_result = loop.create_future()
        self.queue.put_nowait({"type": "lifespan.startup"})
        self.task = loop.create_task(self.run())
        await asyncio.wait({self.startup_result, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not self.startup_result.done():
            self.task = None  # the app returned or raised: lifespan unsupported
            return True
        message = self.startup_result.result()
        if message["type"] == "lifespan.startup.failed":
            log("ASGI lifespan startup failed: %s" % message.get("message", ""))
            return False
        return True

    async def shutdown(self):
        if self.task is None or self.task.done():
            return
        self.queue.put_nowait({"type": "lifespan.shutdown"})
        await asyncio.wait({self.shutdown_result, self.task}, timeout=SHUTDOWN_GRACE,
                           return_when=asyncio.FIRST_COMPLETED)
        if self.shutdown_result.done():
            message = self.shutdown_result.result()
            if message["type"] == "lifespan.shutdown.failed":
                log("ASGI lifespan shutdown failed: %s" % message.get("message", ""))
        elif not self.task.done():
            log("ASGI lifespan shutdown did not complete within %.0f s" % SHUTDOWN_GRACE)
            self.task.cancel()


class AsgiServer(Targets):
    """The asyncio side: lifespan, the listening socket, graceful stop."""

    def __init__(self, app, listener, prefix, label="ASGI app"):
        self.app = app
        self.listener = listener
        self.prefix = prefix
        self.label = label
        self.state = {}
        self.conns = set()
        self.tasks = set()
        self.stopping = False
        self.loop = None
        self.values = {"FCGI_MAX_CONNS": "1024", "FCGI_MAX_REQS": "1024", "FCGI_MPXS_CONNS": "0"}

    async def serve(self):
        self.loop = loop = asyncio.get_running_loop()
        lifespan = Lifespan(self.app)
        if not await lifespan.startup():
            self.listener.close()
            return 1
        self.state = lifespan.state
        stop = loop.create_future()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: stop.done() or stop.set_result(None))
        factory = lambda: AsgiConnection(self)  # noqa: E731
        if self.listener.family == socket.AF_UNIX:
            server = await loop.create_unix_server(factory, sock=self.listener, backlog=socket.SOMAXCONN)
        else:
            server = await loop.create_server(factory, sock=self.listener, backlog=socket.SOMAXCONN)
        log("serving %s" % self.label)
        await stop
        server.close()  # closes only our descriptor of the listening socket
        self.stopping = True
        for conn in list(self.conns):
            if conn.req is None:
                conn.close()
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=SHUTDOWN_GRACE)
            if pending:
                log("%d request(s) still running after %.0f s; cancelling" % (len(pending), SHUTDOWN_GRACE))
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending, timeout=1)
        for conn in list(self.conns):
            conn.close()
        await lifespan.shutdown()
        return 0


# --------------------------------------------------------------------------- main

class LoadError(Exception):
    """The callable is missing or not callable: a one-line message, no traceback."""


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="rein_adapter.py",
                                     description="Serves a WSGI or ASGI app to rein over FastCGI on fd 3.")
    parser.add_argument("--module", required=True)
    parser.add_argument("--callable", default="application")
    parser.add_argument("--protocol", choices=("wsgi", "asgi"), default="wsgi")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--thread-stack-size", type=int, default=0,
                        help="stack size in bytes of the threads the adapter starts (Unit's thread_stack_size)")
    parser.add_argument("--path", action="append", default=[])
    parser.add_argument("--prefix", default="")
    parser.add_argument("--target", action="append", default=[],
                        help="NAME=MODULE:CALLABLE:PREFIX, one of Unit's targets (picked by REIN_TARGET)")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    try:
        args.target = [(n, m, c) for n, rest in (t.split("=", 1) for t in args.target)
                       for m, c, _prefix in [rest.split(":", 2)]]
    except ValueError:
        parser.error("--target is NAME=MODULE:CALLABLE:PREFIX")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    args.prefix = args.prefix.rstrip("/")
    return args


def load_app(module_name, callable_name):
    module = importlib.import_module(module_name)
    obj = module
    for part in callable_name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise LoadError("module %r has no callable %r" % (module_name, callable_name)) from None
    if not callable(obj):
        raise LoadError("module %r: %r is not callable (it is a %s)"
                        % (module_name, callable_name, type(obj).__name__))
    return obj


def protocol_warning(app, args):
    """A hint when the callable does not look like the protocol asked for (never fatal)."""
    is_async = inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(getattr(app, "__call__", None))
    if args.protocol == "wsgi" and is_async:
        return "warning: %s:%s is a coroutine function: an ASGI app? (protocol \"asgi\")" % (
            args.module, args.callable)
    if args.protocol == "asgi" and inspect.isfunction(app) and not is_async:
        return "warning: %s:%s is not a coroutine function: a WSGI app? (protocol \"wsgi\")" % (
            args.module, args.callable)
    return None


def print_import_error(exc):
    """The traceback of a failed import, without the frames of this file and of importlib."""
    noise = (os.path.abspath(__file__), os.path.dirname(importlib.__file__) + os.sep)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not (os.path.abspath(f.filename) == noise[0] or f.filename.startswith(noise[1])
                      or f.filename.startswith("<frozen importlib"))]
    lines = ["Traceback (most recent call last):\n"] + traceback.format_list(frames)
    sys.stderr.write("".join(lines + traceback.format_exception_only(type(exc), exc)))
    sys.stderr.flush()


def inherited_socket():
    """The listening socket rein passed as fd 3 (LISTEN_PID is not checked: see the docstring)."""
    for name in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # not for the app's own children
    sock = socket.socket(fileno=3)  # family and type are read from the descriptor
    sock.set_inheritable(False)
    if sock.type != socket.SOCK_STREAM or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        sock.detach()
        raise OSError("fd 3 is not a listening stream socket")
    return sock


def run_event_loop(coro):
    """asyncio's loop, or uvloop's when the app's environment has it (as uvicorn does): the adapter itself needs
    only the standard library. REIN_ASYNCIO_LOOP=asyncio keeps the standard loop."""
    uvloop = None
    if os.environ.get("REIN_ASYNCIO_LOOP", "auto") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
    if uvloop is None:
        return asyncio.run(coro)
    log("event loop: uvloop %s" % getattr(uvloop, "__version__", ""))
    if sys.version_info >= (3, 12):
        return asyncio.run(coro, loop_factory=uvloop.new_event_loop)
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return asyncio.run(coro)


def main(argv=None):
    args = parse_args(argv)
    if args.thread_stack_size:
        threading.stack_size(args.thread_stack_size)  # before the app starts any thread of its own
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # rein's state directory is not the app's
    sys.path[0:0] = [os.path.abspath(p) for p in args.path] or [os.getcwd()]
    try:
        sys.stdout.reconfigure(line_buffering=True)  # the app's print() reaches rein's logs at once
    except (AttributeError, ValueError):
        pass
    try:
        app = load_app(args.module, args.callable)
        targets = {name: load_app(m, c) for name, m, c in args.target}
    except LoadError as exc:
        print(exc, file=sys.stderr)
        return 1
    except (Exception, SystemExit) as exc:
        print_import_error(exc)
        return 1
    warning = protocol_warning(app, args)
    if warning:
        log(warning)
    if args.check:
        return 0
    try:
        listener = inherited_socket()
    except OSError as exc:
        log("no listening socket on fd 3 (rein passes one with LISTEN_FDS=1): %s" % exc)
        return 1
    gc.freeze()  # the app's modules live as long as the process: keep them out of GC passes
    label = "%s %s:%s on fd 3 (%s)" % (args.protocol.upper(), args.module, args.callable,
                                       "unix" if listener.family == socket.AF_UNIX else "tcp")
    if args.protocol == "asgi":
        server = AsgiServer(app, listener, args.prefix, label)
        server.targets = targets
        return run_event_loop(server.serve())
    log("serving %s, %d thread(s)" % (label, args.threads))
    server = WsgiServer(app, listener, args.threads, args.prefix)
    server.targets = targets
    return server.serve()


if __name__ == "__main__":
    sys.exit(main())
