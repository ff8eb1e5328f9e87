"""A FastCGI server that answers wrongly, for rein's error mapping: `bad_fastcgi.py SOCKET MODE`.

MODE `garbage` answers every request with an HTTP response (not FastCGI records); `truncated` sends the start
of a STDOUT record and closes. The socket is created before the script prints "ready".
"""
import os
import socket
import struct
import sys

path, mode = sys.argv[1], sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(16)
print("ready", flush=True)
while True:
    conn, _ = listener.accept()
    conn.recv(65536)
    if mode == "garbage":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
    else:
        head = struct.pack(">BBHHBx", 1, 6, 1, 100, 0)  # STDOUT, 100 bytes announced
        conn.sendall(head + b"Status: 200 OK\r\n")
    conn.close()
