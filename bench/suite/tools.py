"""Installs the peers bench/run-all compares rein with, each from its own registry, and reports their versions:

- Debian (apt-get): nginx, wrk, apache2-utils (ab), php8.2-fpm, nodejs, and libapache2-mod-passenger (tried;
  when it cannot be installed or run, the reason is recorded and the Passenger stack is skipped); puma, starman
  and ruby-rack, the Rack and PSGI servers of the rackpsgi scenario (each recorded as unavailable, with the
  reason, when it cannot be installed; ruby-rack is what rein's own Rack adapter loads);
- npm: pm2, into bench/.tools (a local prefix, never global);
- PyPI: gunicorn, uvicorn[standard], granian and matplotlib, into the venv bench/.venv, made from one interpreter
  (Debian's /usr/bin/python3 by default): every Python stack, rein's apps included (through `home`), runs it.

Only what is missing is installed; `--no-install` uses what is there and records what is not.
"""

import json
import os
import re
import shutil
import subprocess
import sys

from benchlib import BenchError, log

APT = {  # binary -> Debian package
    "nginx": "nginx",
    "wrk": "wrk",
    "ab": "apache2-utils",
    "php-fpm8.2": "php8.2-fpm",
    "node": "nodejs",
    "npm": "npm",  # only to install pm2 into bench/.tools
}
PASSENGER_PKG = "libapache2-mod-passenger"
# The rackpsgi scenario's peers: peer name -> Debian package.
RACK_PSGI = {"puma": "puma", "starman": "starman", "ruby-rack": "ruby-rack"}
PIP = ["gunicorn", "uvicorn[standard]", "granian", "matplotlib"]
PY_TOOLS = ("gunicorn", "uvicorn", "granian")
DEBIAN_PYTHON = "/usr/bin/python3"


def default_python():
    """Debian's python3 when there is one (a version manager's python3 may come first on PATH), else the one
    running the suite."""
    return DEBIAN_PYTHON if os.path.exists(DEBIAN_PYTHON) else sys.executable


def _which(name):
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.exists(p)),
                                      None)


def _apt(pkgs, state):
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not state.get("updated"):
        log("apt-get update")
        subprocess.run(sudo + ["apt-get", "update"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        state["updated"] = True
    log(f"apt-get install {' '.join(pkgs)}")
    r = subprocess.run(sudo + ["apt-get", "install", "-y", "--no-install-recommends"] + pkgs, env=env,
                       capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr)[-1500:]


def ensure(bench_dir, install=True, python=None):
    """Returns (bins, peers): paths of the tools, and per peer {"available", "reason"} (plus versions later).
    `python` is the interpreter bench/.venv is made from (default_python())."""
    bins, peers, apt_state = {}, {}, {}
    missing = [b for b in APT if not _which(b)]
    if missing and install:
        rc, out = _apt([APT[b] for b in missing], apt_state)
        if rc != 0:
            log(f"apt-get failed ({rc}): {out}")
    for b in APT:
        bins[b] = _which(b)
    for b in ("nginx", "wrk", "node"):
        if not bins[b]:
            raise BenchError(f"{b} is missing and could not be installed (apt-get install {APT[b]})")
    peers["nginx"] = {"available": True}
    peers["php-fpm"] = ({"available": True} if bins["php-fpm8.2"] else
                        {"available": False, "reason": "php-fpm8.2 missing (apt-get install php8.2-fpm failed)"})
    peers["ab"] = {"available": bool(bins["ab"]), "reason": None if bins["ab"] else "ab missing (apache2-utils)"}

    # npm: pm2 into bench/.tools
    tools = os.path.join(bench_dir, ".tools")
    pm2 = os.path.join(tools, "node_modules", ".bin", "pm2")
    if not os.path.exists(pm2) and install and shutil.which("npm"):
        log(f"npm install --prefix {tools} pm2")
        r = subprocess.run(["npm", "install", "--prefix", tools, "--no-audit", "--no-fund", "pm2"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            log(f"npm install pm2 failed: {(r.stdout + r.stderr)[-800:]}")
    if os.path.exists(pm2):
        bins["pm2"] = pm2
        bins["node_path"] = os.path.join(tools, "node_modules")
        peers["pm2"] = {"available": True}
    else:
        peers["pm2"] = {"available": False, "reason": "pm2 could not be installed with npm into bench/.tools"
                        + ("" if shutil.which("npm") else " (npm missing)")}

    # PyPI: the bench venv, made from the interpreter asked for
    python = python or default_python()
    venv = os.path.join(bench_dir, ".venv")
    vpy = os.path.join(venv, "bin", "python")
    base = venv_base(venv)
    if base and base != os.path.realpath(python) and install:
        # The venv is the suite's own cache: one made from another interpreter is made again, so that every
        # stack runs the interpreter this run names.
        log(f"bench/.venv was made from {base}, not {os.path.realpath(python)}: making it again")
        shutil.rmtree(venv)
    if not os.path.exists(vpy) and install:
        log(f"{python} -m venv {venv}")
        r = subprocess.run([python, "-m", "venv", venv], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"venv failed: {r.stderr[-800:]}")
    if os.path.exists(vpy):
        want = [p for p in PIP if not _pip_has(vpy, p.split("[")[0])]
        if want and install:
            log(f"pip install {' '.join(want)} (into bench/.venv)")
            r = subprocess.run([vpy, "-m", "pip", "install", "-q"] + want, capture_output=True, text=True)
            if r.returncode != 0:
                log(f"pip install failed: {(r.stdout + r.stderr)[-800:]}")
        bins["venv_python"] = vpy
        bins["python_base"] = venv_base(venv)
        if bins["python_base"] != os.path.realpath(python):
            log(f"bench/.venv runs {bins['python_base']}, not {os.path.realpath(python)} (--no-install)")
    for tool in PY_TOOLS:
        path = os.path.join(venv, "bin", tool)
        bins[tool] = path if os.path.exists(path) else None
        peers[tool] = {"available": bool(bins[tool]),
                       "reason": None if bins[tool] else f"{tool} not in bench/.venv (pip install failed?)"}
    peers["matplotlib"] = {"available": bool(bins.get("venv_python")) and _pip_has(bins.get("venv_python"),
                                                                                   "matplotlib")}

    # Passenger: Debian's Apache module, tried; the reason is kept when it cannot be had.
    peers["passenger"] = _passenger(bins, install, apt_state)
    peers.update(_rack_psgi(bins, install, apt_state))
    return bins, peers


def venv_base(venv):
    """The real path of the interpreter a venv was made from (its pyvenv.cfg), or None for no venv."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as f:
            cfg = dict(line.split("=", 1) for line in f if "=" in line)
    except OSError:
        return None
    cfg = {k.strip(): v.strip() for k, v in cfg.items()}
    exe = cfg.get("executable") or (os.path.join(cfg["home"], "python3") if cfg.get("home") else None)
    return os.path.realpath(exe) if exe else None


def _pip_has(vpy, pkg):
    if not vpy:
        return False
    r = subprocess.run([vpy, "-m", "pip", "show", "-q", pkg], capture_output=True)
    return r.returncode == 0


def _passenger(bins, install, apt_state):
    mod = "/usr/lib/apache2/modules/mod_passenger.so"
    if not os.path.exists(mod) and install:
        rc, out = _apt([PASSENGER_PKG], apt_state)
        if rc != 0:
            return {"available": False, "reason": f"apt-get install {PASSENGER_PKG} failed ({rc}): "
                                                  f"{out.strip().splitlines()[-1] if out.strip() else ''}"}
    bins["apache2"] = _which("apache2")
    bins["passenger-config"] = _which("passenger-config")
    if not os.path.exists(mod):
        return {"available": False, "reason": f"{mod} not installed ({PASSENGER_PKG})"}
    if not bins["apache2"] or not bins["passenger-config"]:
        return {"available": False, "reason": "apache2 or passenger-config missing after installing "
                                              f"{PASSENGER_PKG}"}
    r = subprocess.run([bins["passenger-config"], "validate-install", "--auto", "--validate-apache2"],
                       capture_output=True, text=True)
    # Whether it really serves a Node.js app here is proven by starting it (the stack fails with the reason).
    return {"available": True, "validate_install": (r.stdout + r.stderr).strip().splitlines()[-1:]}


def _rack_psgi(bins, install, apt_state):
    """{peer: {"available", "reason"}} for Puma, Starman and Rack, installed from Debian when missing; the ruby
    and perl interpreters (their dependencies) go into `bins` for rein's own ruby and perl applications."""
    missing = [pkg for pkg in RACK_PSGI.values() if not _dpkg_has(pkg)]
    failed = None
    if missing and install:
        rc, out = _apt(missing, apt_state)
        if rc != 0:
            failed = f"apt-get install {' '.join(missing)} failed ({rc}): " + (
                out.strip().splitlines()[-1] if out.strip() else "")
    peers = {}
    for name, pkg in RACK_PSGI.items():
        path = _which(name) if name != "ruby-rack" else None
        if _dpkg_has(pkg) and (path or name == "ruby-rack"):
            peers[name] = {"available": True}
            if path:
                bins[name] = path
        else:
            peers[name] = {"available": False, "reason": failed or f"Debian package {pkg} not installed"
                                                                   + (" (--no-install)" if not install else "")}
    bins["ruby"], bins["perl"] = _which("ruby"), _which("perl")
    return peers


def _dpkg_has(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.endswith(" installed")


def _out(cmd, env=None):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"


def versions(bins, repo):
    v = {}
    rev = _out(["git", "rev-parse", "--short=12", "HEAD"]) if os.path.exists(os.path.join(repo, ".git")) else ""
    v["rein"] = _out([bins["rein"], "--version"]) + (f" ({rev})" if rev and "fatal" not in rev else "")
    v["nginx"] = _out([bins["nginx"], "-v"]).splitlines()[0]
    v["wrk"] = _out([bins["wrk"], "-v"]).splitlines()[0].split(" Copyright")[0]
    if bins.get("ab"):
        m = re.search(r"ApacheBench, Version (\S+)", _out([bins["ab"], "-V"]))
        v["ab"] = f"ApacheBench {m.group(1)}" if m else "ab"
    v["node"] = "Node.js " + _out([bins["node"], "--version"])
    if bins.get("node_path"):
        try:
            with open(os.path.join(bins["node_path"], "pm2", "package.json")) as f:
                v["pm2"] = "PM2 " + json.load(f)["version"]  # never `pm2 --version`: it starts a daemon
        except (OSError, ValueError, KeyError):
            pass
    if bins.get("php-fpm8.2"):
        v["php-fpm"] = _out([bins["php-fpm8.2"], "-v"]).splitlines()[0]
    if bins.get("apache2"):
        v["apache2"] = _out([bins["apache2"], "-v"]).splitlines()[0].replace("Server version: ", "")
    if bins.get("passenger-config"):
        v["passenger"] = _out([bins["passenger-config"], "--version"]).splitlines()[0]
    for tool in PY_TOOLS:
        if bins.get(tool):
            v[tool] = _out([bins[tool], "--version"]).splitlines()[0]
    if bins.get("puma"):
        v["puma"] = _out([bins["puma"], "--version"]).splitlines()[0].replace("puma version", "Puma")
    if bins.get("starman"):
        v["starman"] = _out([bins["starman"], "--version"]).splitlines()[0]
    if bins.get("ruby"):
        v["ruby"] = "Ruby " + _out([bins["ruby"], "-e", "print RUBY_VERSION"])
        if _dpkg_has("ruby-rack"):
            v["rack"] = "Rack " + _out([bins["ruby"], "-e", 'require "rack"; print Rack.release'])
    if bins.get("perl"):
        v["perl"] = "Perl " + _out([bins["perl"], "-e", "print $^V"])
        plack = _out([bins["perl"], "-MPlack", "-e", "print $Plack::VERSION"])
        if re.fullmatch(r"[\d.]+", plack):
            v["plack"] = "Plack " + plack
    if bins.get("venv_python"):
        v["python"] = _out([bins["venv_python"], "--version"]) + f" ({bins.get('python_base')})"
        v["matplotlib"] = "matplotlib " + _out([bins["venv_python"], "-c",
                                                "import matplotlib; print(matplotlib.__version__)"])
    return v
