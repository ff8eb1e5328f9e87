"""Markdown for bench/run-all's python scenario: its own block of docs/benchmarks.md (`bench:run-all-python`),
with every stack's RPS, latency, CPU per request and memory, the ratios rein / Granian and rein / nginx + the
Python server, and issue 27's targets; and its lines in the run-all summary table.

Everything here reads the results dict only, so `bench/run-all --render FILE.json` re-renders a past run.
"""

import os
import re

from benchlib import fmt_mb, fmt_ms

BLOCK = "run-all-python"
TITLE = "Python application servers: rein vs Granian, uvicorn, gunicorn"
ANCHOR = "python-application-servers-rein-vs-granian-uvicorn-gunicorn"
CHART = "python.png"
CASES = {"wsgi": ("rein WSGI", "Granian WSGI", "nginx + gunicorn"),
         "asgi": ("rein ASGI", "Granian ASGI", "nginx + uvicorn")}
# Issue 27, target 2: the figures rein's stack must reach against each peer.
PEER_RPS_TARGET = 1.5  # × nginx + gunicorn / uvicorn


def _ratio(a, b):
    return "–" if a is None or not b else f"{a / b:.2f}"


def _ms(x):
    return "–" if x is None else fmt_ms(x)


def _us(x):
    return "–" if x is None else f"{x:.1f} µs"


def _pt(summary, stack, point):
    return (summary.get(stack) or {}).get(str(point)) or {}


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


def run_all_pointer():
    """What the run-all block says in place of the Python tables, which are in their own block."""
    return [f"**Python**: rein's WSGI and ASGI apps against Granian, nginx + gunicorn and nginx + uvicorn are in "
            f"[their own section](#{ANCHOR}), written by the same run."]


def _stacks_table(sc):
    cfg = sc.get("setup", {}).get("configs", {})
    out = ["| stack | how |", "|---|---|"]
    for case, labels in CASES.items():
        for label in labels:
            c = cfg.get(label)
            if not c:
                continue
            if label.startswith("rein"):
                app = next(iter(c.get("applications", {}).values()), {})
                how = (f"`\"processes\": {app.get('processes')}, \"threads\": {app.get('threads')}`"
                       + (", `\"protocol\": \"asgi\"`" if app.get("protocol") == "asgi" else "")
                       + ", `home` = bench/.venv; a TCP listener passing to the app (rein ↔ app: FastCGI over a "
                         "Unix socket)")
            elif label.startswith("Granian"):
                how = f"`{_short(c['command'])}`, on its own TCP port (no proxy in front)"
            else:
                how = f"nginx (Unix socket upstream, keepalive 64) → `{_short(c['app'])}`"
            out.append(f"| {label} | {how} |")
    return out


def _short(cmd):
    """A command as a reader would type it: the program without the venv's directory, and the run's own port and
    temporary directory as PORT and TMP."""
    prog, _, rest = cmd.partition(" ")
    rest = re.sub(r"--port \d+", "--port PORT", rest)
    rest = re.sub(r"/\S*/rein-run-all-[^/\s]+/python/", "TMP/", rest)
    return f"{os.path.basename(prog)} {rest}".strip()


def _targets(result, sc):
    """Issue 27's target 2, point by point: met (✓) or not (✗)."""
    out = ["| case | connections | RPS rein / Granian (≥ 1) | p99 rein / Granian (< 1) | "
           f"RPS rein / nginx + server (≥ {PEER_RPS_TARGET}) | PSS rein / Granian (≤ 1) |",
           "|---|---:|---:|---:|---:|---:|"]

    def mark(x, ok):
        return "–" if x is None else f"{x:.2f} {'✓' if ok(x) else '✗'}"

    for case, (rein, granian, peer) in CASES.items():
        for c in result["args"]["vs_conns"]:
            rt = sc.get("ratios", {}).get(case, {}).get(str(c), {})
            g, p = rt.get(granian, {}), rt.get(peer, {})
            if not g and not p:
                continue
            out.append(f"| {case.upper()} | {c} | {mark(g.get('rps'), lambda x: x >= 1)} | "
                       f"{mark(g.get('p99'), lambda x: x < 1)} | "
                       f"{mark(p.get('rps'), lambda x: x >= PEER_RPS_TARGET)} ({peer}) | "
                       f"{mark(g.get('pss'), lambda x: x <= 1)} |")
    return out if len(out) > 2 else []


def _case_table(result, sc, case):
    sm, mem = sc["summary"].get(case, {}), sc.get("memory", {}).get(case, {})
    rein = CASES[case][0]
    out = ["| connections | server | RPS | p50 | p99 | errors | CPU per request: user + kernel | memory, alone "
           "after a run: PSS (RSS), processes | rein/this RPS | rein/this p99 | rein/this CPU per request | "
           "rein/this PSS | RPS per round |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in result["args"]["vs_conns"]:
        r = _pt(sm, rein, c)
        rm = mem.get(rein, {})
        for s in [x for x in CASES[case] if x in sm] + [x for x in sm if x not in CASES[case]]:
            x = _pt(sm, s, c)
            if not x:
                continue
            if not x.get("rps_median"):
                out.append(f"| {c} | {s} | failed | | | | | | | | | | {'; '.join(x.get('run_errors', []))[:200]} |")
                continue
            m = mem.get(s, {})
            me = s == rein
            cpu = x.get("server_cpu_us_per_req_median")
            mr = x.get("median_round_cpu_us_per_req")
            split = f" ({mr['user']:.1f} + {mr['kernel']:.1f})" if mr else ""
            memtxt = (f"{fmt_mb(m['pss_kb'])} ({fmt_mb(m['rss_kb'])}), {m['processes']}" if m.get("pss_kb")
                      else "–")
            err = x["errors"]
            out.append(f"| {c} | {s} | {x['rps_median']:,.0f} | {_ms(x['p50_ms_median'])} | "
                       f"{_ms(x['p99_ms_median'])} | {err}{' ⚠' if err else ''} | {_us(cpu)}{split} | {memtxt} | "
                       + " | ".join("–" if me else _ratio(a, b) for a, b in (
                           (r.get("rps_median"), x["rps_median"]), (r.get("p99_ms_median"), x["p99_ms_median"]),
                           (r.get("server_cpu_us_per_req_median"), cpu), (rm.get("pss_kb"), m.get("pss_kb"))))
                       + f" | {', '.join(f'{v:,}' for v in x['rps_rounds'])} |")
    return out


def _programs(sc):
    """Which programs each stack's processes ran, as read from /proc/PID/exe after the runs."""
    seen = {}
    for case in CASES:
        for label, m in sc.get("memory", {}).get(case, {}).items():
            seen[label] = ", ".join(f"{n} × `{p}`" for p, n in m.get("programs", {}).items())
    return [f"- {label}: {progs}" for label, progs in seen.items() if progs]


def _skips(sc):
    out = [f"- *{x['stack']} skipped:* {x['reason']}" for x in sc.get("skipped", [])]
    out += [f"- *{x['stack']} failed to start:* {x['error'][:400]}" for x in sc.get("failed_stacks", [])]
    return [""] + out if out else []


def doc_block(result):
    m, v, a = result["machine"], result["versions"], result["args"]
    sc = result["scenarios"].get("python") or {}
    out = [f"## {TITLE}", ""]
    if a.get("quick"):
        out.append("> **Quick mode** (`--quick`): a smoke test of the suite, not figures to quote.\n")
    took = f"; the scenario took {sc['elapsed_s'] / 60:.1f} min" if sc.get("elapsed_s") else ""
    out.append(f"- **Date:** {result['date']}")
    out.append(f"- **Command:** `{result['command']}` (from the repository root){took}")
    out.append(f"- **Machine:** {m['nproc']} CPUs ({m['cpu_model']}), {m['ram_gib']} GiB RAM, Linux {m['kernel']}; "
               "load generator and servers share the same CPUs")
    out.append("- **Versions:** " + "; ".join(v[k] for k in ("rein", "granian", "gunicorn", "uvicorn", "nginx", "wrk")
                                              if v.get(k)))
    if v.get("python"):
        out.append(f"- **Python:** {v['python']}, bench/.venv's interpreter, for every stack (rein's apps through "
                   "`home`; Granian, gunicorn and uvicorn installed in it from PyPI)")
    out.append(f"- **Rounds:** medians of {a['rounds']} round{'s' if a['rounds'] != 1 else ''}, "
               f"`wrk -t{a['threads']} -c N -d {a['duration']}s --latency` against each stack in turn (A B C, then "
               "C B A, ...)")
    out.append(f"- **Raw results:** `{os.path.relpath(result['json_path'], result['repo'])}` (every run, configs, "
               "tool output)")
    out.append("")
    if sc.get("status") != "ok":
        out.append(f"Not measured: {sc.get('status', 'not run')}: {sc.get('error') or sc.get('reason') or ''}")
        return "\n".join(out)
    out.append("The same WSGI and ASGI hello callables (`bench/apps/python`), 2 processes of 1 thread each in every "
               "stack. Granian faces the client itself, as rein does; gunicorn and uvicorn sit behind nginx, as they "
               "are deployed.\n")
    out += _stacks_table(sc)
    out.append("")
    targets = _targets(result, sc)
    if targets:
        out.append("**Issue 27's target 2** (✓ met, ✗ not):\n")
        out += targets
        out.append("")
    for case in CASES:
        if sc["summary"].get(case):
            out.append(f"**{case.upper()}** (ratios: rein / that row):\n")
            out += _case_table(result, sc, case)
            out.append("")
    chart = next((c for c in result.get("charts") or [] if os.path.basename(c["path"]) == CHART), None)
    if chart:
        out.append(f"![{chart['title']}](bench/{CHART})")
        out.append("")
    out.append("CPU per request is the whole stack's, user + kernel time of every process in it (rein and its app "
               "processes; Granian's main process and workers; nginx's master and workers with the Python server's "
               "master and workers), divided by the requests wrk completed (the user + kernel split shown is the "
               "median round's); wrk's own CPU is not in it. Memory: after each case's rounds, each stack is started "
               "again on its own, serves one run of the same load, and its PSS and RSS are summed over its "
               "processes. Alone, because PSS splits a shared page among every process mapping it, the python3 "
               "binary's and libraries' among the other stacks' Python processes too: beside them each stack would "
               "look smaller the more Python processes the others run (the JSON keeps that reading too, "
               "`memory_shared`). "
               + _own(sc) + "What each stack's processes run (from `/proc/PID/exe`):\n")
    out += _programs(sc)
    out += _skips(sc)
    return "\n".join(out)


def _own(sc):
    parts = []
    for case, (rein, *_) in CASES.items():
        m = sc.get("memory", {}).get(case, {}).get(rein, {})
        if m.get("own_pss_kb"):
            parts.append(f"{fmt_mb(m['own_pss_kb'])} PSS in {rein}")
    return f"rein's own process, within its stack's figure: {'; '.join(parts)}. " if parts else ""
