"""Markdown for bench/run-all's python scenario: its section of docs/benchmarks.md (`bench:run-all-python`),
with every stack's RPS, latency, CPU per request and memory, the ratios rein / Granian and rein / nginx + the
Python server, issue 27's target 2 and the at-a-glance rows; and its lines in the run-all summary table.

Everything here reads the results dict only, so `bench/run-all --render FILE.json` re-renders a past run.
"""

import os
import re

import benchlib
from benchlib import fmt_mb

from .cells import chart as _chart, ms as _ms, pt as _pt, ratio as _ratio, skips as _skips

BLOCK = "run-all-python"
TITLE = "Python application servers: rein vs Granian, uvicorn, gunicorn"
CHART = "python.png"
CASES = {"wsgi": ("rein WSGI", "Granian WSGI", "nginx + gunicorn"),
         "asgi": ("rein ASGI", "Granian ASGI", "nginx + uvicorn")}
# Issue 27, target 2: the figures rein's stack must reach against each peer.
PEER_RPS_TARGET = 1.5  # × nginx + gunicorn / uvicorn








def _scenario(result):
    sc = result["scenarios"].get("python")
    return sc if sc and sc.get("status") == "ok" else None


def summary_rows(result):
    """The run-all summary's lines: rein's RPS against Granian's and the nginx peer's, per case."""
    sc = _scenario(result)
    if not sc:
        return []
    rows = []
    c = result["args"]["vs_conns"][0]
    for case, (rein, *peers) in CASES.items():
        sm = sc["summary"].get(case, {})
        r = _pt(sm, rein, c)
        for peer in peers:
            p = _pt(sm, peer, c)
            if r.get("rps_median") and p.get("rps_median"):
                rows.append((f"Python {case.upper()}", f"RPS at c={c}", f"{r['rps_median']:,.0f}", peer,
                             f"{p['rps_median']:,.0f}", _ratio(r["rps_median"], p["rps_median"])))
            elif p.get("rps_median"):
                rows.append((f"Python {case.upper()}", f"RPS at c={c}", "skipped (see below)", peer,
                             f"{p['rps_median']:,.0f}", "–"))
    return rows


def _short(cmd):
    """A command as a reader would type it: the program without the venv's directory, and the run's own port and
    temporary directory as PORT and TMP."""
    prog, _, rest = cmd.partition(" ")
    rest = re.sub(r"--port \d+", "--port PORT", rest)
    rest = re.sub(r"/\S*/rein-run-all-[^/\s]+/python/", "TMP/", rest)
    return f"{os.path.basename(prog)} {rest}".strip()


def _case_table(result, sc):
    out = ["| case | stack | req/s | p99 | errors | CPU µs per request, whole stack (user + kernel) | PSS (RSS), "
           "processes | rein / this: req/s | p99 | CPU | PSS |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    c = result["args"]["vs_conns"][0]
    for case, labels in CASES.items():
        sm, mem = sc["summary"].get(case, {}), sc.get("memory", {}).get(case, {})
        rein = labels[0]
        r, rm = _pt(sm, rein, c), mem.get(rein, {})
        for s in [x for x in labels if x in sm] + [x for x in sm if x not in labels]:
            x = _pt(sm, s, c)
            if not x.get("rps_median"):
                out.append(f"| {case.upper()} | {s} | failed: {'; '.join(x.get('run_errors', []))[:200]} "
                           "| | | | | | | | |")
                continue
            m = mem.get(s, {})
            me = s == rein
            cpu = x.get("server_cpu_us_per_req_median")
            mr = x.get("median_round_cpu_us_per_req")
            split = f" ({mr['user']:.1f} + {mr['kernel']:.1f})" if mr else ""
            memtxt = (f"{fmt_mb(m['pss_kb'])} ({fmt_mb(m['rss_kb'])}), {m['processes']}" if m.get("pss_kb")
                      else "–")
            err = x["errors"]
            out.append(f"| {case.upper()} | {s} | {x['rps_median']:,.0f} | {_ms(x['p99_ms_median'])} | "
                       f"{err}{' ⚠' if err else ''} | {'–' if cpu is None else f'{cpu:.1f}'}{split} | {memtxt} | "
                       + " | ".join("–" if me else _ratio(a, b) for a, b in (
                           (r.get("rps_median"), x["rps_median"]), (r.get("p99_ms_median"), x["p99_ms_median"]),
                           (r.get("server_cpu_us_per_req_median"), cpu), (rm.get("pss_kb"), m.get("pss_kb"))))
                       + " |")
    return out




def doc_block(result):
    """The section (setup, one table, the chart, what it means) and its at-a-glance rows."""
    a, v = result["args"], result["versions"]
    sc = result["scenarios"]["python"]
    out = [f"## {TITLE}", ""]
    granian = next((cfg["command"] for cfg in sc.get("setup", {}).get("configs", {}).values()
                    if isinstance(cfg, dict) and cfg.get("command", "").split(" ")[0].endswith("granian")), None)
    out.append("The same WSGI and ASGI hello callables (`bench/apps/python`), 2 processes of 1 thread each in every "
               "stack: rein (`\"type\": \"python\"`, `\"processes\": 2, \"threads\": 1`), Granian facing the "
               "client itself as rein does"
               + (f" (`{_short(granian).replace('wsgi_hello:application', 'MODULE:application').replace('--interface wsgi', '--interface wsgi|asgi')}`)" if granian else "")
               + ", and gunicorn (sync workers) or uvicorn behind nginx over a Unix socket, as they are deployed. "
               f"`wrk -t{a['threads']} -c N -d {a['duration']}s --latency` against each stack in turn, medians of "
               f"{a['rounds']} rounds; every stack runs "
               + (f"{v['python'].split(' (')[0]}" if v.get("python") else "the same python3")
               + " from the same venv. CPU per request is every process of the stack's (never wrk's); memory is "
               "each stack's PSS summed over its processes, measured alone after a run (beside the others, shared "
               "pages of python3 would be split among more processes).")
    out += ["", benchlib.provenance(result, "bench/run-all --only python"), ""]
    out += _case_table(result, sc)
    out.append("")
    image = _chart(result, CHART)
    if image:
        out += [image, ""]
    out.append(_meaning(result, sc))
    out += _skips(sc)
    return "\n".join(out), _glance(result, sc)


def _meaning(result, sc):
    c = result["args"]["vs_conns"][0]
    parts = []
    for case, (rein, granian, peer) in CASES.items():
        rt = sc.get("ratios", {}).get(case, {}).get(str(c), {})
        g, p = rt.get(granian, {}), rt.get(peer, {})
        if not g:
            continue
        checks = [("RPS ≥ Granian's", g.get("rps"), lambda x: x >= 1),
                  ("p99 below Granian's", g.get("p99"), lambda x: x < 1),
                  (f"RPS ≥ {PEER_RPS_TARGET} × {peer}'s", p.get("rps"), lambda x: x >= PEER_RPS_TARGET),
                  ("PSS ≤ Granian's", g.get("pss"), lambda x: x <= 1)]
        met = [name for name, x, ok in checks if x is not None and ok(x)]
        missed = [name for name, x, ok in checks if x is not None and not ok(x)]
        parts.append(f"{case.upper()}: rein serves {_ratio(g.get('rps'), 1)} × Granian's requests per second at "
                     f"{_ratio(g.get('cpu_per_req'), 1)} × its CPU per request, with {_ratio(g.get('p99'), 1)} × its p99 and "
                     f"{_ratio(g.get('pss'), 1)} × its memory; {_ratio(p.get('rps'), 1)} × {peer}'s rate. Of issue "
                     f"27's target 2, " + (f"met: {', '.join(met)}; " if met else "")
                     + (f"missed: {', '.join(missed)}." if missed else "all met."))
    return " ".join(parts)


def _glance(result, sc):
    c = result["args"]["vs_conns"][0]
    rows = []
    for case, (rein, granian, _peer) in CASES.items():
        sm = sc["summary"].get(case, {})
        r, g = _pt(sm, rein, c), _pt(sm, granian, c)
        if not (r.get("rps_median") and g.get("rps_median")):
            continue
        rc, gc = r.get("server_cpu_us_per_req_median"), g.get("server_cpu_us_per_req_median")
        cpu = f"{rc:.1f} / {gc:.1f} µs ({_ratio(rc, gc)}), whole stack" if rc and gc else "–"
        rows.append(benchlib.glance_row((f"Python {case.upper()} hello", TITLE), f"req/s, c={c}",
                                        f"{r['rps_median']:,.0f}", f"Granian {g['rps_median']:,.0f}",
                                        _ratio(r["rps_median"], g["rps_median"]), cpu, benchlib.run_label(result)))
    return rows
