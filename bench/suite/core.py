"""The pieces every bench/run-all scenario uses: the run's context, processes started in their own session
(stopped with everything they spawned), scopes that stop what they started whatever happens, rein started and
configured through its control API, and the generic "stack" a load generator is pointed at.

A stack is one server setup under test (rein + its app instances, nginx + 2 Node.js instances, PM2 cluster,
...): a name, the TCP port the load goes to, and the processes that make it up (for CPU and memory sums).
"""

import json
import os
import shutil
import signal
import subprocess
import threading
import time

import benchlib
from benchlib import BenchError, free_port, log

START_DEADLINE = 30.0  # a stack (rein and its apps, PM2, Passenger) must answer within this
STOP_DEADLINE = 10.0


class Skip(Exception):
    """A stack or scenario that cannot run here, with the reason (reported, not an error)."""


# --------------------------------------------------------------------------------------------- context


class Ctx:
    """What a scenario needs: arguments, binaries, the run's temp dir, and the place to log commands."""

    def __init__(self, args, bins, peers, tmp, machine, bench_dir):
        self.args, self.bins, self.peers, self.tmp, self.machine = args, bins, peers, tmp, machine
        self.bench_dir = bench_dir
        self.apps = os.path.join(bench_dir, "apps")
        self.ncpu = machine["nproc"]

    def scenario_dir(self, name):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)
        return d

    def want(self, stack_key):
        """--stacks filter: whether a stack kind (rein, pm2, nginx, passenger, ...) is wanted."""
        only = self.args.stacks
        return not only or stack_key in only

    def peer(self, name):
        """Raises Skip when a peer could not be installed (with the installer's reason)."""
        p = self.peers.get(name, {})
        if not p.get("available"):
            raise Skip(f"{name} is not available: {p.get('reason', 'not installed')}")


# --------------------------------------------------------------------------------------------- processes


class Proc:
    """A process started in its own session (so its process group holds what it forks), with its output in
    a log file. stop() sends SIGTERM to the group, SIGKILL after a deadline, and SIGKILL to every descendant
    seen just before (daemons that left the group: PM2, Passenger's agents)."""

    def __init__(self, name, cmd, cwd, env=None, log_dir=None):
        self.name, self.cmd, self.cwd = name, cmd, cwd
        self.env = env
        self.log_path = os.path.join(log_dir or cwd, f"{name}.out")
        self.proc = None
        self.started = None

    def start(self):
        out = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self.cmd, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            out.close()
        self.started = time.monotonic()
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def pids(self):
        if not self.alive():
            return []
        return [self.proc.pid] + benchlib.descendants(self.proc.pid)

    def output(self, n=1500):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def check_alive(self, what=None):
        if self.proc is not None and self.proc.poll() is not None:
            raise BenchError(f"{what or self.name} exited with {self.proc.returncode}: {self.output()}")

    def stop(self, sig=signal.SIGTERM, deadline=STOP_DEADLINE):
        if not self.proc:
            return
        snapshot = benchlib.identify(self.pids())
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop within {deadline}s; killing it")
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        benchlib.kill_identified(snapshot)
        try:
            self.proc.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            log(f"{self.name} (pid {self.proc.pid}) still there after SIGKILL")


class Scope:
    """Stops, in reverse order, everything registered with it, when the `with` block ends for any reason
    (an error, Ctrl-C, the end of a scenario). A stop that fails is logged and the others still run."""

    def __init__(self, name):
        self.name = name
        self.items = []

    def add(self, what, stop=None):
        self.items.append((what, stop or what.stop))
        return what

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for what, stop in reversed(self.items):
            try:
                stop()
            except BaseException as e:  # noqa: BLE001 - keep stopping the others, even on a second Ctrl-C
                log(f"{self.name}: stopping {getattr(what, 'name', what)} failed: {e!r}")
        self.items.clear()
        for p in list(benchlib.RUNNING):
            if p.poll() is None:
                p.kill()
                p.wait()
            benchlib.RUNNING.remove(p)
        return False


def answers(port=None, unix=None, path="/", expect=None):
    """A readiness check: None when GET `path` is a 200 (whose body contains `expect`), else what it did."""
    status, _, body = benchlib.http_request("GET", path, port=port, unix=unix, timeout=2.0)
    if status == 200 and (expect is None or expect in body):
        return True
    return None


def wait_answering(what, port=None, unix=None, path="/", expect=None, procs=(), deadline=START_DEADLINE):
    def check():
        for p in procs:
            p.check_alive(what)
        return answers(port, unix, path, expect)
    return benchlib.wait_until(f"{what} answering on {unix or f'127.0.0.1:{port}'}{path}", check, deadline)


# --------------------------------------------------------------------------------------------- stacks


class Stack:
    """Base: `name` (shown in tables), `key` (the kind, for --stacks), `port`, `path` (what the load
    requests), `procs` (whose trees are summed for CPU and memory)."""

    key = "?"

    def __init__(self, name, port=None, path="/"):
        self.name, self.port, self.path = name, port, path
        self.procs = []
        self.extra_pids = lambda: []  # processes outside the procs' trees (PM2's daemon)

    def pids(self):
        out = []
        for p in self.procs:
            out += p.pids()
        for pid in self.extra_pids():
            if pid not in out:
                out.append(pid)
                out += [k for k in benchlib.descendants(pid) if k not in out]
        return out

    def memory(self):
        return benchlib.memory_of(self.pids())

    def own_memory(self):
        """The server's own process (rein) when it has one distinct from its apps; None otherwise."""
        return None

    def cpu(self):
        return benchlib.cpu_of(self.pids())

    def cpu_split(self):
        """(user, kernel) CPU seconds of every process of the stack (wrk's runs report both per request)."""
        return benchlib.cpu_split_of(self.pids())

    def proxy_pids(self):
        """The processes standing between the load and the apps (rein itself; nginx's master and workers),
        whose CPU is reported apart from the apps'; None where there is no such hop (PM2's cluster)."""
        return None

    def url(self):
        return f"http://127.0.0.1:{self.port}{self.path}"


class View(Stack):
    """The same stack seen through another port or path (one nginx serving a unix and a tcp variant)."""

    def __init__(self, base, name, port, path="/", key=None):
        super().__init__(name, port, path)
        self.base = base
        self.key = key or base.key

    def pids(self):
        return self.base.pids()

    def own_memory(self):
        return self.base.own_memory()


class Rein(Stack):
    """rein started with an empty configuration, then configured through its control API, so that a
    configuration rein refuses (4xx) is a clear Skip naming what it does not support yet."""

    key = "rein"

    def __init__(self, ctx, scope, name, tmp):
        super().__init__(name)
        self.ctx, self.tmp = ctx, tmp
        self.state = os.path.join(tmp, f"{name}-state")
        os.makedirs(self.state, exist_ok=True)
        self.sock = os.path.join(self.state, "control.sock")
        empty = os.path.join(tmp, f"{name}-empty.json")
        with open(empty, "w") as f:
            f.write("{}")
        env = dict(os.environ)
        env.pop("REIN_CONTROL", None)
        env.pop("REIN_STATE", None)
        self.proc = Proc(name, [ctx.bins["rein"], "run", "--config", empty, "--state", self.state,
                                "--log", os.path.join(tmp, f"{name}.log"), "--stop-timeout", "5"], tmp, env=env)
        self.procs = [self.proc]
        scope.add(self)
        self.proc.start()
        benchlib.wait_until(f"{name}: control API at {self.sock}",
                            lambda: self._control_up(), START_DEADLINE)
        self.config = None

    def _control_up(self):
        self.proc.check_alive(self.name)
        return os.path.exists(self.sock) and benchlib.control(self.sock, "GET", "/config", timeout=2)[0] == 200

    def stop(self):
        self.proc.stop()

    def configure(self, doc, feature):
        """PUT /config; a 4xx is a Skip saying rein does not support `feature` yet (with rein's detail)."""
        status, body = benchlib.control(self.sock, "PUT", "/config", doc)
        if 400 <= status < 500:
            detail = body.get("detail") or body.get("error") if isinstance(body, dict) else body
            raise Skip(f"rein does not support {feature} yet (PUT /config answered {status}: {detail})")
        if status != 200:
            raise BenchError(f"{self.name}: PUT /config answered {status}: {body}")
        self.config = doc

    def app_status(self, app):
        status, body = benchlib.control(self.sock, "GET", f"/status/applications/{app}", timeout=5)
        if status != 200:
            raise BenchError(f"{self.name}: /status/applications/{app} answered {status}: {body}")
        return body

    def ready_instances(self, app):
        """[(pid, uptime_s)] of the app's ready instances."""
        st = self.app_status(app)
        return [(i["pid"], i.get("uptime") or 0.0) for i in st.get("instances", [])
                if i.get("state") == "ready" and i.get("pid")]

    def wait_app(self, app, n, what=None):
        return benchlib.wait_until(f"{what or self.name}: {n} ready instances of {app}",
                                   lambda: self.proc.check_alive(self.name) or
                                   (len(self.ready_instances(app)) >= n), START_DEADLINE)

    def own_memory(self):
        return benchlib.memory_of([self.proc.pid]) if self.proc.alive() else None

    def log_tail(self, n=1500):
        try:
            with open(os.path.join(self.tmp, f"{self.name}.log"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""


class Nginx(Stack):
    """A private nginx (benchlib.nginx_conf) whose stack may also own backend processes."""

    key = "nginx"

    def __init__(self, ctx, scope, name, tmp, http_body, port, static=False, workers=None, key=None):
        super().__init__(name, port)
        if key:
            self.key = key
        self.workers = workers or ctx.ncpu
        self.conf_text = benchlib.nginx_conf(tmp, name, self.workers, http_body, static=static,
                                             comment="bench/run-all")
        path = os.path.join(tmp, f"{name}.conf")
        with open(path, "w") as f:
            f.write(self.conf_text)
        self.proc = Proc(name, [ctx.bins["nginx"], "-p", tmp + "/", "-c", path,
                                "-e", os.path.join(tmp, f"{name}-error.log")], tmp)
        self.procs = [self.proc]
        scope.add(self)
        self.proc.start()

    def stop(self):
        self.proc.stop()


def start_stacks(ctx, scope, out, makers):
    """Starts each stack in `makers` [(key, name, fn)], keeping those that start; a stack that cannot run
    (Skip) or fails to start is recorded in out["skipped"] / out["failed_stacks"] and left out."""
    stacks = []
    for key, name, fn in makers:
        if not ctx.want(key):
            continue
        t0 = time.monotonic()
        try:
            s = fn()
            stacks.append(s)
            log(f"  {name}: up in {time.monotonic() - t0:.1f}s (port {s.port})")
        except Skip as e:
            log(f"  {name}: skipped: {e}")
            out.setdefault("skipped", []).append({"stack": name, "reason": str(e)})
        except BenchError as e:
            log(f"  {name}: failed to start: {e}")
            out.setdefault("failed_stacks", []).append({"stack": name, "error": str(e)})
    return stacks


def in_turn(stacks, rnd):
    """The stacks in the order round `rnd` runs them: every other round reversed (A B, B A, A B...), so that the
    machine's drift within a round, which moves a 2-CPU VM's figures by 10-20 %, favours no stack."""
    return list(stacks) if rnd % 2 == 1 else list(reversed(stacks))


def copy_tree(src, dst, mode=0o755):
    """Copies an app directory into the run's temp dir, readable by everyone (nginx workers and Passenger's
    apps run as an unprivileged user when the bench runs as root)."""
    shutil.copytree(src, dst, dirs_exist_ok=True)
    for root, dirs, files in os.walk(dst):
        os.chmod(root, mode)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dst


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
    return path


class Respawner:
    """A Node.js instance run by the harness under a minimal respawn loop that stands for systemd's
    `Restart=always` with its default `RestartSec=100ms` (what people put under nginx): when the process dies
    and no stop was asked for, it is started again 0.1 s later."""

    RESTART_SEC = 0.1

    def __init__(self, name, cmd, cwd, env, listen):
        self.name, self.cmd, self.cwd, self.env, self.listen = name, cmd, cwd, env, listen
        self.proc = None
        self.started_at = None
        self.stopping = False
        self.lock = threading.Lock()
        self.respawns = 0
        self.thread = None

    def _spawn(self):
        p = Proc(self.name, self.cmd, self.cwd, env=self.env)
        p.start()
        self.proc = p
        self.started_at = time.monotonic()

    def start(self):
        self._spawn()
        self.thread = threading.Thread(target=self._watch, name=f"respawn-{self.name}", daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.stopping:
            p = self.proc
            if p is None:
                time.sleep(0.02)
                continue
            p.proc.wait()
            with self.lock:
                if self.stopping or self.proc is not p:
                    continue
                time.sleep(self.RESTART_SEC)
                if self.stopping:
                    return
                self.respawns += 1
                self._spawn()

    def pid(self):
        return self.proc.pid if self.proc and self.proc.alive() else None

    def pids(self):
        return self.proc.pids() if self.proc else []

    def age(self):
        return time.monotonic() - self.started_at if self.started_at else 0.0

    def answering(self):
        port, unix = (None, self.listen) if isinstance(self.listen, str) else (self.listen, None)
        try:
            return answers(port, unix) is True
        except OSError:
            return False

    def restart(self):
        """Stop (SIGTERM, wait), start again, wait until it answers: a hand-made rolling step."""
        with self.lock:
            old = self.proc
            self.proc = None
            old.stop()
            if isinstance(self.listen, str) and os.path.exists(self.listen):
                os.unlink(self.listen)
            self._spawn()
        benchlib.wait_until(f"{self.name} answering again", lambda: self.answering(), START_DEADLINE)

    def stop(self):
        self.stopping = True
        with self.lock:
            if self.proc:
                self.proc.stop()


def node_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TZ")}
    env["NODE_ENV"] = "production"
    env.update(extra or {})
    return env


def free_ports(n):
    """n distinct free ports (each found by binding port 0)."""
    out = set()
    while len(out) < n:
        out.add(free_port())
    return sorted(out)


def require(stacks, out):
    """At least one stack to measure: else the scenario failed (stacks could not start) or was skipped (none
    selected by --stacks, or every one unsupported)."""
    if stacks:
        return
    if out.get("failed_stacks"):
        raise BenchError("no stack could start: " + "; ".join(f"{x['stack']}: {x['error'][:200]}"
                                                               for x in out["failed_stacks"]))
    if out.get("skipped"):
        raise Skip("every stack skipped: " + "; ".join(f"{x['stack']}: {x['reason']}" for x in out["skipped"]))
    raise Skip("no stack selected by --stacks")


def become_subreaper():
    """Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER): daemons that detach
    (PM2's God daemon) stay in our process tree, so descendants() finds them and their exit can be reaped here
    rather than left as zombies under an init that may not reap."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_zombies():
    """Reaps children that have exited and that nobody waits for (orphans handed to us as subreaper). Called
    only between scenarios, when every process a scenario started has been stopped and waited for."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
