"""Markdown for bench/run-all's rackpsgi scenario: its section of docs/benchmarks.md (`bench:run-all-rackpsgi`),
with each stack's RPS, latency, CPU per request, memory and failed requests through a reload and a kill -9, the
ratios rein / the nginx-fronted server, issue 28's target and the at-a-glance rows; and its lines in the run-all
summary table.

Everything here reads the results dict only, so `bench/run-all --render FILE.json` re-renders a past run.
"""

import os
import re

import benchlib
from benchlib import fmt_mb

from .cells import drain as _drain, ms as _ms, num as _num, pt as _pt, ratio as _ratio, skips as _skips

BLOCK = "run-all-rackpsgi"
SCENARIO = "rackpsgi"
TITLE = "Ruby and Perl application servers: rein vs nginx + Puma, nginx + Starman"
CASES = {"rack": ("rein Ruby", "nginx + Puma"), "psgi": ("rein Perl", "nginx + Starman")}
NAMES = {"rack": "Rack", "psgi": "PSGI"}
# A † row: rein bench's longest gap was the end of the load, not the reload's or the crash's.
DRAIN_NOTE = ("† in at least one round the longest gap began only once the load had stopped starting requests: it "
              "is how long the requests still queued on the server took to drain (when they outlived rein bench's "
              "10 s timeout, they count as timeouts), not an outage seen by new requests.")
# Issue 28's target: against the nginx-fronted server on the same app and processes.
RPS_TARGET = 1.2


def _command(setup, stack, default):
    """The peer's command as a reader would type it: the program without its directory, the run's sockets as
    SOCK and CONTROL, the control token as TOKEN."""
    cmd = ((setup.get("configs") or {}).get(stack) or {}).get("app")
    if not cmd:
        return default
    prog, _, rest = cmd.partition(" ")
    rest = re.sub(r"unix://\S*-control\.sock", "unix://CONTROL", rest)
    rest = re.sub(r"(unix://)?/\S*\.sock", lambda m: (m.group(1) or "") + "SOCK", rest)
    rest = re.sub(r"--control-token \S+", "--control-token TOKEN", rest)
    return f"{os.path.basename(prog)} {rest}".strip()


def _scenario(result):
    sc = result["scenarios"].get(SCENARIO)
    return sc if sc and sc.get("status") == "ok" else None


def _res(sc, kind, case, stack):
    return ((sc.get("resilience_summary") or {}).get(kind) or {}).get(case, {}).get(stack, {})


def summary_rows(result):
    """The run-all summary's lines: rein's RPS and its failed requests on reload and kill -9 against the peer's."""
    sc = _scenario(result)
    if not sc:
        return []
    rows = []
    c = result["args"]["vs_conns"][0]
    for case, (rein, peer) in CASES.items():
        sm = sc["summary"].get(case, {})
        r, p = _pt(sm, rein, c), _pt(sm, peer, c)
        if p.get("rps_median"):
            rows.append((NAMES[case], f"RPS at c={c}",
                         f"{r['rps_median']:,.0f}" if r.get("rps_median") else "skipped (see below)", peer,
                         f"{p['rps_median']:,.0f}", _ratio(r.get("rps_median"), p["rps_median"])))
        for kind in ("reload", "crash"):
            rr, pr = _res(sc, kind, case, rein), _res(sc, kind, case, peer)
            if "failed_median" in pr:
                rows.append((f"{NAMES[case]} {kind}", "failed requests",
                             _num(rr.get("failed_median")) if "failed_median" in rr else "skipped (see below)",
                             peer, _num(pr["failed_median"]), "–"))
    return rows


def _resilience_cells(sc, case, stack):
    rl, cr = _res(sc, "reload", case, stack), _res(sc, "crash", case, stack)
    out = []
    if "failed_median" in rl:
        ok = "" if rl.get("reload_ok") == rl.get("rounds") else " (reload failed)"
        out.append(f"{rl['failed_median']:,.0f}; {rl['gap_ms_median']:.0f} ms{_drain(rl)}; "
                   f"{rl['reload_s_median']:.2f} s{ok}")
    else:
        out.append("; ".join(rl.get("errors") or [])[:160] or "–")
    if "failed_median" in cr:
        out.append(f"{cr['failed_median']:,.0f}; {cr['gap_ms_median']:.0f} ms{_drain(cr)}; "
                   f"{_num(cr.get('ttc_s_median'), '{:.2f} s')}")
    else:
        out.append("; ".join(cr.get("errors") or [])[:160] or "–")
    return out


def _case_table(result, sc):
    out = ["| case | stack | req/s | p99 | errors | CPU µs per request, whole stack (user + kernel) | PSS (RSS), "
           "processes | reload: failed; longest gap; took | kill -9: failed; longest gap; capacity back | "
           "rein / this: req/s | p99 | CPU | PSS |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    c = result["args"]["vs_conns"][0]
    for case, labels in CASES.items():
        sm, mem = sc["summary"].get(case, {}), sc.get("memory", {}).get(case, {})
        rein = labels[0]
        r, rm = _pt(sm, rein, c), mem.get(rein, {})
        for s in [x for x in labels if x in sm] + [x for x in sm if x not in labels]:
            x = _pt(sm, s, c)
            if not x.get("rps_median"):
                out.append(f"| {NAMES[case]} | {s} | failed: {'; '.join(x.get('run_errors', []))[:200]} "
                           "| | | | | | | | | | |")
                continue
            m = mem.get(s, {})
            me = s == rein
            cpu = x.get("server_cpu_us_per_req_median")
            mr = x.get("median_round_cpu_us_per_req")
            split = f" ({mr['user']:.1f} + {mr['kernel']:.1f})" if mr else ""
            memtxt = (f"{fmt_mb(m['pss_kb'])} ({fmt_mb(m['rss_kb'])}), {m['processes']}" if m.get("pss_kb")
                      else "–")
            err = x["errors"]
            out.append(f"| {NAMES[case]} | {s} | {x['rps_median']:,.0f} | {_ms(x['p99_ms_median'])} | "
                       f"{err}{' ⚠' if err else ''} | {'–' if cpu is None else f'{cpu:.1f}'}{split} | {memtxt} | "
                       + " | ".join(_resilience_cells(sc, case, s)) + " | "
                       + " | ".join("–" if me else _ratio(a, b) for a, b in (
                           (r.get("rps_median"), x["rps_median"]), (r.get("p99_ms_median"), x["p99_ms_median"]),
                           (r.get("server_cpu_us_per_req_median"), cpu), (rm.get("pss_kb"), m.get("pss_kb"))))
                       + " |")
    return out


def doc_block(result):
    """The section (setup, one table, what it means) and its at-a-glance rows."""
    a, v = result["args"], result["versions"]
    sc = result["scenarios"][SCENARIO]
    st = sc.get("setup", {})
    rs = st.get("resilience", {})
    out = [f"## {TITLE}", ""]
    out.append(
        "The same Rack and PSGI hellos (`bench/apps/ruby/config.ru`, `bench/apps/perl/app.psgi`), 2 processes of 1 "
        "thread each in every stack: rein (`\"type\": \"ruby\"` or `\"perl\"`, `\"script\"`, `\"processes\": 2, "
        "\"threads\": 1`) facing the client, and the server each replaces behind nginx over a Unix socket, as "
        f"they are deployed: Puma in cluster mode (`{_command(st, 'nginx + Puma', 'puma -w 2 -t 1:1')}`) and "
        f"Starman (`{_command(st, 'nginx + Starman', 'starman --workers 2')}`; `--disable-keepalive` because a "
        "Starman worker holds one connection at a time, so nginx's pool of kept-alive connections would leave "
        "requests waiting behind idle ones, the case its documentation gives the flag for; `--max-requests` "
        "because by default it replaces each worker after 1,000 requests, several times a second here, which "
        "neither rein nor Puma does). "
        f"`wrk -t{a['threads']} -c N -d {a['duration']}s --latency` against each stack in turn, medians of "
        f"{a['rounds']} round{'s' if a['rounds'] != 1 else ''}; CPU per request is every process of the stack's "
        "(never wrk's); memory is each stack's PSS summed over its processes, measured with the stack started "
        "again alone, after a run. On that same lone stack, under "
        f"`rein bench http -c {rs.get('connections', 100)} -d {rs.get('load_seconds', '?')}` "
        f"(a reload or a crash at {rs.get('trigger_at_s', '?')} s; medians of the rounds): a reload — rein's "
        "rolling restart (`GET /control/applications/NAME/restart`), Puma's phased restart (SIGUSR1 to its "
        "master; done when its control server reports every worker booted in the new phase), Starman's graceful "
        "restart (SIGHUP to its master; done when none of the old workers is left) — and a `kill -9` of the "
        "oldest worker or instance, each stack's own view then polled until both are up again. A failed request "
        "is one that got no 2xx. "
        + "; ".join(f"{x}" for x in (v.get("ruby"), v.get("rack"), v.get("puma"),
                                      v.get("perl"), v.get("plack"), v.get("starman")) if x) + ".")
    out += ["", benchlib.provenance(result, "bench/run-all --only rackpsgi"), ""]
    out += _case_table(result, sc)
    out.append("")
    drained = [x for by in (sc.get("resilience_summary") or {}).values() for stacks in by.values()
               for x in stacks.values() if x.get("gap_in_drain_rounds")]
    if drained:
        out += [DRAIN_NOTE, ""]
    out.append(_meaning(result, sc))
    out += _skips(sc)
    return "\n".join(out), _glance(result, sc)


def _meaning(result, sc):
    c = result["args"]["vs_conns"][0]
    parts = []
    for case, (rein, peer) in CASES.items():
        rt = sc.get("ratios", {}).get(case, {}).get(str(c), {})
        if not rt:
            parts.append(f"{NAMES[case]}: rein's stack did not run (see below), so issue 28's target is not "
                         "judged.")
            continue
        failed = {kind: _res(sc, kind, case, rein).get("failed_median") for kind in ("reload", "crash")}
        peer_failed = {kind: _res(sc, kind, case, peer).get("failed_median") for kind in ("reload", "crash")}
        checks = [(f"RPS ≥ {RPS_TARGET} × {peer}'s", rt.get("rps"), lambda x: x >= RPS_TARGET),
                  (f"p99 below {peer}'s", rt.get("p99"), lambda x: x < 1),
                  ("0 failed requests on reload", failed["reload"], lambda x: x == 0),
                  ("0 failed requests on kill -9", failed["crash"], lambda x: x == 0)]
        met = [name for name, x, ok in checks if x is not None and ok(x)]
        missed = [name for name, x, ok in checks if x is not None and not ok(x)]
        unknown = [name for name, x, _ in checks if x is None]
        parts.append(f"{NAMES[case]}: rein serves {_ratio(rt.get('rps'), 1)} × {peer}'s requests per second at "
                     f"{_ratio(rt.get('cpu_per_req'), 1)} × its CPU per request, with {_ratio(rt.get('p99'), 1)} × "
                     f"its p99 and {_ratio(rt.get('pss'), 1)} × its memory; it failed {_num(failed['reload'])} "
                     f"requests through a reload and {_num(failed['crash'])} through a `kill -9` ({peer}: "
                     f"{_num(peer_failed['reload'])} and {_num(peer_failed['crash'])}). Of issue 28's target "
                     f"(≥ {RPS_TARGET} × the nginx-fronted stack's RPS, a lower p99, 0 failed requests on reload "
                     "and crash), " + (f"met: {', '.join(met)}; " if met else "")
                     + (f"missed: {', '.join(missed)}" if missed else "nothing missed")
                     + (f"; not measured: {', '.join(unknown)}" if unknown else "") + ".")
    return " ".join(parts)


def _glance(result, sc):
    c = result["args"]["vs_conns"][0]
    rows = []
    for case, (rein, peer) in CASES.items():
        sm = sc["summary"].get(case, {})
        r, p = _pt(sm, rein, c), _pt(sm, peer, c)
        if not (r.get("rps_median") and p.get("rps_median")):
            continue
        rc, pc = r.get("server_cpu_us_per_req_median"), p.get("server_cpu_us_per_req_median")
        cpu = f"{rc:.1f} / {pc:.1f} µs ({_ratio(rc, pc)}), whole stack" if rc and pc else "–"
        rows.append(benchlib.glance_row((f"{NAMES[case]} hello", TITLE), f"req/s, c={c}",
                                        f"{r['rps_median']:,.0f}", f"{peer} {p['rps_median']:,.0f}",
                                        _ratio(r["rps_median"], p["rps_median"]), cpu, benchlib.run_label(result)))
    return rows
