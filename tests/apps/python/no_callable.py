"""A module that imports fine but has no `application` callable (and a non-callable `app`)."""

app = "not a callable"


def something_else(environ, start_response):
    start_response("200 OK", [])
    return [b"wrong name"]
