"""WSGI apps written as Unit accepts them: a status without a reason phrase, a body returned as one bytes
object, a Content-Length that is not a number."""


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/bare_status":
        start_response("200", [("Content-Type", "text/plain")])
        return [b"bare status"]
    if path == "/bare_status_404":
        start_response("404", [])
        return [b"not here"]
    if path == "/bytes":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return b"one bytes object, not an iterable of chunks"
    if path == "/bad_length":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "abc")])
        return [b"framed by rein"]
    start_response("200 OK", [])
    return [b"ok"]
