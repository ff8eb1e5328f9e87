"""Helpers shared by the scripts in bench/ (static-file, proxy, tls, run-all): tools and build, machine facts,
server processes on free ports, CPU and memory accounting from /proc, wrk runs and their parsing, and the
generated blocks in docs/benchmarks.md.

Nothing here prints to stdout; progress goes to stderr through log(), prefixed with the script's name (set_name).
"""

import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC_PATH = os.path.join(REPO, "docs", "benchmarks.md")
START_DEADLINE = 15.0
STOP_DEADLINE = 10.0

_NAME = ["bench"]


def set_name(name):
    _NAME[0] = name


def log(msg):
    print(f"[{_NAME[0]}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------------------------- tools, build


def raise_nofile(want, need):
    """Raises the soft open-file limit towards `want`; fails when it stays below `need`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            soft, hard = want, want
        except (ValueError, OSError):
            pass
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft == resource.RLIM_INFINITY or soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        raise BenchError(f"open-file limit is {soft}; this benchmark needs {need} (raise the hard limit)")
    return soft


def ensure_tools():
    missing = [t for t in ("nginx", "wrk") if not shutil.which(t) and not os.path.exists(f"/usr/sbin/{t}")]
    if missing:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        log(f"installing {missing} with apt-get")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(sudo + ["apt-get", "update"], check=False, env=env)
        pkgs = []
        if "wrk" in missing:
            pkgs.append("wrk")
        if "nginx" in missing:
            # nginx-light exists up to bookworm; later releases ship only nginx.
            r = subprocess.run(sudo + ["apt-get", "install", "-y", "nginx-light"] + pkgs, env=env)
            if r.returncode != 0:
                subprocess.run(sudo + ["apt-get", "install", "-y", "nginx"] + pkgs, check=True, env=env)
        else:
            subprocess.run(sudo + ["apt-get", "install", "-y"] + pkgs, check=True, env=env)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    wrk = shutil.which("wrk")
    if not (os.path.exists(nginx) and wrk):
        raise BenchError("nginx or wrk still missing after apt-get")
    return nginx, wrk


def build_rein(skip):
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    if not os.path.isabs(target):
        target = os.path.join(REPO, target)
    if not skip:
        log(f"building rein (release, CARGO_TARGET_DIR={target})")
        subprocess.run(["cargo", "build", "--release", "--bin", "rein"], cwd=REPO, check=True,
                       env=dict(os.environ, CARGO_TARGET_DIR=target))
    binary = os.path.join(target, "release", "rein")
    if not os.access(binary, os.X_OK):
        raise BenchError(f"{binary} not found (run without --no-build)")
    return binary


def versions(nginx, wrk, rein):
    def out(cmd, cwd=None):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
            return (r.stdout + r.stderr).strip()
        except OSError as e:
            return f"unavailable ({e})"

    rev = out(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO)
    dirty = out(["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "Cargo.toml",
                 "Cargo.lock"], cwd=REPO)
    return {
        "rein": f"{rev}{' (+ uncommitted changes in src/)' if dirty else ''}",
        "rein_binary": rein,
        "nginx": out([nginx, "-v"]).splitlines()[0],
        "wrk": out([wrk, "-v"]).splitlines()[0].split(" Copyright")[0],
    }


def machine():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "online_cpus": os.cpu_count(),
        "cpu_model": cpu,
        "kernel": platform.release(),
        "ram_gib": round(mem_kb / 1024 / 1024, 1),
    }


def command_string(script):
    cmd_str = " ".join([script] + sys.argv[1:])
    if os.environ.get("CARGO_TARGET_DIR"):
        cmd_str = f"CARGO_TARGET_DIR={os.environ['CARGO_TARGET_DIR']} {cmd_str}"
    return cmd_str


# --------------------------------------------------------------------------------------------- processes


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_of(pid):
    kids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                out[k] = int(v.split()[0])
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    out["Pss"] = int(line.split()[1])
    except OSError:
        pass
    return out


def host_busy_seconds():
    """CPU seconds spent busy (not idle/iowait) by the whole machine since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def cpu_split_seconds(pid):
    """(user, kernel) CPU seconds of a process, all its threads (utime, stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


class Server:
    """A server process in its own session. `ready()` returns None when it answers as expected, else a string
    saying what it did instead; start() polls it until then (with a deadline)."""

    def __init__(self, name, cmd, port, tmp, ready, cpus=None):
        self.name, self.cmd, self.port, self.tmp, self.ready, self.cpus = name, cmd, port, tmp, ready, cpus
        self.proc = None
        self.out = None

    def start(self):
        self.out = open(os.path.join(self.tmp, f"{self.name}.out"), "wb")
        pre = (lambda: os.sched_setaffinity(0, self.cpus)) if self.cpus else None
        self.proc = subprocess.Popen(self.cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=pre)
        deadline = time.monotonic() + START_DEADLINE
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with {self.proc.returncode} at start: {self.output()}")
            try:
                last = self.ready()
                if last is None:
                    return
            except OSError as e:
                last = str(e)
            time.sleep(0.02)  # poll interval, not a wait for readiness
        raise BenchError(f"{self.name} did not answer on port {self.port} within {START_DEADLINE}s "
                         f"(last: {last}): {self.output()}")

    def output(self):
        try:
            with open(os.path.join(self.tmp, f"{self.name}.out"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def pids(self):
        if not self.proc or self.proc.poll() is not None:
            return []
        return [self.proc.pid] + children_of(self.proc.pid)

    def memory(self):
        """kB summed over the server's processes (nginx: master + workers)."""
        return memory_of(self.pids())

    def cpu(self):
        return cpu_of(self.pids())

    def cpu_split(self):
        """(user, kernel) CPU seconds summed over the server's processes."""
        return cpu_split_of(self.pids())

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            pgid = self.proc.pid  # start_new_session: the server leads its own process group
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=STOP_DEADLINE)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop within {STOP_DEADLINE}s; killing it")
            try:
                os.killpg(pgid, signal.SIGKILL)  # stragglers (nginx workers) in the same group
            except ProcessLookupError:
                pass
            self.proc.wait()
        if self.out:
            self.out.close()


def http_get(port, path, timeout, unix=None):
    """One GET with Connection: close, over TCP to 127.0.0.1:port or over the Unix socket `unix`."""
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(unix)
        except OSError:
            s.close()
            raise
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    with s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, body


def response_headers(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.partition(b"\r\n\r\n")[0].decode(errors="replace")


# --------------------------------------------------------------------------------------------- wrk

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def parse_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        raise BenchError(f"cannot parse wrk latency {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_wrk(out):
    res = {}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise BenchError(f"no Requests/sec in wrk output:\n{out}")
    res["rps"] = float(m.group(1))
    for pct in ("50", "75", "90", "99"):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        if m:
            res[f"p{pct}_ms"] = parse_ms(m.group(1))
    if "p99_ms" not in res:
        raise BenchError(f"no 99% latency in wrk output (was --latency given?):\n{out}")
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    res["requests"] = int(m.group(1)) if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    res["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups()))) if m else {}
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    res["non_2xx"] = int(m.group(1)) if m else 0
    return res


RUNNING = []


def run_wrk(wrk, server, threads, conns, duration, cpus, path, sample_memory=True, also=(), scheme="http"):
    """One wrk run against `server` at `path` (`scheme` http or https). CPU is accounted for the server, for wrk
    (this process's children), for the servers in `also` (e.g. a shared backend: key `<name>_cpu_pct`), and
    machine-wide."""
    cmd = [wrk, f"-t{threads}", f"-c{conns}", f"-d{duration}s", "--latency",
           f"{scheme}://127.0.0.1:{server.port}{path}"]
    pre = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    also0 = [s.cpu() for s in also]
    (user0, kernel0), host0, t0 = _cpu_reading(server), host_busy_seconds(), time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=pre)
    RUNNING.append(proc)
    mid = {}
    if sample_memory:
        # Sample memory halfway through the run, when every connection is open and busy.
        def sample():
            mid.update(server.memory())
        timer = threading.Timer(duration / 2, sample)
        timer.start()
    out, _ = proc.communicate()
    if sample_memory:
        timer.join()
    wall = time.monotonic() - t0
    (user1, kernel1), host1 = _cpu_reading(server), host_busy_seconds()
    cpu0, cpu1 = user0 + (kernel0 or 0), user1 + (kernel1 or 0)
    also1 = [s.cpu() for s in also]
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    RUNNING.remove(proc)
    if proc.returncode != 0:
        raise BenchError(f"wrk failed ({proc.returncode}):\n{out}")
    res = parse_wrk(out)
    res["server_cpu_pct"] = round(100 * (cpu1 - cpu0) / wall, 1)
    res["wrk_cpu_pct"] = round(100 * ((ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)) / wall, 1)
    also_pct = 0.0
    for s, a0, a1 in zip(also, also0, also1):
        res[f"{s.name}_cpu_pct"] = round(100 * (a1 - a0) / wall, 1)
        also_pct += res[f"{s.name}_cpu_pct"]
    # Whatever else ran on the machine meanwhile (softirq for loopback traffic counts here too): a noise gauge.
    res["host_cpu_pct"] = round(100 * (host1 - host0) / wall, 1)
    res["other_cpu_pct"] = round(res["host_cpu_pct"] - res["server_cpu_pct"] - res["wrk_cpu_pct"] - also_pct, 1)
    if res.get("requests"):
        n = res["requests"]
        res["server_cpu_us_per_req"] = round(1e6 * (cpu1 - cpu0) / n, 2)
        if kernel0 is not None:
            res["server_user_us_per_req"] = round(1e6 * (user1 - user0) / n, 2)
            res["server_kernel_us_per_req"] = round(1e6 * (kernel1 - kernel0) / n, 2)
    if mid:
        res["rss_mid_kb"] = mid["VmRSS"]
        res["pss_mid_kb"] = mid["Pss"]
    res["raw"] = out
    return res


def _cpu_reading(server):
    """(user, kernel) CPU seconds of `server`; kernel is None for a server that reports only a total (then
    the total is in `user`)."""
    if hasattr(server, "cpu_split"):
        return server.cpu_split()
    return server.cpu(), None


def wrk_errors(r):
    return r["non_2xx"] + sum(r["socket_errors"].values())


# --------------------------------------------------------------------------------------------- report


def fmt_ms(ms):
    return f"{ms * 1000:.0f} µs" if ms < 1 else f"{ms:.2f} ms"


def fmt_mb(kb):
    return f"{kb / 1024:.1f} MB"


GLANCE_KEY = "glance"
GLANCE_HEAD = ("| scenario | figure | rein | peer | rein / peer | CPU per request, rein / peer | run |\n"
               "|---|---|---:|---|---:|---:|---|")


def load_results(path):
    """A results file for --render; its own path becomes the raw results the docs point to, wherever it was
    written when the benchmark ran."""
    import json as _json
    with open(path) as f:
        result = _json.load(f)
    result["json_path"] = os.path.abspath(path)
    return result


def results_rel(result):
    """The results file as the docs name it: relative to the repository."""
    return os.path.relpath(result["json_path"], REPO)


def commit_of(text):
    """The commit in a version string ("rein 0.1.0 (64786cdfd87b)", "c774ca0899c0 (+ uncommitted changes ...)"),
    short, with a + when the tree had uncommitted changes in src/."""
    m = re.search(r"\b([0-9a-f]{7,40})\b", text or "")
    if not m:
        return "?"
    return m.group(1)[:7] + ("+" if "uncommitted" in text else "")


def machine_label(m):
    """"2 CPUs, Intel Xeon": the machine in a few words, for the tables; the sections give the rest."""
    model = re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b.*|\d+-Core.*", "", m.get("cpu_model", "")).split()
    return f"{m['nproc']} CPUs, {' '.join(model[:2]) or 'unknown CPU'}"


def run_label(result, rein_version=None):
    """"2026-11-26 · 64786cd · 2 CPUs, Intel Xeon": when, which commit, where."""
    v = rein_version if rein_version is not None else result["versions"]["rein"]
    return f"{result['date'][:10]} · {commit_of(v)} · {machine_label(result['machine'])}"


def reproduce(command, drop=("--no-build", "--no-docs", "--docs")):
    """The command a reader types to run the benchmark again: the recorded one without the run's environment
    (CARGO_TARGET_DIR=…) and without the flags that only say where the binary and the output come from."""
    words = [w for w in command.split() if "=" not in w or w.startswith("-")]
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w in drop:
            continue
        if w in ("--render", "--rein"):
            skip = True
            continue
        out.append(w)
    return " ".join(out)


def provenance(result, command, extra=""):
    """The line under a section's setup: how to run it again, when, where, on which commit, and the raw file."""
    m = result["machine"]
    return (f"Reproduce: `{command}` · run {result['date']} on {m['nproc']} CPUs ({m['cpu_model']}), "
            f"Linux {m['kernel']}, rein {commit_of(result['versions']['rein'])}{extra} · raw results: "
            f"`{results_rel(result)}`")


def slug(title):
    """The anchor GitHub gives a heading."""
    s = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return s.replace(" ", "-")


def ratio(a, b, fmt="{:.2f}"):
    return "–" if a is None or not b else fmt.format(a / b)


def span(xs, fmt="{:.2f}"):
    """"0.79–0.92" (or one figure when they agree), for the readings."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    lo, hi = fmt.format(min(xs)), fmt.format(max(xs))
    return lo if lo == hi else f"{lo}–{hi}"


def memory_targets(idle_kb, c100_kb=None, per_conn_kb=None, per_conn_note="", idle_note=""):
    """Issue 27's memory targets for rein's own process, as far as a run measured them."""
    parts = [f"≤ 10 MB idle {'met' if idle_kb <= 10 * 1024 else 'missed'} ({fmt_mb(idle_kb)}{idle_note})"]
    if c100_kb:
        parts.append(f"≤ 15 MB at 100 connections {'met' if c100_kb <= 15 * 1024 else 'missed'} ({fmt_mb(c100_kb)})")
    if per_conn_kb is not None:
        parts.append(f"≤ 2 kB per idle keep-alive connection {'met' if per_conn_kb <= 2 else 'missed'} "
                     f"({per_conn_kb:.1f} kB{per_conn_note})")
    return "Issue 27's memory targets for rein's own RSS: " + "; ".join(parts) + "."


def glance_row(scenario, figure, rein, peer, rein_peer, cpu, run):
    """One line of the at-a-glance table. `scenario` is (text, section title); the link goes to the section."""
    text, title = scenario
    return f"| [{text}](#{slug(title)}) | {figure} | {rein} | {peer} | {rein_peer} | {cpu} | {run} |"


def update_docs(key, script, body, glance=()):
    """Replaces the block `key` in docs/benchmarks.md with `body` (appends it when absent), then the at-a-glance
    block from every block's `glance` rows, in the order the blocks stand; the rest of the file is left alone.
    A block keeps its rows in a comment at its top, so that a script rewriting its own block also rewrites its
    rows and never needs another script's results."""
    begin, end = f"<!-- BEGIN bench:{key} (generated by bench/{script}; do not edit by hand) -->", \
        f"<!-- END bench:{key} -->"
    rows = "".join(f"{r}\n" for r in glance)
    block = f"{begin}\n" + (f"<!-- glance\n{rows}-->\n" if rows else "") + f"{body}\n{end}"
    if os.path.exists(DOC_PATH):
        with open(DOC_PATH) as f:
            text = f.read()
    else:
        text = ("# Benchmarks\n\n## At a glance\n\n"
                f"<!-- BEGIN bench:{GLANCE_KEY} (generated by bench/lib/benchlib.py; do not edit by hand) -->\n"
                f"<!-- END bench:{GLANCE_KEY} -->\n")
    text = _replace_block(text, key, block)
    text = _replace_block(text, GLANCE_KEY, _glance_block(text))
    os.makedirs(os.path.dirname(DOC_PATH), exist_ok=True)
    with open(DOC_PATH, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _replace_block(text, key, block):
    end = f"<!-- END bench:{key} -->"
    pat = re.compile(re.escape(f"<!-- BEGIN bench:{key} ") + r".*?" + re.escape(end), re.S)
    if pat.search(text):
        return pat.sub(lambda _: block, text)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def _glance_block(text):
    rows = []
    for m in re.finditer(r"<!-- glance\n(.*?)-->", text, re.S):
        rows += [r for r in m.group(1).splitlines() if r.strip()]
    begin = f"<!-- BEGIN bench:{GLANCE_KEY} (generated by bench/lib/benchlib.py; do not edit by hand) -->"
    return f"{begin}\n{GLANCE_HEAD}\n" + "".join(f"{r}\n" for r in rows) + f"<!-- END bench:{GLANCE_KEY} -->"


def install_signal_handlers():
    def _on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)


# ============================================================================================================
# Added for bench/run-all (the comparison suite); the pieces static-file and proxy share with it live here too.
# ============================================================================================================

# --------------------------------------------------------------------------------------------- process trees


def descendants(pid):
    """Every live descendant of `pid` (children, grandchildren, ...), following /proc's children lists, so
    processes that left the group or the session (Passenger's agents, a daemon's workers) are still found."""
    out, todo, seen = [], [pid], {pid}
    while todo:
        for kid in children_of(todo.pop()):
            if kid not in seen:
                seen.add(kid)
                out.append(kid)
                todo.append(kid)
    return out


def start_time(pid):
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with the pid, it
    identifies a process, so a recycled pid is never mistaken for one we started."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def identify(pids):
    """[(pid, start_time)] of those still alive."""
    out = []
    for p in pids:
        try:
            out.append((p, start_time(p)))
        except OSError:
            pass
    return out


def kill_identified(ids, sig=signal.SIGKILL):
    """Sends `sig` to each (pid, start_time) that is still that same process."""
    for pid, st in ids:
        try:
            if start_time(pid) == st:
                os.kill(pid, sig)
        except (OSError, ValueError):
            pass


def memory_of(pids):
    """kB summed over `pids` (VmRSS, VmHWM, Pss, Threads) and how many were counted."""
    total = {"VmRSS": 0, "VmHWM": 0, "Pss": 0, "Threads": 0, "processes": 0}
    for pid in pids:
        try:
            st = proc_status(pid)
        except OSError:
            continue
        total["processes"] += 1
        for k in ("VmRSS", "VmHWM", "Pss", "Threads"):
            total[k] += st.get(k, 0)
    return total


def cpu_of(pids):
    return sum(cpu_split_of(pids))


def cpu_split_of(pids):
    user = kernel = 0.0
    for pid in pids:
        try:
            u, k = cpu_split_seconds(pid)
        except OSError:
            continue
        user, kernel = user + u, kernel + k
    return user, kernel


def wait_until(what, check, deadline_s, interval=0.02):
    """Polls `check()` until it returns something other than None/False (returned), or raises BenchError
    naming `what` after `deadline_s` seconds. Exceptions from `check` (OSError: not up yet) count as not yet."""
    deadline = time.monotonic() + deadline_s
    last = None
    while True:
        try:
            r = check()
            if r not in (None, False):
                return r
        except (OSError, ValueError) as e:
            last = e
        if time.monotonic() >= deadline:
            raise BenchError(f"{what}: not within {deadline_s:g}s" + (f" (last error: {last})" if last else ""))
        time.sleep(interval)


# --------------------------------------------------------------------------------------------- HTTP over sockets


def http_request(method, path, port=None, unix=None, body=None, timeout=10.0, headers=()):
    """One HTTP/1.1 request with Connection: close over TCP (127.0.0.1:port) or a Unix socket; returns
    (status, headers_text, body_bytes). The body is read to EOF (chunked bodies are de-chunked)."""
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(unix)
        except OSError:
            s.close()
            raise
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    data = body.encode() if isinstance(body, str) else (body or b"")
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    for h in headers:
        head += h + "\r\n"
    if data or method in ("PUT", "POST"):
        head += f"Content-Length: {len(data)}\r\n"
    with s:
        s.sendall(head.encode() + b"\r\n" + data)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    hd, _, rest = buf.partition(b"\r\n\r\n")
    status = int(hd.split(b" ", 2)[1]) if hd.startswith(b"HTTP/") else 0
    if re.search(rb"(?im)^transfer-encoding:\s*chunked", hd):
        out, i = b"", 0
        while True:
            j = rest.find(b"\r\n", i)
            if j < 0:
                break
            size = int(rest[i:j].split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out += rest[j + 2:j + 2 + size]
            i = j + 2 + size + 2
        rest = out
    return status, hd.decode(errors="replace"), rest


def control(sock, method, path, doc=None, timeout=30.0):
    """A request to rein's control API on its Unix socket; returns (status, parsed JSON or text)."""
    import json as _json
    body = None if doc is None else (doc if isinstance(doc, str) else _json.dumps(doc))
    status, _, data = http_request(method, path, unix=sock, body=body, timeout=timeout)
    try:
        return status, _json.loads(data)
    except ValueError:
        return status, data.decode(errors="replace")


# --------------------------------------------------------------------------------------------- nginx configs


def nginx_common_http(tmp, static=False):
    """The http-level settings every bench nginx uses (static-file's and proxy's): no access log, keep-alive
    without a request limit, temp paths inside the temp dir; `static` adds sendfile/tcp_nopush."""
    extra = "\n    sendfile on;\n    tcp_nopush on;" if static else ""
    return f"""    access_log off;{extra}
    tcp_nodelay on;
    keepalive_requests 10000000;
    keepalive_timeout 180s;
    default_type text/plain;
    client_body_temp_path {tmp}/nginx-tmp/body;
    proxy_temp_path {tmp}/nginx-tmp/proxy;
    fastcgi_temp_path {tmp}/nginx-tmp/fastcgi;
    uwsgi_temp_path {tmp}/nginx-tmp/uwsgi;
    scgi_temp_path {tmp}/nginx-tmp/scgi;"""


def nginx_conf(tmp, name, workers, http_body, static=False, comment="bench", worker_connections=8192):
    """A whole nginx.conf for a private nginx (daemon off, pid/logs in `tmp`, prefix `tmp`) whose http block
    is the common settings plus `http_body` (upstreams and servers)."""
    os.makedirs(os.path.join(tmp, "nginx-tmp"), exist_ok=True)
    return f"""# generated by {comment}
worker_processes {workers};
daemon off;
master_process on;
pid {tmp}/{name}.pid;
error_log {tmp}/{name}-error.log warn;
worker_rlimit_nofile 65536;

events {{
    worker_connections {worker_connections};
}}

http {{
{nginx_common_http(tmp, static)}

{http_body}
}}
"""


def nginx_upstream(name, servers, keepalive=64):
    lines = "\n".join(f"        server {s};" for s in servers)
    return f"""    upstream {name} {{
{lines}
        keepalive {keepalive};
        keepalive_requests 10000000;
    }}"""


def nginx_proxy_server(port, upstream):
    """A server proxying everything to `upstream` with pooled HTTP/1.1 connections (as bench/proxy does)."""
    return f"""    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}"""


def nginx_static_server(port, root):
    return f"""    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}"""


def nginx_return_server(listen, body="hello\\n"):
    """A backend answering 200 `body` on every path (`listen`: a list of nginx listen arguments)."""
    ls = "\n".join(f"        listen {x};" for x in listen)
    return f"""    server {{
{ls}
        location / {{
            return 200 "{body}";
        }}
    }}"""


def nginx_server(nginx_bin, tmp, name, conf_text, port, ready, cpus=None):
    """Writes `conf_text` to TMP/NAME.conf and returns a Server running that nginx in the foreground."""
    path = os.path.join(tmp, f"{name}.conf")
    with open(path, "w") as f:
        f.write(conf_text)
    return Server(name, [nginx_bin, "-p", tmp + "/", "-c", path, "-e", os.path.join(tmp, f"{name}-error.log")],
                  port, tmp, ready, cpus)


def rein_static_conf(port, www):
    """rein serving `www` on 127.0.0.1:port (static-file's configuration)."""
    return {"listeners": {f"127.0.0.1:{port}": {"pass": "routes"}},
            "routes": [{"action": {"share": www + "$uri"}}]}


def rein_upstream_conf(port, name, servers):
    """rein passing 127.0.0.1:port to a `name` upstream over `servers` (proxy's configuration, any count)."""
    return {"listeners": {f"127.0.0.1:{port}": {"pass": f"upstreams/{name}"}},
            "upstreams": {name: {"servers": {s: {} for s in servers}}}}


# --------------------------------------------------------------------------------------------- other load tools


def parse_ab(out):
    """ab's report: requests per second, the percentiles it prints, failed and non-2xx requests."""
    res = {}
    m = re.search(r"Requests per second:\s+([\d.]+)", out)
    if not m:
        raise BenchError(f"no 'Requests per second' in ab output:\n{out[-2000:]}")
    res["rps"] = float(m.group(1))
    for pct in ("50", "90", "99"):
        m = re.search(rf"^\s+{pct}%\s+(\d+)", out, re.M)
        if m:
            res[f"p{pct}_ms"] = float(m.group(1))  # ab prints whole milliseconds
    m = re.search(r"Time per request:\s+([\d.]+) \[ms\] \(mean\)", out)
    res["mean_ms"] = float(m.group(1)) if m else None
    m = re.search(r"Complete requests:\s+(\d+)", out)
    res["requests"] = int(m.group(1)) if m else None
    m = re.search(r"Failed requests:\s+(\d+)", out)
    res["failed"] = int(m.group(1)) if m else 0
    m = re.search(r"Non-2xx responses:\s+(\d+)", out)
    res["non_2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Keep-Alive requests:\s+(\d+)", out)
    res["keepalive_requests"] = int(m.group(1)) if m else 0
    return res


def run_ab(ab, url, n, c, keepalive=True, timeout=120):
    cmd = [ab, "-n", str(n), "-c", str(c)] + (["-k"] if keepalive else []) + ["-r", url]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    RUNNING.append(p)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        raise BenchError(f"ab did not finish within {timeout}s:\n{out[-1000:]}")
    finally:
        if p in RUNNING:
            RUNNING.remove(p)
    if p.returncode != 0:
        raise BenchError(f"ab failed ({p.returncode}):\n{out[-2000:]}")
    res = parse_ab(out)
    res["command"] = " ".join(cmd)
    res["raw"] = out
    return res


def start_rein_bench_http(rein, url, conns, duration, timeout=10, gap_from=None):
    """Starts `rein bench http --json` (closed loop, keep-alive) in the background; finish_rein_bench() reads it.
    gap_from: seconds into the load from which the longest gap is measured (the windows over before are left out)."""
    cmd = [rein, "bench", "http", "-c", str(conns), "-d", str(duration), "--timeout", str(timeout), "--json", url]
    if gap_from is not None:
        cmd[-1:-1] = ["--gap-from", str(gap_from)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.bench_cmd = cmd
    p.bench_t0 = time.monotonic()
    RUNNING.append(p)
    return p


def finish_rein_bench(p, timeout=120):
    import json as _json
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise BenchError(f"rein bench http did not finish within {timeout}s")
    finally:
        if p in RUNNING:
            RUNNING.remove(p)
    if p.returncode != 0:
        raise BenchError(f"rein bench http failed ({p.returncode}): {err.strip()[-1000:]}")
    try:
        res = _json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise BenchError(f"rein bench http printed no JSON: {out[-500:]} {err[-500:]}")
    res["command"] = " ".join(p.bench_cmd)
    return res


def median(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    import statistics as _st
    return _st.median(xs)
