"""A module importing a package that does not exist: the adapter must fail with the traceback."""

import rein_no_such_module_xyz  # noqa: F401


def application(environ, start_response):
    start_response("200 OK", [])
    return [b"never"]
