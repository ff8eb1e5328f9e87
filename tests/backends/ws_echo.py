#!/usr/bin/env python3
"""A WebSocket echo server for rein's proxy tests (stdlib only, RFC 6455).

Usage: ws_echo.py LISTEN [CERT KEY]   (a TCP port on 127.0.0.1, "0" picks one; with CERT and KEY, PEM files
of a certificate chain and its key, over TLS)
Prints the bound port on its first line of stdout.

Answers the opening handshake with 101 and `Sec-WebSocket-Accept` = base64(sha1(key + GUID)) (a request
without `Upgrade: websocket` gets 400), then echoes text and binary frames unmasked, answers pings with
pongs and a close with a close. Client frames must be masked (else it closes with 1002).
"""

import base64
import hashlib
import socket
import ssl
import struct
import sys
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(f, n):
    data = f.read(n)
    if len(data) != n:
        raise EOFError
    return data


def send_frame(sock, opcode, payload):
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    sock.sendall(head + payload)


def serve(sock):
    f = sock.makefile("rb")
    try:
        headers = {}
        request_line = f.readline().decode("latin-1").strip()
        while True:
            line = f.readline().decode("latin-1").strip()
            if not line:
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if headers.get("upgrade", "").lower() != "websocket" or "sec-websocket-key" not in headers:
            body = b"not a websocket handshake: " + request_line.encode()
            sock.sendall(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % len(body) + body
            )
            return
        accept = base64.b64encode(
            hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()
        ).decode()
        sock.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\n"
                "Upgrade: websocket\r\n"
                "Connection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept}\r\n"
                "\r\n"
            ).encode()
        )
        while True:
            b0, b1 = read_exact(f, 2)
            opcode = b0 & 0x0F
            masked = b1 & 0x80
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", read_exact(f, 2))[0]
            elif n == 127:
                n = struct.unpack("!Q", read_exact(f, 8))[0]
            if not masked:
                send_frame(sock, 0x8, struct.pack("!H", 1002))
                return
            mask = read_exact(f, 4)
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(read_exact(f, n)))
            if opcode in (0x1, 0x2):
                send_frame(sock, opcode, payload)
            elif opcode == 0x9:
                send_frame(sock, 0xA, payload)
            elif opcode == 0x8:
                send_frame(sock, 0x8, payload)
                return
    except (EOFError, OSError, ValueError):
        pass
    finally:
        try:
            sock.close()
        except OSError:
            pass


def serve_tls(sock, context):
    try:
        sock = context.wrap_socket(sock, server_side=True)
    except (OSError, ssl.SSLError):
        sock.close()
        return
    serve(sock)


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    listener.listen(64)
    context = None
    if len(sys.argv) > 3:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        if context is None:
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
        else:
            threading.Thread(target=serve_tls, args=(conn, context), daemon=True).start()


if __name__ == "__main__":
    main()
