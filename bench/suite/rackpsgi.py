"""Ruby (Rack) and Perl (PSGI): the same hello apps (bench/apps/ruby/config.ru, bench/apps/perl/app.psgi) served by

- rein: `{"type": "ruby", "script": config.ru, "processes": 2, "threads": 1}` (and `"type": "perl"` with
  app.psgi) behind a listener;
- nginx + Puma: `puma -e production -w 2 -t 1:1 -b unix:SOCK config.ru` (cluster mode, no --preload, so that a
  phased restart loads the app again), with Puma's control server on a Unix socket for its own view of its workers;
- nginx + Starman: `starman -E deployment --workers 2 --disable-keepalive --max-requests 100000000 --listen SOCK
  app.psgi` (no --preload-app, so that a HUP loads the app again; --max-requests: see STARMAN_MAX_REQUESTS);

nginx proxies to the Unix socket (upstream keepalive 64, HTTP/1.1), worker_processes = CPUs, as pyapps does.
Starman's workers serve one connection each: kept alive by nginx's pool (64 > 2 workers), a connection would hold
its worker while the others wait in the backlog, so Starman runs with --disable-keepalive, the workaround its own
documentation gives for a front end that pools more connections than it has workers.

Each case (Rack, then PSGI) starts its two stacks, runs them in turn (A B, then B A, ...) at each `--vs-conns`
count for `--rounds` rounds and stops them. Then each stack is started again on its own: one wrk run at the first
count, its memory (PSS and RSS summed over every process of the stack, from /proc), and then `--rounds` reload
rounds and `--rounds` crash rounds under `rein bench http` load (resilience.one_round, as the reload and crash
scenarios run them): rein's rolling restart (`GET /control/applications/NAME/restart`) against Puma's phased
restart (SIGUSR1 to the master) or Starman's graceful restart (SIGHUP to the master), and kill -9 of the oldest
worker or instance. CPU per request is the whole stack's (user + kernel of every process: rein and its
instances; nginx, the master and its workers), never wrk's. A rein configuration rein refuses (4xx) skips that
stack with rein's reason.
"""

import os
import secrets
import signal
import time

import benchlib
from benchlib import BenchError, log

from . import resilience
from .core import (START_DEADLINE, Nginx, Proc, Rein, Scope, Skip, copy_tree, free_ports, require,
                   start_stacks, wait_answering)
from .node import _wrk, interleaved, summarize_points, warm
from .pyapps import median_round_split, processes

WORKERS = 2
THREADS = 1
EXPECT = b"Hello"
# Per case: (rein, the nginx-fronted peer); the order of the first round.
CASES = {"rack": ("rein Ruby", "nginx + Puma"), "psgi": ("rein Perl", "nginx + Starman")}
# Per case: rein's application type, the app's file in bench/apps, the peer's program.
APPS = {"rack": ("ruby", "ruby", "config.ru", "puma"), "psgi": ("perl", "perl", "app.psgi", "starman")}
RESILIENCE = ("reload", "crash")
# Starman replaces a worker after 1,000 requests by default: under this load, several times a second, a cost and
# a restart neither rein nor Puma has (and the worker a kill -9 aims at would be gone before the trigger). Turned
# off in effect, which can only help Starman.
STARMAN_MAX_REQUESTS = 100_000_000


def _age(pid):
    """Seconds since `pid` started (/proc/PID/stat against /proc/uptime)."""
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return up - benchlib.start_time(pid) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------- rein


class ReinApp(Rein):
    """rein with one listener passing to a ruby or perl application of WORKERS processes of THREADS threads."""

    def __init__(self, ctx, scope, name, tmp, case, appdir):
        super().__init__(ctx, scope, name, tmp)
        kind, _, script, _ = APPS[case]
        self.app = case
        self.port = free_ports(1)[0]
        self.app_conf = {"type": kind, "script": os.path.join(appdir, script), "working_directory": appdir,
                         "processes": WORKERS, "threads": THREADS}
        self.configure({"listeners": {f"127.0.0.1:{self.port}": {"pass": f"applications/{case}"}},
                        "applications": {case: self.app_conf}}, f'"type": "{kind}" applications')
        self.wait_app(case, WORKERS)
        wait_answering(name, self.port, expect=EXPECT, procs=[self.proc])

    def instances(self):
        return self.ready_instances(self.app)

    def proxy_pids(self):
        return [self.proc.pid] if self.proc.alive() else []

    def capacity(self, victim):
        ready = self.instances()
        return len(ready) >= WORKERS and all(p != victim for p, _ in ready)

    def reload(self):
        t0 = time.monotonic()
        status, body = benchlib.control(self.sock, "GET", f"/control/applications/{self.app}/restart", timeout=120)
        return status == 200, time.monotonic() - t0, body

    def describe(self):
        return {"config": self.config}


# --------------------------------------------------------------------------------------------- nginx + server


class NginxServer(Nginx):
    """nginx in front of a preforking app server (its master and workers) on a Unix socket. Subclasses start the
    server (`_server_command`) and give its own view of its workers (`instances`) and its restart (`reload`)."""

    tool = "?"

    def __init__(self, ctx, scope, name, tmp, appdir, tag=""):
        self.sock = os.path.join(tmp, f"{self.tool}{tag}.sock")
        self.app_command = self._server_command(ctx, appdir, tmp, tag)
        self.server = Proc(self.tool + tag, self.app_command, appdir, log_dir=tmp)
        scope.add(self.server)
        self.server.start()
        benchlib.wait_until(f"{self.tool} answering on {self.sock}", self._server_up, START_DEADLINE)
        benchlib.wait_until(f"{self.tool}: {WORKERS} workers", lambda: len(self.instances()) >= WORKERS,
                            START_DEADLINE)
        port = free_ports(1)[0]
        body = benchlib.nginx_upstream(self.tool, [f"unix:{self.sock}"]) + "\n" + benchlib.nginx_proxy_server(
            port, self.tool)
        super().__init__(ctx, scope, name, tmp, body, port)
        self.procs.append(self.server)
        wait_answering(name, port, expect=EXPECT, procs=[self.proc, self.server])

    def _server_up(self):
        self.server.check_alive(self.tool)
        if not os.path.exists(self.sock):
            return None
        os.chmod(self.sock, 0o666)  # nginx workers run unprivileged when the bench runs as root
        return benchlib.http_request("GET", "/", unix=self.sock, timeout=2)[0] == 200

    def proxy_pids(self):
        return self.proc.pids()

    def worker_pids(self):
        """[pid] of the server master's worker processes."""
        return benchlib.children_of(self.server.pid) if self.server.alive() else []

    def capacity(self, victim):
        ready = self.instances()
        return len(ready) >= WORKERS and all(p != victim for p, _ in ready)

    def describe(self):
        return {"nginx": self.conf_text, "app": " ".join(self.app_command)}


class NginxPuma(NginxServer):
    """nginx → Puma in cluster mode; Puma's control server (`/stats`) says which workers are booted and in which
    phase, so a phased restart is done when every worker is booted in the new phase."""

    tool = "puma"

    def _server_command(self, ctx, appdir, tmp, tag):
        self.control_sock = os.path.join(tmp, f"puma{tag}-control.sock")
        self.token = secrets.token_hex(8)
        return [ctx.bins["puma"], "-e", "production", "-w", str(WORKERS), "-t", f"{THREADS}:{THREADS}",
                "-b", f"unix://{self.sock}", "--control-url", f"unix://{self.control_sock}",
                "--control-token", self.token, "config.ru"]

    def stats(self):
        import json
        status, _, body = benchlib.http_request("GET", f"/stats?token={self.token}", unix=self.control_sock,
                                                timeout=5)
        if status != 200:
            raise OSError(f"Puma's control server answered {status}")
        return json.loads(body)

    def instances(self):
        st = self.stats()
        out = []
        for w in st.get("worker_status", []):
            if w.get("booted") and w.get("phase") == st.get("phase"):
                try:
                    out.append((w["pid"], _age(w["pid"])))
                except OSError:
                    pass
        return out

    def reload(self):
        """Puma's phased restart: SIGUSR1 to the master, which replaces its workers one at a time; done when Puma
        reports every worker booted in the new phase and no old worker left."""
        phase = self.stats()["phase"]
        t0 = time.monotonic()
        os.kill(self.server.pid, signal.SIGUSR1)

        def done():
            st = self.stats()
            return (st["phase"] > phase and st.get("old_workers", 0) == 0 and st["booted_workers"] >= WORKERS
                    and all(w.get("booted") and w.get("phase") == st["phase"] for w in st["worker_status"]))
        try:
            benchlib.wait_until("Puma's phased restart", done, 120.0)
            return True, time.monotonic() - t0, {"signal": "SIGUSR1", "phase": phase + 1}
        except BenchError as e:
            return False, time.monotonic() - t0, {"signal": "SIGUSR1", "error": str(e)}


class NginxStarman(NginxServer):
    """nginx → Starman; its workers are the master's children (Starman has no status endpoint), up again when
    there are WORKERS of them (the socket is the master's, open throughout: a request to it proves nothing about
    a worker)."""

    tool = "starman"

    def _server_command(self, ctx, appdir, tmp, tag):
        return [ctx.bins["starman"], "-E", "deployment", "--workers", str(WORKERS), "--disable-keepalive",
                "--max-requests", str(STARMAN_MAX_REQUESTS), "--listen", self.sock, "app.psgi"]

    def instances(self):
        out = []
        for pid in self.worker_pids():
            try:
                out.append((pid, _age(pid)))
            except OSError:
                pass
        return out

    def reload(self):
        """Starman's graceful restart: SIGHUP to the master, each worker finishes its request and exits, the master
        forks new ones (which load the app again); done when none of the old workers is left and WORKERS new
        ones are there."""
        old = set(self.worker_pids())
        t0 = time.monotonic()
        os.kill(self.server.pid, signal.SIGHUP)

        def done():
            now = self.worker_pids()
            return len(now) >= WORKERS and not old & set(now)
        try:
            benchlib.wait_until("Starman's graceful restart", done, 120.0)
            return True, time.monotonic() - t0, {"signal": "SIGHUP"}
        except BenchError as e:
            return False, time.monotonic() - t0, {"signal": "SIGHUP", "error": str(e)}


# --------------------------------------------------------------------------------------------- the scenario


def _makers(ctx, scope, tmp, appdir, case, tag=""):
    """[(key, label, make)] for the case's two stacks, in CASES' order; `tag` tells apart the files of a second
    start of the same stack."""
    rein_label, peer_label = CASES[case]
    _, _, _, tool = APPS[case]

    def rein():
        if not ctx.bins.get(APPS[case][1]):
            raise Skip(f"{APPS[case][1]} is not installed")
        return ReinApp(ctx, scope, f"rein-{case}{tag}", tmp, case, appdir)

    def peer():
        ctx.peer(tool)
        if case == "rack":
            ctx.peer("ruby-rack")
            return NginxPuma(ctx, scope, f"nginx-puma{tag}", tmp, appdir, tag)
        return NginxStarman(ctx, scope, f"nginx-starman{tag}", tmp, appdir, tag)

    return [("rein", rein_label, rein), ("nginx", peer_label, peer)]


def _labelled(ctx, scope, out, makers):
    got = {}
    for key, label, fn in makers:
        s = start_stacks(ctx, scope, out, [(key, label, fn)])
        if s:
            s[0].label = label
            got[label] = s[0]
    return got


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
    with Scope(f"rackpsgi {case}") as scope:
        named = _labelled(ctx, scope, out, _makers(ctx, scope, tmp, appdir, case))
        if not named:
            return
        out["setup"]["configs"].update({k: s.describe() for k, s in named.items()})
        stacks = [named[x] for x in CASES[case] if x in named]
        warm(ctx, stacks)
        interleaved(ctx, stacks, case, f"{case}", runs)
    for label in [s.label for s in stacks]:
        _alone(ctx, out, tmp, appdir, case, label)


def _alone(ctx, out, tmp, appdir, case, label):
    """The stack started again on its own: one wrk run of the first --vs-conns count and its memory (alone, so
    that PSS charges it the whole of the interpreter's shared pages), then its reload and crash rounds."""
    c = ctx.args.vs_conns[0]
    with Scope(f"rackpsgi {case} {label} alone") as scope:
        got = _labelled(ctx, scope, {}, [x for x in _makers(ctx, scope, tmp, appdir, case, "-alone")
                                         if x[1] == label])
        if not got:
            return
        s = got[label]
        row = {"conns": c, "duration": ctx.args.duration}
        try:
            r = _wrk(ctx, s, c, ctx.args.duration)
            row.update(rps=r["rps"], errors=r["errors"])
        except BenchError as e:
            row["error"] = str(e)
        row.update(_memory(s))
        out["memory"].setdefault(case, {})[label] = row
        log(f"  [{case}] {label:16} alone, after a run at c={c}: PSS {benchlib.fmt_mb(row['pss_kb'])} over "
            f"{row['processes']} processes ({', '.join(f'{n} × {p}' for p, n in row['programs'].items())})")
        d = ctx.args.resilience_duration
        at = round(d / 3, 2)
        for kind in RESILIENCE:
            rows = out["resilience"].setdefault(kind, {}).setdefault(case, [])
            for rnd in range(1, ctx.args.rounds + 1):
                rows.append(resilience.one_round(ctx, s, kind, rnd, d, at, tag=f"{case} {kind}"))


def ratios(summary, memory, case, points):
    """{point: {rps, p99, cpu_per_req, pss}}: rein / the nginx-fronted peer."""
    rein, peer = CASES[case]
    out = {}
    for pt in points:
        r = summary.get(rein, {}).get(str(pt), {})
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
        out[str(pt)] = row
    return out


def run(ctx, out):
    tmp = ctx.scenario_dir("rackpsgi")
    d = ctx.args.resilience_duration
    out["setup"] = {"workers": WORKERS, "threads": THREADS, "cases": {k: list(v) for k, v in CASES.items()},
                    "configs": {},
                    "memory": "PSS and RSS summed over every process of the stack (/proc/PID/smaps_rollup, "
                              "/proc/PID/status), each stack started again alone after the case's rounds and read "
                              "after one wrk run",
                    "resilience": {"connections": resilience.CONNS, "load_seconds": d, "trigger_at_s": round(d / 3, 2),
                                   "load_command": f"rein bench http -c {resilience.CONNS} -d {d} --timeout 10 "
                                                   f"--gap-from {round(d / 3, 2)} --json URL"}}
    out["memory"], out["resilience"] = {}, {}
    for case in CASES:
        appdir = copy_tree(os.path.join(ctx.apps, APPS[case][1]), os.path.join(tmp, f"{case}-app"))
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
    out["resilience_summary"] = {kind: {case: resilience.summarize(rows, kind, d) for case, rows in by.items()}
                                 for kind, by in out["resilience"].items()}
