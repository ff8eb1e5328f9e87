"""A module with a syntax error: `rein_adapter.py --check` must fail with the traceback."""


def application(environ, start_response)
    start_response("200 OK", [])
    return [b"never"]
