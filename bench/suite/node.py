"""Axis 3: requests per second and latency of the Node.js JSON hello app (2 instances) under rein, PM2
cluster, nginx → 2 instances and Passenger, at each connection count (`wrk -t2 -c N -d D --latency`,
interleaved: rein, PM2, nginx, Passenger, rein, ...), then `ab -n 10000 -c 100 -k` on the same endpoint, the
tool and parameters of the published comparisons.

Axis 4 (memory) is its own scenario below: fresh stacks, summed RSS/PSS of every process of each stack at
idle, in the middle of `wrk -c100` runs, and the summed peaks (VmHWM) after them; rein's own process apart.
"""

import threading

import benchlib
from benchlib import BenchError, log, wrk_errors

from . import nodestacks
from .core import Scope, in_turn, require, start_stacks

AB_N, AB_C = 10000, 100
MEM_CONNS = 100


def _wrk(ctx, s, conns, duration, sample_memory=False):
    proxy = s.proxy_pids()
    proxy0 = benchlib.cpu_split_of(proxy) if proxy else None
    r = benchlib.run_wrk(ctx.bins["wrk"], s, ctx.args.threads, conns, duration, None, s.path,
                         sample_memory=sample_memory)
    r["errors"] = wrk_errors(r)
    if r.get("requests") and r.get("rps"):
        # What a request cost each part: the stack (server and its instances), wrk, and the proxy hop apart.
        r["wrk_us_per_req"] = round(r["wrk_cpu_pct"] * 1e4 / r["rps"], 2)
        if proxy0:
            user, kernel = (b - a for a, b in zip(proxy0, benchlib.cpu_split_of(proxy)))
            r["proxy_user_us_per_req"] = round(1e6 * user / r["requests"], 2)
            r["proxy_kernel_us_per_req"] = round(1e6 * kernel / r["requests"], 2)
    r["command"] = f"wrk -t{ctx.args.threads} -c{conns} -d{duration}s --latency {s.url()}"
    return r


def warm(ctx, stacks, conns=100):
    secs = 1 if ctx.args.quick else 2
    for s in stacks:
        try:
            _wrk(ctx, s, min(conns, 100), secs)
        except BenchError as e:
            log(f"  warm-up of {s.name} failed: {e}")


def interleaved(ctx, stacks, case, tag, runs):
    """`--rounds` rounds of wrk at each `--vs-conns` count against `stacks` in turn (in_turn's order), each run
    appended to `runs` as {"case", "stack" (its label, else its name), "conns", "round", ...}; `tag` starts the
    log lines."""
    for c in ctx.args.vs_conns:
        for rnd in range(1, ctx.args.rounds + 1):
            for s in in_turn(stacks, rnd):
                label = getattr(s, "label", s.name)
                r = {"case": case, "stack": label, "conns": c, "round": rnd}
                try:
                    r.update(_wrk(ctx, s, c, ctx.args.duration))
                    log(f"  [{tag}] c={c} round {rnd} {label:16} {r['rps']:>8,.0f} req/s  p99 "
                        f"{benchlib.fmt_ms(r['p99_ms'])}  CPU {r.get('server_cpu_us_per_req', 0):.1f} µs/req  "
                        f"errors {r['errors']}")
                except BenchError as e:
                    r["error"] = str(e)
                    log(f"  [{tag}] {label}: error: {e}")
                runs.append(r)


def run_rps(ctx, out):
    tmp = ctx.scenario_dir("node")
    conns = ctx.args.conns
    out["setup"] = {"conns": conns, "duration": ctx.args.duration, "threads": ctx.args.threads,
                    "wrk_command": f"wrk -t{ctx.args.threads} -c N -d {ctx.args.duration}s --latency URL",
                    "ab_command": f"ab -n {AB_N} -c {AB_C} -k URL"}
    runs = out.setdefault("runs", [])
    ab_runs = out.setdefault("ab_runs", [])
    with Scope("node") as scope:
        stacks = start_stacks(ctx, scope, out, nodestacks.makers(ctx, scope, tmp))
        require(stacks, out)
        out["stacks"] = {s.name: s.describe() for s in stacks}
        warm(ctx, stacks)
        total = len(conns) * ctx.args.rounds * len(stacks)
        i = 0
        for c in conns:
            for rnd in range(1, ctx.args.rounds + 1):
                for s in in_turn(stacks, rnd):
                    i += 1
                    r = {"stack": s.name, "conns": c, "round": rnd}
                    try:
                        r.update(_wrk(ctx, s, c, ctx.args.duration))
                        log(f"  [{i}/{total}] c={c} round {rnd} {s.name:10} {r['rps']:>9,.0f} req/s  p50 "
                            f"{benchlib.fmt_ms(r['p50_ms'])}  p99 {benchlib.fmt_ms(r['p99_ms'])}  "
                            f"CPU {r['server_cpu_pct']:.0f}%  errors {r['errors']}")
                    except BenchError as e:
                        r["error"] = str(e)
                        log(f"  [{i}/{total}] c={c} {s.name}: error: {e}")
                    runs.append(r)
        if ctx.bins.get("ab"):
            for rnd in range(1, ctx.args.rounds + 1):
                for s in in_turn(stacks, rnd):
                    r = {"stack": s.name, "round": rnd}
                    try:
                        r.update(benchlib.run_ab(ctx.bins["ab"], s.url(), AB_N, AB_C, keepalive=True))
                        log(f"  [ab round {rnd}] {s.name:10} {r['rps']:>9,.0f} req/s  p50 {r.get('p50_ms')} ms  "
                            f"p99 {r.get('p99_ms')} ms  failed {r['failed']}  non-2xx {r['non_2xx']}  "
                            f"keep-alive {r['keepalive_requests']}")
                    except BenchError as e:
                        r["error"] = str(e)
                        log(f"  [ab round {rnd}] {s.name}: error: {e}")
                    ab_runs.append(r)
        else:
            out.setdefault("skipped", []).append({"stack": "ab", "reason": "ab (apache2-utils) is missing"})
    out["summary"] = summarize_points(runs, "conns")
    out["ab_summary"] = summarize_ab(ab_runs)


def summarize_points(runs, point_key):
    """{stack: {point: medians}} for wrk runs; a point with any error is marked failed."""
    out = {}
    for r in runs:
        out.setdefault(r["stack"], {})
    for name in out:
        for pt in dict.fromkeys(r[point_key] for r in runs):
            rs = [r for r in runs if r["stack"] == name and r[point_key] == pt and "error" not in r]
            bad = [r["error"] for r in runs if r["stack"] == name and r[point_key] == pt and "error" in r]
            if not rs and not bad:
                continue
            row = {"rounds": len(rs), "run_errors": bad}
            if rs:
                row.update(
                    rps_median=benchlib.median(r["rps"] for r in rs),
                    p50_ms_median=benchlib.median(r["p50_ms"] for r in rs),
                    p99_ms_median=benchlib.median(r["p99_ms"] for r in rs),
                    errors=sum(r["errors"] for r in rs),
                    rps_rounds=[round(r["rps"]) for r in rs],
                    server_cpu_pct_median=benchlib.median(r["server_cpu_pct"] for r in rs),
                )
                for key in ("server_cpu_us_per_req", "server_user_us_per_req", "server_kernel_us_per_req",
                            "wrk_us_per_req", "proxy_user_us_per_req", "proxy_kernel_us_per_req"):
                    if all(key in r for r in rs):
                        row[key + "_median"] = benchlib.median(r[key] for r in rs)
            out[name][str(pt)] = row
    return out


def summarize_ab(runs):
    out = {}
    for name in dict.fromkeys(r["stack"] for r in runs):
        rs = [r for r in runs if r["stack"] == name and "error" not in r]
        row = {"rounds": len(rs), "run_errors": [r["error"] for r in runs if r["stack"] == name and "error" in r]}
        if rs:
            row.update(rps_median=benchlib.median(r["rps"] for r in rs),
                       p50_ms_median=benchlib.median(r.get("p50_ms") for r in rs),
                       p99_ms_median=benchlib.median(r.get("p99_ms") for r in rs),
                       failed=sum(r["failed"] for r in rs), non_2xx=sum(r["non_2xx"] for r in rs),
                       keepalive_requests_median=benchlib.median(r["keepalive_requests"] for r in rs))
        out[name] = row
    return out


# --------------------------------------------------------------------------------------------- memory


def _sample(s):
    m = s.memory()
    own = s.own_memory()
    return {"sum": m, "own": own}


def run_memory(ctx, out):
    tmp = ctx.scenario_dir("memory")
    d = ctx.args.duration
    out["setup"] = {"conns": MEM_CONNS, "duration": d,
                    "wrk_command": f"wrk -t{ctx.args.threads} -c{MEM_CONNS} -d{d}s --latency URL",
                    "sampled": "idle: right after start and readiness; under load: halfway through each wrk run; "
                               "peak: VmHWM summed over the stack's live processes after the runs"}
    samples = out.setdefault("samples", [])
    with Scope("memory") as scope:
        stacks = start_stacks(ctx, scope, out, nodestacks.makers(ctx, scope, tmp))
        require(stacks, out)
        for s in stacks:
            samples.append({"stack": s.name, "phase": "idle", **_sample(s)})
        for rnd in range(1, ctx.args.rounds + 1):
            for s in stacks:
                mid = {}
                timer = threading.Timer(d / 2, lambda s=s: mid.update(_sample(s)))
                timer.start()
                try:
                    r = _wrk(ctx, s, MEM_CONNS, d)
                    timer.join()
                    samples.append({"stack": s.name, "phase": "load", "round": rnd, "rps": r["rps"],
                                    "errors": r["errors"], **mid})
                    log(f"  [memory round {rnd}] {s.name:10} under c={MEM_CONNS}: "
                        f"{benchlib.fmt_mb(mid['sum']['VmRSS'])} RSS over {mid['sum']['processes']} processes")
                except BenchError as e:
                    timer.cancel()
                    samples.append({"stack": s.name, "phase": "load", "round": rnd, "error": str(e)})
                    log(f"  [memory round {rnd}] {s.name}: error: {e}")
        for s in stacks:
            samples.append({"stack": s.name, "phase": "after", **_sample(s)})
    out["summary"] = summarize_memory(samples)


def summarize_memory(samples):
    out = {}
    for name in dict.fromkeys(x["stack"] for x in samples):
        xs = [x for x in samples if x["stack"] == name]
        idle = next((x for x in xs if x["phase"] == "idle"), None)
        after = next((x for x in xs if x["phase"] == "after"), None)
        load = [x for x in xs if x["phase"] == "load" and "sum" in x]
        row = {"errors": [x["error"] for x in xs if "error" in x]}
        if idle:
            row["idle_rss_kb"] = idle["sum"]["VmRSS"]
            row["idle_pss_kb"] = idle["sum"]["Pss"]
            row["processes_idle"] = idle["sum"]["processes"]
            if idle["own"]:
                row["own_idle_rss_kb"] = idle["own"]["VmRSS"]
        if load:
            row["load_rss_kb_median"] = benchlib.median(x["sum"]["VmRSS"] for x in load)
            row["load_pss_kb_median"] = benchlib.median(x["sum"]["Pss"] for x in load)
            row["processes_load"] = max(x["sum"]["processes"] for x in load)
            if load[0]["own"]:
                row["own_load_rss_kb_median"] = benchlib.median(x["own"]["VmRSS"] for x in load)
        if after:
            row["peak_hwm_kb"] = after["sum"]["VmHWM"]
            if after["own"]:
                row["own_peak_hwm_kb"] = after["own"]["VmHWM"]
        out[name] = row
    return out
