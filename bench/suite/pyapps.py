"""Python (axis 7): the same WSGI and ASGI hello callables (bench/apps/python) served by

- rein: `{"type": "python", "path": DIR, "module": "wsgi_hello", "callable": "application", "processes": 2,
  "threads": 1, "home": bench/.venv}` (and `"protocol": "asgi"` with asgi_hello) behind a listener;
- Granian: `granian --interface wsgi|asgi --host 127.0.0.1 --port PORT --workers 2 --blocking-threads 1`, facing
  the client directly as rein does (a Rust HTTP server running Python in-process, as NGINX Unit did);
- nginx + gunicorn: `gunicorn --workers 2 --worker-class sync --bind unix:SOCK wsgi_hello:application`;
- nginx + uvicorn: `uvicorn --workers 2 --uds SOCK --no-access-log asgi_hello:application` (uvloop and
  httptools: `uvicorn[standard]`);

nginx proxies to the Unix socket (upstream keepalive 64, HTTP/1.1), worker_processes = CPUs. Granian, gunicorn
and uvicorn come from bench/.venv, whose interpreter rein's apps run too (`home`): one python3 for every stack.

Each case (WSGI, then ASGI) starts its three stacks, runs them in turn (A B C, then C B A, ...) at each
`--vs-conns` count for `--rounds` rounds and stops them; then starts each stack again on its own for one run at
the first count and reads its memory after it (PSS and RSS summed over every process of the stack, from /proc).
CPU per request is the whole stack's (user + kernel of every process: server, workers, nginx), never wrk's. A
rein configuration rein refuses (4xx) skips that stack with rein's reason.
"""

import os

import benchlib
from benchlib import BenchError, log

from .core import (Nginx, Proc, Rein, Scope, Stack, copy_tree, free_ports, require, start_stacks,
                   wait_answering)
from .node import _wrk, interleaved, summarize_points, warm

WORKERS = 2
THREADS = 1
EXPECT = b"Hello"
# Per case: (rein, Granian, the nginx + Python server peer); the order of the first round.
CASES = {"wsgi": ("rein WSGI", "Granian WSGI", "nginx + gunicorn"),
         "asgi": ("rein ASGI", "Granian ASGI", "nginx + uvicorn")}


class Granian(Stack):
    """Granian serving the hello callable on its own TCP port: its main process and its workers."""

    key = "granian"

    def __init__(self, ctx, scope, name, tmp, appdir, proto):
        super().__init__(name, free_ports(1)[0])
        self.command = [ctx.bins["granian"], "--interface", proto, "--host", "127.0.0.1", "--port", str(self.port),
                        "--workers", str(WORKERS), "--blocking-threads", str(THREADS), "--log-level", "warning",
                        f"{proto}_hello:application"]
        self.proc = Proc(name.replace(" ", "-").lower(), self.command, appdir, log_dir=tmp)
        self.procs = [self.proc]
        scope.add(self)
        self.proc.start()

    def stop(self):
        self.proc.stop()


def processes(stack):
    """{program: count} over the stack's processes (/proc/PID/exe): which interpreter each stack really runs."""
    out = {}
    for pid in stack.pids():
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        out[exe] = out.get(exe, 0) + 1
    return out


def _makers(ctx, scope, tmp, appdir, proto, tag=""):
    """[(key, label, make)] for the case's three stacks, in CASES' order; `tag` tells apart the files of a
    second start of the same stack."""
    rein_label, granian_label, peer_label = CASES[proto]

    def rein():
        r = Rein(ctx, scope, f"rein-{proto}{tag}", tmp)
        r.port = free_ports(1)[0]
        app = {"type": "python", "path": appdir, "module": f"{proto}_hello", "callable": "application",
               "processes": WORKERS, "threads": THREADS}
        # The peers' interpreter and packages (uvloop, as uvicorn[standard] and Granian use it), through `home`.
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

    def granian():
        ctx.peer("granian")
        g = Granian(ctx, scope, granian_label + tag, tmp, appdir, proto)
        wait_answering(g.name, g.port, expect=EXPECT, procs=[g.proc])
        return g

    def nginx_app():
        tool = "gunicorn" if proto == "wsgi" else "uvicorn"
        ctx.peer(tool)
        sock = os.path.join(tmp, f"{tool}{tag}.sock")
        if tool == "gunicorn":
            cmd = [ctx.bins["gunicorn"], "--workers", str(WORKERS), "--worker-class", "sync",
                   "--bind", f"unix:{sock}", "--log-level", "warning", "wsgi_hello:application"]
        else:
            cmd = [ctx.bins["uvicorn"], "--workers", str(WORKERS), "--uds", sock, "--no-access-log",
                   "--log-level", "warning", "asgi_hello:application"]
        app = Proc(tool + tag, cmd, appdir, log_dir=tmp)
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
        n = Nginx(ctx, scope, f"nginx-{tool}{tag}", tmp, body, port)
        n.procs.append(app)
        n.app_command = " ".join(cmd)
        wait_answering(n.name, port, expect=EXPECT, procs=[n.proc])
        return n

    return [("rein", rein_label, rein), ("granian", granian_label, granian), ("nginx", peer_label, nginx_app)]


def _describe(s):
    if isinstance(s, Rein):
        return s.config
    if isinstance(s, Granian):
        return {"command": " ".join(s.command)}
    return {"nginx": s.conf_text, "app": s.app_command}


def _memory(s):
    """The stack's memory now: PSS and RSS summed over its processes, rein's own process apart."""
    m = s.memory()
    row = {"pss_kb": m["Pss"], "rss_kb": m["VmRSS"], "processes": m["processes"], "threads": m["Threads"],
           "programs": processes(s)}
    own = s.own_memory()
    if own:
        row["own_pss_kb"], row["own_rss_kb"] = own["Pss"], own["VmRSS"]
    return row


def _case(ctx, out, tmp, appdir, case):
    runs = out.setdefault("runs", [])
    with Scope(f"python {case}") as scope:
        named = {}
        for key, label, fn in _makers(ctx, scope, tmp, appdir, case):
            got = start_stacks(ctx, scope, out, [(key, label, fn)])
            if got:
                got[0].label = label
                named[label] = got[0]
        if not named:
            return
        out["setup"]["configs"].update({k: _describe(s) for k, s in named.items()})
        stacks = [named[x] for x in CASES[case] if x in named]
        warm(ctx, stacks)
        interleaved(ctx, stacks, case, f"python {case}", runs)
        for s in stacks:
            out["memory_shared"].setdefault(case, {})[s.label] = _memory(s)
    for label in [s.label for s in stacks]:
        _memory_alone(ctx, out, tmp, appdir, case, label)


def _memory_alone(ctx, out, tmp, appdir, case, label):
    """The stack started again on its own, one wrk run of the first --vs-conns count, then its memory. PSS
    splits a page among every process that maps it, the python3 binary's and libraries' with the other stacks'
    Python processes too, so read beside them a stack is charged less the more Python processes run on the
    machine (Granian's WSGI stack: 43.3 MB alone, 36.1 MB beside a gunicorn and a uvicorn of 2 workers each).
    Alone, each stack carries the whole of its own."""
    c = ctx.args.vs_conns[0]
    with Scope(f"python {case} {label} alone") as scope:
        got = start_stacks(ctx, scope, {}, [x for x in _makers(ctx, scope, tmp, appdir, case, "-alone")
                                           if x[1] == label])
        if not got:
            return
        s = got[0]
        row = {"conns": c, "duration": ctx.args.duration}
        try:
            r = _wrk(ctx, s, c, ctx.args.duration)
            row.update(rps=r["rps"], errors=r["errors"])
        except BenchError as e:
            row["error"] = str(e)
        row.update(_memory(s))
        out["memory"].setdefault(case, {})[label] = row
        log(f"  [python {case}] {label:16} alone, after a run at c={c}: PSS {benchlib.fmt_mb(row['pss_kb'])} over "
            f"{row['processes']} processes ({', '.join(f'{n} × {p}' for p, n in row['programs'].items())})")


def median_round_split(summary, runs):
    """Adds to each point the user and kernel CPU per request of the round whose total is the median (the lower
    of the middle two for an even count): medians of the parts taken apart would not add up to the total's."""
    for case, stacks in summary.items():
        for stack, points in stacks.items():
            for pt, row in points.items():
                rs = sorted((r for r in runs if r["case"] == case and r["stack"] == stack and str(r["conns"]) == pt
                             and "server_user_us_per_req" in r), key=lambda r: r["server_cpu_us_per_req"])
                if rs:
                    mid = rs[(len(rs) - 1) // 2]
                    row["median_round_cpu_us_per_req"] = {"round": mid["round"],
                                                          "total": mid["server_cpu_us_per_req"],
                                                          "user": mid["server_user_us_per_req"],
                                                          "kernel": mid["server_kernel_us_per_req"]}


def ratios(summary, memory, case, points):
    """{point: {peer: {rps, p99, cpu_per_req, pss}}}: rein / peer for each of the case's peers."""
    rein, *peers = CASES[case]
    out = {}
    for pt in points:
        r = summary.get(rein, {}).get(str(pt), {})
        for peer in peers:
            p = summary.get(peer, {}).get(str(pt), {})
            if not r.get("rps_median") or not p.get("rps_median"):
                continue
            row = {}
            for key, name in (("rps_median", "rps"), ("p99_ms_median", "p99"),
                              ("server_cpu_us_per_req_median", "cpu_per_req")):
                if r.get(key) is not None and p.get(key):
                    row[name] = round(r[key] / p[key], 3)
            rm, pm = memory.get(rein, {}), memory.get(peer, {})
            if rm.get("pss_kb") and pm.get("pss_kb"):
                row["pss"] = round(rm["pss_kb"] / pm["pss_kb"], 3)
            out.setdefault(str(pt), {})[peer] = row
    return out


def run(ctx, out):
    tmp = ctx.scenario_dir("python")
    appdir = copy_tree(os.path.join(ctx.apps, "python"), os.path.join(tmp, "app"))
    out["setup"] = {"workers": WORKERS, "threads": THREADS, "cases": {k: list(v) for k, v in CASES.items()},
                    "python": ctx.bins.get("python_base"), "configs": {},
                    "memory": "PSS and RSS summed over every process of the stack (/proc/PID/smaps_rollup, "
                              "/proc/PID/status), each stack started again alone after the case's rounds and read "
                              "after one wrk run; memory_shared: read right after the rounds, the case's three "
                              "stacks up"}
    out["memory"], out["memory_shared"] = {}, {}
    for case in CASES:
        _case(ctx, out, tmp, appdir, case)
    runs = out.get("runs", [])
    if not runs:
        require([], out)  # no stack started: skipped or failed, with the reasons
    if not any("error" not in r for r in runs):
        raise BenchError("no run succeeded: " + "; ".join(r["error"][:200] for r in runs[:3]))
    out["summary"] = {case: summarize_points([r for r in runs if r["case"] == case], "conns") for case in CASES}
    median_round_split(out["summary"], runs)
    out["ratios"] = {case: ratios(out["summary"][case], out["memory"].get(case, {}), case, ctx.args.vs_conns)
                     for case in CASES}
