"""Axis 5: rein vs nginx as static file server, reverse proxy and load balancer, with the settings of
bench/static-file and bench/proxy (their configurations come from the same benchlib builders):

- static: the same 1,024-byte file (nginx sendfile on, access_log off, worker_processes = CPUs; rein's share);
- proxy: one backend, an nginx with `worker_processes 1` answering `return 200 "hello\\n"` (nginx: upstream
  keepalive 64, HTTP/1.1; rein: a one-server upstream, pooled by default);
- lb: the same over 3 backends (3 separate backend nginx processes, one worker each; round robin both sides).

The app-server case (PHP) is in the php scenario. Each is measured at `--vs-conns` connections (default 100)
with `wrk -t2 -c N -d D --latency`, nginx and rein interleaved, medians of the rounds.
"""

import os

import benchlib
from benchlib import BenchError, log

from .core import Nginx, Rein, Scope, Skip, free_ports, in_turn, require, start_stacks, wait_answering
from .node import _wrk, summarize_points, warm

FILE_NAME, FILE_SIZE = "1k.txt", 1024
HELLO = b"hello\n"


def _backends(ctx, scope, tmp, n):
    """n backend nginx processes (worker_processes 1) answering hello; returns their addresses."""
    ports = free_ports(n)
    addrs = []
    for i, port in enumerate(ports):
        b = Nginx(ctx, scope, f"backend{i}", tmp, benchlib.nginx_return_server([f"127.0.0.1:{port}"]), port,
                  workers=1, key="backend")
        wait_answering(b.name, port, expect=HELLO, procs=[b.proc])
        addrs.append(f"127.0.0.1:{port}")
    return addrs


def _measure(ctx, out, case, stacks):
    runs = out.setdefault("runs", [])
    n = len(ctx.args.vs_conns) * ctx.args.rounds * len(stacks)
    i = 0
    warm(ctx, stacks)  # warm-up
    for c in ctx.args.vs_conns:
        for rnd in range(1, ctx.args.rounds + 1):
            for s in in_turn(stacks, rnd):
                i += 1
                r = {"case": case, "stack": s.name, "conns": c, "round": rnd}
                try:
                    r.update(_wrk(ctx, s, c, ctx.args.duration))
                    log(f"  [{case} {i}/{n}] c={c} round {rnd} {s.name:6} {r['rps']:>9,.0f} req/s  p99 "
                        f"{benchlib.fmt_ms(r['p99_ms'])}  errors {r['errors']}")
                except BenchError as e:
                    r["error"] = str(e)
                    log(f"  [{case}] {s.name}: error: {e}")
                runs.append(r)


def run_static(ctx, out):
    tmp = ctx.scenario_dir("static")
    www = os.path.join(tmp, "www")
    os.makedirs(www, exist_ok=True)
    os.chmod(www, 0o755)
    with open(os.path.join(www, FILE_NAME), "wb") as f:
        f.write((b"0123456789abcdef" * (FILE_SIZE // 16 + 1))[:FILE_SIZE - 1] + b"\n")
    os.chmod(os.path.join(www, FILE_NAME), 0o644)
    path = "/" + FILE_NAME

    def nginx():
        port = free_ports(1)[0]
        n = Nginx(ctx, scope, "nginx", tmp, benchlib.nginx_static_server(port, www), port, static=True)
        n.path = path
        wait_answering("nginx", port, path=path, procs=[n.proc])
        return n

    def rein():
        r = Rein(ctx, scope, "rein", tmp)
        r.port, r.path = free_ports(1)[0], path
        r.configure(benchlib.rein_static_conf(r.port, www), "share")
        wait_answering("rein", r.port, path=path, procs=[r.proc])
        return r

    with Scope("static") as scope:
        stacks = start_stacks(ctx, scope, out, [("nginx", "nginx", nginx), ("rein", "rein", rein)])
        _setup(out, stacks)
        _measure(ctx, out, "static", stacks)
    out["summary"] = summarize_points(out["runs"], "conns")


def _proxy_case(ctx, out, case, n_backends):
    tmp = ctx.scenario_dir(case)
    with Scope(case) as scope:
        if not (ctx.want("nginx") or ctx.want("rein")):
            raise Skip("no stack selected by --stacks")
        addrs = _backends(ctx, scope, tmp, n_backends)

        def nginx():
            port = free_ports(1)[0]
            body = benchlib.nginx_upstream("backends", addrs) + "\n" + benchlib.nginx_proxy_server(port, "backends")
            n = Nginx(ctx, scope, "nginx", tmp, body, port)
            wait_answering("nginx", port, expect=HELLO, procs=[n.proc])
            return n

        def rein():
            r = Rein(ctx, scope, "rein", tmp)
            r.port = free_ports(1)[0]
            r.configure(benchlib.rein_upstream_conf(r.port, "backends", addrs), "upstreams")
            wait_answering("rein", r.port, expect=HELLO, procs=[r.proc])
            return r

        stacks = start_stacks(ctx, scope, out, [("nginx", "nginx", nginx), ("rein", "rein", rein)])
        _setup(out, stacks)
        out["setup"]["backends"] = addrs
        _measure(ctx, out, case, stacks)
    out["summary"] = summarize_points(out["runs"], "conns")


def run_proxy(ctx, out):
    _proxy_case(ctx, out, "proxy", 1)


def run_lb(ctx, out):
    _proxy_case(ctx, out, "lb", 3)


def _setup(out, stacks):
    require(stacks, out)
    out["setup"] = {"configs": {s.name: getattr(s, "conf_text", None) or getattr(s, "config", None) for s in stacks}}
