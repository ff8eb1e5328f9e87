"""The four ways bench/run-all runs the same Node.js hello app (bench/apps/node/hello.js) with 2 instances:

- rein: a listener passing to an `external` application with `"processes": 2` (rein's supervisor, its
  socket per instance, its rolling reload through GET /control/applications/web/restart);
- pm2: PM2 cluster mode (`instances: 2`, `exec_mode: cluster`; the daemon is the cluster master, `pm2 reload`
  is its rolling reload), PM2_HOME inside the run's temp dir;
- nginx: nginx (worker_processes = CPUs, upstream keepalive 64) in front of 2 instances the harness starts by
  hand on their own ports (or Unix sockets), each under a respawn loop standing for systemd's Restart=always;
  its "reload" restarts them one by one, waiting for each to answer;
- passenger: Apache 2.4 (event MPM) + Debian's mod_passenger, `PassengerMinInstances 2` / `PassengerMaxPoolSize
  2`, reloaded with `passenger-config restart-app` (open-source Passenger restarts without rolling).

Each stack offers the same operations to the scenarios: `instances()` [(pid, age_s)], `capacity(victim)`
(all its instances up again, the victim gone), `reload()` -> (ok, seconds, detail) and the process lists for
CPU and memory.
"""

import json
import os
import subprocess
import time
import xml.etree.ElementTree as ET

import benchlib
from benchlib import BenchError, log

from .core import (START_DEADLINE, Nginx, Proc, Rein, Respawner, Stack, copy_tree, free_ports, node_env,
                   wait_answering)

INSTANCES = 2
EXPECT = b'{"hello":"world"}'
APP = "web"


def app_dir(ctx, tmp):
    d = os.path.join(tmp, "node-app")
    if not os.path.exists(d):
        copy_tree(os.path.join(ctx.apps, "node"), d)
    return d


# --------------------------------------------------------------------------------------------- rein


class ReinNode(Rein):
    def __init__(self, ctx, scope, tmp, name="rein", socket="unix", apps=None, handoff=False):
        super().__init__(ctx, scope, name, tmp)
        self.app = APP
        self.port = free_ports(1)[0]
        d = app_dir(ctx, tmp)
        self.app_conf = {"type": "external", "executable": ctx.bins["node"], "arguments": ["hello.js"],
                         "working_directory": d, "processes": INSTANCES, "socket": socket}
        if handoff:
            self.app_conf["handoff"] = True
        self.configure({"listeners": {f"127.0.0.1:{self.port}": {"pass": f"applications/{APP}"}},
                        "applications": {APP: self.app_conf}}, f'"socket": "{socket}" applications')
        self.wait_app(APP, INSTANCES)
        wait_answering(name, self.port, expect=EXPECT, procs=[self.proc])

    def instances(self):
        return self.ready_instances(APP)

    def proxy_pids(self):
        return [self.proc.pid] if self.proc.alive() else []

    def capacity(self, victim):
        ready = self.instances()
        return len(ready) >= INSTANCES and all(p != victim for p, _ in ready)

    def reload(self):
        t0 = time.monotonic()
        status, body = benchlib.control(self.sock, "GET", f"/control/applications/{APP}/restart", timeout=120)
        return status == 200, time.monotonic() - t0, body

    def describe(self):
        return {"config": self.config}


# --------------------------------------------------------------------------------------------- PM2


class Pm2Ctl:
    """bench/apps/node/pm2-ctl.js, kept running: one JSON line per command."""

    def __init__(self, ctx, env):
        self.p = subprocess.Popen([ctx.bins["node"], os.path.join(ctx.apps, "node", "pm2-ctl.js")], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, start_new_session=True)
        first = self._read(START_DEADLINE)
        if not first.get("connected"):
            raise BenchError(f"pm2-ctl: {first}")

    def _read(self, timeout):
        import select
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise BenchError(f"pm2-ctl: no answer within {timeout}s")
        line = self.p.stdout.readline()
        if not line:
            raise BenchError("pm2-ctl exited")
        return json.loads(line)

    def ask(self, cmd, timeout=60):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        a = self._read(timeout)
        if "error" in a:
            raise BenchError(f"pm2-ctl {cmd}: {a['error']}")
        return a

    def stop(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


class Pm2Node(Stack):
    key = "pm2"

    def __init__(self, ctx, scope, tmp, name="pm2"):
        super().__init__(name)
        self.ctx, self.tmp = ctx, tmp
        self.port = free_ports(1)[0]
        self.home = os.path.join(tmp, "pm2-home")
        os.makedirs(self.home, exist_ok=True)
        d = app_dir(ctx, tmp)
        self.eco = {"apps": [{"name": "hello", "script": os.path.join(d, "hello.js"), "cwd": d,
                              "instances": INSTANCES, "exec_mode": "cluster",
                              "env": {"PORT": str(self.port), "NODE_ENV": "production"}}]}
        eco_path = os.path.join(tmp, "pm2-ecosystem.json")
        with open(eco_path, "w") as f:
            json.dump(self.eco, f, indent=2)
        self.env = node_env({"PM2_HOME": self.home, "NODE_PATH": ctx.bins["node_path"]})
        self.daemon_ids = []
        scope.add(self)
        self.ctl = None
        r = subprocess.run([ctx.bins["pm2"], "start", eco_path], env=self.env, capture_output=True, text=True,
                           timeout=60)
        self._remember_daemon()
        if r.returncode != 0:
            raise BenchError(f"pm2 start failed ({r.returncode}): {(r.stdout + r.stderr)[-1500:]}")
        self.ctl = Pm2Ctl(ctx, self.env)
        benchlib.wait_until(f"{name}: {INSTANCES} online workers", lambda: len(self.instances()) >= INSTANCES,
                            START_DEADLINE)
        wait_answering(name, self.port, expect=EXPECT)
        self.extra_pids = lambda: [self.daemon_pid()] if self.daemon_pid() else []

    def daemon_pid(self):
        try:
            with open(os.path.join(self.home, "pm2.pid")) as f:
                pid = int(f.read().strip())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def _remember_daemon(self):
        pid = self.daemon_pid()
        if pid:
            self.daemon_ids = benchlib.identify([pid] + benchlib.descendants(pid))

    def instances(self):
        procs = self.ctl.ask("list", timeout=10)["procs"]
        return [(p["pid"], p["uptime_s"] or 0.0) for p in procs if p["status"] == "online" and p["pid"]]

    def capacity(self, victim):
        ready = self.instances()
        return len(ready) >= INSTANCES and all(p != victim for p, _ in ready)

    def reload(self):
        t0 = time.monotonic()
        a = self.ctl.ask("reload hello", timeout=120)
        return a.get("ok", False), time.monotonic() - t0, a

    def stop(self):
        self._remember_daemon()
        ids = list(self.daemon_ids)
        if self.ctl:
            self.ctl.stop()
        try:
            subprocess.run([self.ctx.bins["pm2"], "kill"], env=self.env, capture_output=True, timeout=30)
        except (subprocess.TimeoutExpired, OSError) as e:
            log(f"pm2 kill: {e}")
        benchlib.kill_identified(ids)

    def describe(self):
        return {"ecosystem": self.eco, "command": "pm2 start pm2-ecosystem.json (PM2_HOME in the temp dir)"}


# --------------------------------------------------------------------------------------------- nginx + 2 instances


class NginxNode(Nginx):
    """nginx → 2 Node.js instances started by hand, over TCP ports or Unix sockets."""

    def __init__(self, ctx, scope, tmp, name="nginx", socket="tcp", max_fails=None):
        d = app_dir(ctx, tmp)
        self.instances_ = []
        if socket == "unix":
            listens = [os.path.join(tmp, f"{name}-node{i}.sock") for i in range(INSTANCES)]
            servers = [f"unix:{p}" for p in listens]
        else:
            listens = free_ports(INSTANCES)
            servers = [f"127.0.0.1:{p}" for p in listens]
        if max_fails is not None:
            servers = [f"{x} max_fails={max_fails}" for x in servers]
        for i, listen in enumerate(listens):
            inst = Respawner(f"{name}-node{i}", [ctx.bins["node"], "hello.js"], d, node_env({"PORT": str(listen)}),
                             listen)
            scope.add(inst)
            inst.start()
            self.instances_.append(inst)
        for inst in self.instances_:
            benchlib.wait_until(f"{inst.name} answering", inst.answering, START_DEADLINE)
            if isinstance(inst.listen, str):
                os.chmod(inst.listen, 0o666)  # nginx workers run unprivileged when the bench runs as root
        port = free_ports(1)[0]
        body = benchlib.nginx_upstream("app", servers) + "\n" + benchlib.nginx_proxy_server(port, "app")
        super().__init__(ctx, scope, name, tmp, body, port)
        self.servers = servers
        wait_answering(name, port, expect=EXPECT, procs=[self.proc])

    def pids(self):
        out = self.proc.pids()
        for i in self.instances_:
            out += i.pids()
        return out

    def proxy_pids(self):
        return self.proc.pids()

    def instances(self):
        return [(i.pid(), i.age()) for i in self.instances_ if i.pid()]

    def capacity(self, victim):
        return all(i.pid() and i.pid() != victim and i.answering() for i in self.instances_)

    def reload(self):
        t0 = time.monotonic()
        for i in self.instances_:
            i.restart()
        return True, time.monotonic() - t0, {"restarted": [i.name for i in self.instances_]}

    def describe(self):
        return {"conf": self.conf_text, "instances": [i.cmd for i in self.instances_],
                "respawn": f"Restart=always-like loop, {Respawner.RESTART_SEC}s after an exit"}


# --------------------------------------------------------------------------------------------- Passenger


def apache_conf(tmp, port, appdir, instances=INSTANCES):
    return f"""# generated by bench/run-all: Apache 2.4 + Phusion Passenger (Debian's libapache2-mod-passenger)
ServerRoot {tmp}
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile {tmp}/apache.pid
ErrorLog {tmp}/apache-error.log
LogLevel warn
Mutex file:{tmp}/apache-run
DefaultRuntimeDir {tmp}/apache-run
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule passenger_module /usr/lib/apache2/modules/mod_passenger.so
User www-data
Group www-data

# Enough threads for 1,000 concurrent connections (the default allows 400), keep-alive without a limit.
StartServers 2
ServerLimit 16
ThreadsPerChild 64
MaxRequestWorkers 1024
KeepAlive On
MaxKeepAliveRequests 0
KeepAliveTimeout 65

PassengerRoot /usr/lib/ruby/vendor_ruby/phusion_passenger/locations.ini
PassengerDefaultRuby /usr/bin/ruby
PassengerInstanceRegistryDir {tmp}/reg
PassengerDisableSecurityUpdateCheck on
PassengerDisableAnonymousTelemetry on
PassengerMaxPoolSize {instances}
PassengerMinInstances {instances}
# The default queue (100 requests) would answer 503 at 500 and 1,000 connections.
PassengerMaxRequestQueueSize 2000
PassengerPreStart http://127.0.0.1:{port}/

<VirtualHost 127.0.0.1:{port}>
  DocumentRoot {appdir}/public
  PassengerAppRoot {appdir}
  PassengerAppType node
  PassengerStartupFile hello.js
  PassengerMinInstances {instances}
  <Directory {appdir}/public>
    Require all granted
  </Directory>
</VirtualHost>
"""


class PassengerNode(Stack):
    key = "passenger"

    def __init__(self, ctx, scope, tmp, name="passenger"):
        ctx.peer("passenger")
        super().__init__(name)
        self.ctx = ctx
        self.tmp = os.path.join(tmp, "passenger")
        os.makedirs(os.path.join(self.tmp, "apache-run"), exist_ok=True)
        os.makedirs(os.path.join(self.tmp, "reg"), exist_ok=True)
        os.chmod(self.tmp, 0o755)
        self.appdir = copy_tree(os.path.join(ctx.apps, "node"), os.path.join(self.tmp, "app"))
        os.makedirs(os.path.join(self.appdir, "public"), exist_ok=True)
        os.chmod(os.path.join(self.appdir, "public"), 0o755)
        self.port = free_ports(1)[0]
        self.conf_text = apache_conf(self.tmp, self.port, self.appdir)
        conf = os.path.join(self.tmp, "apache.conf")
        with open(conf, "w") as f:
            f.write(self.conf_text)
        env = node_env({"PASSENGER_INSTANCE_REGISTRY_DIR": os.path.join(self.tmp, "reg")})
        self.env = env
        self.proc = Proc(name, [ctx.bins["apache2"], "-f", conf, "-DFOREGROUND"], self.tmp, env=env)
        self.procs = [self.proc]
        scope.add(self)
        self.proc.start()
        wait_answering(name, self.port, expect=EXPECT, procs=[self.proc])
        benchlib.wait_until(f"{name}: {INSTANCES} Passenger processes",
                            lambda: len(self.instances()) >= INSTANCES, START_DEADLINE)

    def stop(self):
        self.proc.stop()

    def _instance_dir(self):
        reg = os.path.join(self.tmp, "reg")
        for d in os.listdir(reg):
            if d.startswith("passenger.") and os.path.exists(os.path.join(reg, d, "read_only_admin_password.txt")):
                return os.path.join(reg, d)
        raise OSError("no Passenger instance directory yet")

    def pool(self):
        """Passenger's own view of its processes, from the core's API (what passenger-status reads)."""
        d = self._instance_dir()
        with open(os.path.join(d, "read_only_admin_password.txt")) as f:
            pw = f.read().strip()
        import base64
        auth = base64.b64encode(f"ro_admin:{pw}".encode()).decode()
        status, _, body = benchlib.http_request("GET", "/pool.xml", unix=os.path.join(d, "agents.s", "core_api"),
                                                timeout=5, headers=[f"Authorization: Basic {auth}"])
        if status != 200:
            raise OSError(f"Passenger core API answered {status}")
        root = ET.fromstring(body)
        out = []
        now_us = time.time() * 1e6
        for p in root.iter("process"):
            out.append({"pid": int(p.findtext("pid")), "life": p.findtext("life_status"),
                        "enabled": p.findtext("enabled"),
                        "age_s": (now_us - int(p.findtext("spawn_end_time") or now_us)) / 1e6})
        return out

    def instances(self):
        return [(p["pid"], p["age_s"]) for p in self.pool() if p["life"] == "ALIVE" and p["enabled"] == "ENABLED"]

    def capacity(self, victim):
        ready = self.instances()
        return len(ready) >= INSTANCES and all(p != victim for p, _ in ready)

    def reload(self):
        cmd = [self.ctx.bins["passenger-config"], "restart-app", self.appdir]
        t0 = time.monotonic()
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        return r.returncode == 0, time.monotonic() - t0, {"command": " ".join(cmd),
                                                           "output": (r.stdout + r.stderr).strip()[-500:]}

    def describe(self):
        return {"conf": self.conf_text}


MAKERS = {  # stack name -> (kind for --stacks, label, constructor)
    "rein": ("rein", "rein", lambda ctx, scope, tmp: ReinNode(ctx, scope, tmp)),
    # The instances take the client connections themselves (`"handoff": true`): no proxy hop.
    "rein-handoff": ("rein", "rein, handoff",
                     lambda ctx, scope, tmp: ReinNode(ctx, scope, tmp, name="rein-handoff", handoff=True)),
    "pm2": ("pm2", "PM2 cluster", lambda ctx, scope, tmp: Pm2Node(ctx, scope, tmp)),
    "nginx": ("nginx", "nginx + 2 node", lambda ctx, scope, tmp: NginxNode(ctx, scope, tmp)),
    # The same, with nginx's passive health check off (`max_fails=0`): a request that finds its instance down is
    # passed to the other instead of both being marked down for fail_timeout (10 s) during a hand-made restart.
    "nginx-mf0": ("nginx", "nginx + 2 node, max_fails=0",
                  lambda ctx, scope, tmp: NginxNode(ctx, scope, tmp, name="nginx-mf0", max_fails=0)),
    "passenger": ("passenger", "Passenger (Apache)", lambda ctx, scope, tmp: PassengerNode(ctx, scope, tmp)),
}


def makers(ctx, scope, tmp, names=("rein", "rein-handoff", "pm2", "nginx", "passenger")):
    return [(MAKERS[n][0], MAKERS[n][1], (lambda n=n: MAKERS[n][2](ctx, scope, tmp))) for n in names]
