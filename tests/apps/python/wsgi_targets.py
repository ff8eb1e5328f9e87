"""Two WSGI callables in one module, for Unit's `targets`: each says who it is and where it is mounted."""


def _answer(name):
    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [("%s|%s|%s" % (name, environ["SCRIPT_NAME"], environ["PATH_INFO"])).encode()]
    return app


first = _answer("first")
second = _answer("second")
