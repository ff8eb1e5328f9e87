"""Axis 6: Unix socket vs TCP between the server and the app, for the Node.js hello app (2 instances):

- rein: one rein with two applications, `"socket": "unix"` and `"socket": "tcp"`, each behind its listener;
- nginx: two nginx → 2 hand-started instances stacks, one over Unix sockets (`server unix:/…`), one over TCP.

PHP's unix-vs-TCP figures (nginx → PHP-FPM and rein → PHP-FPM) come from the php scenario, which measures both
transports; the report puts them in the same table.
"""

import benchlib
from benchlib import BenchError, log

from . import nodestacks
from .core import Rein, Scope, Skip, View, free_ports, require, start_stacks, wait_answering
from .node import _wrk, summarize_points, warm


def run(ctx, out):
    tmp = ctx.scenario_dir("socket")
    runs = out.setdefault("runs", [])
    with Scope("socket") as scope:
        rein_box = {}

        def rein(kind):
            def make():
                if "failed" in rein_box:
                    raise rein_box["failed"]  # the same rein, already refused for the other transport
                if "rein" not in rein_box:
                    try:
                        r = Rein(ctx, scope, "rein", tmp)
                        d = nodestacks.app_dir(ctx, tmp)
                        ports = dict(zip(("unix", "tcp"), free_ports(2)))
                        apps = {f"web_{k}": {"type": "external", "executable": ctx.bins["node"],
                                             "arguments": ["hello.js"], "working_directory": d,
                                             "processes": nodestacks.INSTANCES, "socket": k} for k in ports}
                        r.configure({"listeners": {f"127.0.0.1:{ports[k]}": {"pass": f"applications/web_{k}"}
                                                   for k in ports}, "applications": apps},
                                    'both "socket": "unix" and "socket": "tcp" applications')
                    except (Skip, BenchError) as e:
                        rein_box["failed"] = e
                        raise
                    rein_box["rein"], rein_box["ports"] = r, ports
                r, ports = rein_box["rein"], rein_box["ports"]
                r.wait_app(f"web_{kind}", nodestacks.INSTANCES)
                wait_answering(f"rein {kind}", ports[kind], expect=nodestacks.EXPECT, procs=[r.proc])
                return View(r, f"rein, {kind}", ports[kind])
            return make

        def nginx(kind):
            def make():
                n = nodestacks.NginxNode(ctx, scope, tmp, name=f"nginx-{kind}", socket=kind)
                n.name = f"nginx, {kind}"
                return n
            return make

        makers = [("rein", "rein, unix", rein("unix")), ("rein", "rein, tcp", rein("tcp")),
                  ("nginx", "nginx, unix", nginx("unix")), ("nginx", "nginx, tcp", nginx("tcp"))]
        stacks = start_stacks(ctx, scope, out, makers)
        require(stacks, out)
        out["setup"] = {"configs": {"rein": rein_box["rein"].config if "rein" in rein_box else None,
                                    **{s.name: s.conf_text for s in stacks if hasattr(s, "conf_text")}}}
        warm(ctx, stacks)  # warm-up
        for c in ctx.args.vs_conns:
            for rnd in range(1, ctx.args.rounds + 1):
                for s in stacks:
                    r = {"stack": s.name, "conns": c, "round": rnd}
                    try:
                        r.update(_wrk(ctx, s, c, ctx.args.duration))
                        log(f"  [socket] c={c} round {rnd} {s.name:12} {r['rps']:>8,.0f} req/s  p99 "
                            f"{benchlib.fmt_ms(r['p99_ms'])}  errors {r['errors']}")
                    except BenchError as e:
                        r["error"] = str(e)
                        log(f"  [socket] {s.name}: error: {e}")
                    runs.append(r)
    out["summary"] = summarize_points(runs, "conns")
