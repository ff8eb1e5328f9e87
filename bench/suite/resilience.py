"""Axes 1 and 2: reload downtime and crash recovery of the same 2-instance Node.js app under rein, PM2 cluster
mode, nginx in front of 2 hand-run instances, and Passenger.

The load is the same for every stack: `rein bench http -c 100 -d D --json URL` (100 keep-alive connections,
closed loop), which counts failed requests by kind and the longest window without a successful response
whatever the server, among the windows still open at the trigger (`--gap-from`). At D/3 the harness triggers,
on the stack under test:

- reload: rein `GET /control/applications/web/restart` (returns when the rolling reload is done); PM2 `pm2
  reload hello` (programmatic API, returns when done); nginx: each instance restarted in turn (SIGTERM, wait
  for the exit, start, wait until it answers), as people do by hand; Passenger `passenger-config restart-app`.
- crash: SIGKILL to the oldest live instance (if it is younger than 10.5 s the harness first waits until it is
  not, so that every stack's restart policy sees a long-lived process crash, not a crash loop), then the
  stack's own view is polled every 20 ms until as many instances are up as before, the killed one not among
  them: rein's /status (`ready`), PM2's process list (`online`), the nginx stack's respawned instance
  answering on its port, Passenger's pool (`ALIVE`, `ENABLED`). That is the time to full capacity.
"""

import os
import signal
import time

import benchlib
from benchlib import BenchError, log

from . import nodestacks
from .core import Scope, require, start_stacks

CONNS = 100
STEADY_AGE = 10.5  # rein's restart.stable_after default is 10 s; PM2's min_uptime 1 s


def load_duration(ctx):
    return ctx.args.resilience_duration


def run_reload(ctx, out):
    return _run(ctx, out, "reload")


def run_crash(ctx, out):
    return _run(ctx, out, "crash")


def _trigger_reload(stack):
    ok, secs, detail = stack.reload()
    return {"ok": ok, "seconds": round(secs, 3), "detail": detail if not ok else None}


def _trigger_crash(stack, victim, age):
    t0 = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    try:
        benchlib.wait_until(f"{stack.name}: capacity back after kill -9 {victim}",
                            lambda: stack.capacity(victim), 60.0, interval=0.02)
        ttc = time.monotonic() - t0
        return {"ok": True, "killed_pid": victim, "victim_age_s": round(age, 1), "time_to_capacity_s": round(ttc, 3)}
    except BenchError as e:
        return {"ok": False, "killed_pid": victim, "victim_age_s": round(age, 1), "time_to_capacity_s": None,
                "reason": str(e)}


def _run(ctx, out, kind):
    d = load_duration(ctx)
    at = round(d / 3, 2)
    tmp = ctx.scenario_dir(kind)
    out["setup"] = {"connections": CONNS, "load_seconds": d, "trigger_at_s": at,
                    "load_command": f"rein bench http -c {CONNS} -d {d} --timeout 10 --gap-from {at} --json URL"}
    runs = out.setdefault("runs", [])
    with Scope(kind) as scope:
        stacks = start_stacks(ctx, scope, out, nodestacks.makers(ctx, scope, tmp, ("rein", "rein-handoff", "pm2", "nginx",
                                                                                  "nginx-mf0", "passenger")))
        require(stacks, out)
        out["stacks"] = {s.name: s.describe() for s in stacks}
        for rnd in range(1, ctx.args.rounds + 1):
            for s in stacks:
                runs.append(one_round(ctx, s, kind, rnd, d, at))
    out["summary"] = summarize(runs, kind, d)


def one_round(ctx, s, kind, rnd, d, at, tag=None):
    """One round of `kind` ("reload" or "crash") on stack `s`: the load for `d` seconds, the trigger at `at`; the
    round's row (an "error" key when it could not run). A stack offers instances(), capacity(victim), reload()
    and url(), and is named by its `label` when it has one, else its `name`; `tag` names the scenario in the log
    lines."""
    name = getattr(s, "label", s.name)
    r = {"stack": name, "round": rnd}
    p = None
    tag = tag or kind
    try:
        # Steady state before each round: at least 10.5 s since this stack's previous trigger (nginx keeps an
        # instance it saw fail out for fail_timeout, 10 s), and every instance up.
        last = getattr(s, "last_trigger_end", None)
        if last is not None and time.monotonic() < last + STEADY_AGE:
            time.sleep(last + STEADY_AGE - time.monotonic())
        benchlib.wait_until(f"{s.name}: full capacity before the round", lambda: s.capacity(None), 60.0)
        victim = age = None
        if kind == "crash":
            inst = sorted(s.instances(), key=lambda x: -x[1])
            victim, age = inst[0]
            if age < STEADY_AGE:
                time.sleep(STEADY_AGE - age)  # a deliberate steady state, not a wait for a server
                age = STEADY_AGE
        # The gap is the reload's or the crash's: measured among the windows still open at the trigger, not the
        # load's own start (100 new connections on a server; 16 ms in one round).
        p = benchlib.start_rein_bench_http(ctx.bins["rein"], s.url(), CONNS, d, gap_from=at)
        time.sleep(max(0.0, p.bench_t0 + at - time.monotonic()))  # the trigger's schedule
        t_trig = time.monotonic() - p.bench_t0
        trig = _trigger_reload(s) if kind == "reload" else _trigger_crash(s, victim, age)
        s.last_trigger_end = time.monotonic()
        res = benchlib.finish_rein_bench(p, timeout=d + 90)
        r.update(trigger_at_s=round(t_trig, 3), trigger=trig, load=res,
                 failed=res["errors"]["total"], longest_gap_ms=res["longest_gap_us"] / 1000,
                 rps=res["rps"], p50_ms=res["latency_us"]["p50"] / 1000,
                 p99_ms=res["latency_us"]["p99"] / 1000, max_ms=res["latency_us"]["max"] / 1000)
        what = (f"reload {'ok' if trig['ok'] else 'FAILED'} in {trig['seconds']:.2f}s" if kind == "reload"
                else f"capacity back in {trig['time_to_capacity_s']}s" if trig["ok"]
                else f"capacity NOT back: {trig.get('reason')}")
        log(f"  [{tag} round {rnd}] {name:10} failed {r['failed']:>5} "
            f"({_kinds(res['errors'])})  longest gap {r['longest_gap_ms']:.0f} ms  "
            f"p99 {r['p99_ms']:.1f} ms  {what}")
    except Exception as e:  # noqa: BLE001 - one stack's round failing must not stop the others
        r["error"] = f"{type(e).__name__}: {e}"
        log(f"  [{tag} round {rnd}] {name}: error: {r['error']}")
        if p is not None and p.poll() is None:  # the load of this round, if it is still running
            p.kill()
            p.wait()
        if p in benchlib.RUNNING:
            benchlib.RUNNING.remove(p)
    return r


def _kinds(errors):
    parts = [f"{k} {errors[k]}" for k in ("connect", "reset", "timeout", "other") if errors.get(k)]
    parts += [f"{code}: {n}" for code, n in sorted(errors.get("status", {}).items())]
    return ", ".join(parts) or "none"


def summarize(runs, kind, load_seconds):
    out = {}
    for name in dict.fromkeys(r["stack"] for r in runs):
        rs = [r for r in runs if r["stack"] == name and "error" not in r]
        errs = [r["error"] for r in runs if r["stack"] == name and "error" in r]
        row = {"rounds": len(rs), "errors": errs}
        if rs:
            row["failed_median"] = benchlib.median(r["failed"] for r in rs)
            row["failed_rounds"] = [r["failed"] for r in rs]
            row["failed_kinds"] = [_kinds(r["load"]["errors"]) for r in rs]
            row["gap_ms_median"] = benchlib.median(r["longest_gap_ms"] for r in rs)
            row["gap_ms_rounds"] = [round(r["longest_gap_ms"], 1) for r in rs]
            # A gap that starts once the load has stopped starting requests is the drain: requests stuck on the
            # server until the client's timeout. rein bench counts it; the report marks it.
            row["gap_in_drain_rounds"] = sum(1 for r in rs if r["load"]["longest_gap_start_s"] >= load_seconds - 0.01)
            row["p99_ms_median"] = benchlib.median(r["p99_ms"] for r in rs)
            row["rps_median"] = benchlib.median(r["rps"] for r in rs)
            if kind == "reload":
                row["reload_s_median"] = benchlib.median(r["trigger"]["seconds"] for r in rs)
                row["reload_ok"] = sum(1 for r in rs if r["trigger"]["ok"])
            else:
                row["ttc_s_median"] = benchlib.median(r["trigger"]["time_to_capacity_s"] for r in rs)
                row["ttc_s_rounds"] = [r["trigger"]["time_to_capacity_s"] for r in rs]
                row["recovered"] = sum(1 for r in rs if r["trigger"]["ok"])
        out[name] = row
    return out
