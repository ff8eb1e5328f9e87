"""Python (axis 7): the same WSGI and ASGI hello callables (bench/apps/python) served by

- rein: `{"type": "python", "path": DIR, "module": "wsgi_hello", "callable": "application", "processes": 2,
  "threads": 1}` (and `"protocol": "asgi"` with asgi_hello) behind a listener;
- nginx + gunicorn: `gunicorn --workers 2 --worker-class sync --bind unix:SOCK wsgi_hello:application`;
- nginx + uvicorn: `uvicorn --workers 2 --uds SOCK --no-access-log asgi_hello:application` (uvloop and
  httptools: `uvicorn[standard]`);

nginx proxies to the Unix socket (upstream keepalive 64, HTTP/1.1), worker_processes = CPUs. gunicorn and
uvicorn come from bench/.venv. A rein configuration rein refuses (4xx) skips that stack with rein's reason.
"""

import os

import benchlib
from benchlib import BenchError, log

from .core import Nginx, Proc, Rein, Scope, copy_tree, free_ports, in_turn, require, start_stacks, wait_answering
from .node import _wrk, summarize_points, warm

WORKERS = 2
EXPECT = b"Hello"


def run(ctx, out):
    tmp = ctx.scenario_dir("python")
    appdir = copy_tree(os.path.join(ctx.apps, "python"), os.path.join(tmp, "app"))
    runs = out.setdefault("runs", [])
    out["setup"] = {"workers": WORKERS}
    with Scope("python") as scope:

        def rein(proto):
            def make():
                r = Rein(ctx, scope, f"rein-{proto}", tmp)
                r.port = free_ports(1)[0]
                app = {"type": "python", "path": appdir, "module": f"{proto}_hello", "callable": "application",
                       "processes": WORKERS, "threads": 1}
                # The peers' interpreter and packages (uvloop, as uvicorn[standard] uses it), through `home`.
                venv_python = ctx.bins.get("venv_python")
                if venv_python:
                    app["home"] = os.path.dirname(os.path.dirname(venv_python))
                if proto == "asgi":
                    app["protocol"] = "asgi"
                feature = '"type": "python" applications' + (' with "protocol": "asgi"' if proto == "asgi" else "")
                r.configure({"listeners": {f"127.0.0.1:{r.port}": {"pass": f"applications/{proto}"}},
                             "applications": {proto: app}}, feature)
                wait_answering(r.name, r.port, expect=EXPECT, procs=[r.proc])
                return r
            return make

        def nginx_app(proto):
            def make():
                tool = "gunicorn" if proto == "wsgi" else "uvicorn"
                ctx.peer(tool)
                sock = os.path.join(tmp, f"{tool}.sock")
                if tool == "gunicorn":
                    cmd = [ctx.bins["gunicorn"], "--workers", str(WORKERS), "--worker-class", "sync",
                           "--bind", f"unix:{sock}", "--log-level", "warning", "wsgi_hello:application"]
                else:
                    cmd = [ctx.bins["uvicorn"], "--workers", str(WORKERS), "--uds", sock, "--no-access-log",
                           "--log-level", "warning", "asgi_hello:application"]
                app = Proc(tool, cmd, appdir, log_dir=tmp)
                scope.add(app)
                app.start()

                def up():
                    app.check_alive(tool)
                    if not os.path.exists(sock):
                        return None
                    os.chmod(sock, 0o666)  # nginx workers run unprivileged when the bench runs as root
                    return benchlib.http_request("GET", "/", unix=sock, timeout=2)[0] == 200
                benchlib.wait_until(f"{tool} answering on {sock}", up, 30.0)
                port = free_ports(1)[0]
                body = benchlib.nginx_upstream(tool, [f"unix:{sock}"]) + "\n" + benchlib.nginx_proxy_server(port, tool)
                n = Nginx(ctx, scope, f"nginx-{tool}", tmp, body, port)
                n.procs.append(app)
                n.app_command = " ".join(cmd)
                wait_answering(n.name, port, expect=EXPECT, procs=[n.proc])
                return n
            return make

        makers = [("rein", "rein WSGI", rein("wsgi")), ("nginx", "nginx + gunicorn", nginx_app("wsgi")),
                  ("rein", "rein ASGI", rein("asgi")), ("nginx", "nginx + uvicorn", nginx_app("asgi"))]
        named = {}
        for key, label, fn in makers:
            got = start_stacks(ctx, scope, out, [(key, label, fn)])
            if got:
                got[0].label = label
                named[label] = got[0]
        require(list(named.values()), out)
        out["setup"]["configs"] = {k: getattr(s, "config", None) or {"nginx": s.conf_text, "app": s.app_command}
                                   for k, s in named.items()}
        cases = {"wsgi": ["rein WSGI", "nginx + gunicorn"], "asgi": ["rein ASGI", "nginx + uvicorn"]}
        warm(ctx, list(named.values()))  # warm-up
        for case, labels in cases.items():
            stacks = [named[x] for x in labels if x in named]
            for c in ctx.args.vs_conns:
                for rnd in range(1, ctx.args.rounds + 1):
                    for s in in_turn(stacks, rnd):
                        r = {"case": case, "stack": s.label, "conns": c, "round": rnd}
                        try:
                            r.update(_wrk(ctx, s, c, ctx.args.duration))
                            log(f"  [python {case}] c={c} round {rnd} {s.label:16} {r['rps']:>8,.0f} req/s  p99 "
                                f"{benchlib.fmt_ms(r['p99_ms'])}  errors {r['errors']}")
                        except BenchError as e:
                            r["error"] = str(e)
                            log(f"  [python {case}] {s.label}: error: {e}")
                        runs.append(r)
    out["summary"] = {case: summarize_points([r for r in runs if r["case"] == case], "conns")
                      for case in ("wsgi", "asgi")}
