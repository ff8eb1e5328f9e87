"""ASGI hello for bench/run-all: rein's python application ("protocol": "asgi") and uvicorn run this callable."""

BODY = b"Hello"
START = {"type": "http.response.start", "status": 200,
         "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(BODY)).encode())]}
RESPONSE = {"type": "http.response.body", "body": BODY}


async def application(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    elif scope["type"] == "http":
        await send(START)
        await send(RESPONSE)
