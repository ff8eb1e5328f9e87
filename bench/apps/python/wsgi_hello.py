"""WSGI hello for bench/run-all: rein's python application and gunicorn run this same callable."""

BODY = b"Hello"
HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(BODY)))]


def application(environ, start_response):
    start_response("200 OK", HEADERS)
    return [BODY]
