"""Markdown for bench/run-all's results: the summary table printed on stdout, and the sections of
docs/benchmarks.md, one block per scenario (or pair of scenarios) with its at-a-glance rows. The python scenario's
section is in pyreport, the rackpsgi scenario's in rpreport.

Everything here reads the results dict only, so `bench/run-all --render FILE.json ...` re-renders past runs, each
section from the latest file that holds its scenarios.
"""

import benchlib
from benchlib import fmt_mb

from . import pyreport, rpreport
from .cells import DRAIN_NOTE, chart as _chart, drain as _drain, ms as _ms, num as _num, pt as _pt, \
    ratio as _ratio, skips as _skips

LABEL = {"rein": "rein", "rein-handoff": "rein, handoff", "pm2": "PM2 cluster", "nginx": "nginx → 2 node", "nginx-mf0": "nginx → 2 node, max_fails=0",
         "passenger": "Passenger + Apache"}
NODE_PEERS = ("pm2", "nginx", "nginx-mf0", "passenger")
# rein's Node.js stacks: proxying to its instances, and handing them the client connections (`"handoff": true`).
REIN_NODE = ("rein", "rein-handoff")


def _l(name):
    return LABEL.get(name, name)








def _rounds(result):
    n = result["args"]["rounds"]
    return f"{n} round{'s' if n != 1 else ''}"


def _why(sc):
    if not sc:
        return "not run"
    return f"{sc['status']}: {sc.get('error') or sc.get('reason') or ''}"


def _sc(result, name):
    s = result["scenarios"].get(name)
    return s if s and s.get("status") == "ok" else None




# --------------------------------------------------------------------------------------------- summary


def summary_rows(result):
    """[(scenario, figure, rein, peer, peer figure, ratio)] — one line per comparison that ran."""
    rows = []
    for kind in ("reload", "crash"):
        sc = _sc(result, kind)
        if not sc:
            continue
        sm = sc["summary"]
        r = sm.get("rein", {})
        for peer in NODE_PEERS:
            p = sm.get(peer)
            if not p or "failed_median" not in p or "failed_median" not in r:
                continue
            if kind == "reload":
                fig = "failed requests; longest gap"
                rv = f"{r['failed_median']:.0f}; {r['gap_ms_median']:.0f} ms{_drain(r)}"
                pv = f"{p['failed_median']:.0f}; {p['gap_ms_median']:.0f} ms{_drain(p)}"
                ratio = _ratio(r["gap_ms_median"], p["gap_ms_median"])
            else:
                fig = "failed requests; time to capacity"
                rv = f"{r['failed_median']:.0f}; {_num(r.get('ttc_s_median'), '{:.2f} s')}"
                pv = f"{p['failed_median']:.0f}; {_num(p.get('ttc_s_median'), '{:.2f} s')}"
                ratio = _ratio(r.get("ttc_s_median"), p.get("ttc_s_median"))
            rows.append((kind, fig, rv, _l(peer), pv, ratio))
    sc = _sc(result, "node")
    if sc:
        c = 100 if "100" in sc["summary"].get("rein", {}) else (sc["setup"]["conns"] or [None])[-1]
        r = _pt(sc["summary"], "rein", c)
        for peer in NODE_PEERS:
            p = _pt(sc["summary"], peer, c)
            if r.get("rps_median") and p.get("rps_median"):
                rows.append(("node JSON hello", f"RPS at c={c} (wrk)", _num(r["rps_median"]), _l(peer),
                             _num(p["rps_median"]), _ratio(r["rps_median"], p["rps_median"])))
                rows.append(("node JSON hello", f"p99 at c={c} (wrk)", _ms(r["p99_ms_median"]), _l(peer),
                             _ms(p["p99_ms_median"]), _ratio(r["p99_ms_median"], p["p99_ms_median"])))
        ab = sc.get("ab_summary", {})
        for peer in NODE_PEERS:
            if ab.get("rein", {}).get("rps_median") and ab.get(peer, {}).get("rps_median"):
                rows.append(("node JSON hello", "RPS, ab -n 10000 -c 100 -k", _num(ab["rein"]["rps_median"]),
                             _l(peer), _num(ab[peer]["rps_median"]),
                             _ratio(ab["rein"]["rps_median"], ab[peer]["rps_median"])))
    sc = _sc(result, "memory")
    if sc:
        r = sc["summary"].get("rein", {})
        for peer in NODE_PEERS:
            p = sc["summary"].get(peer, {})
            if r.get("load_rss_kb_median") and p.get("load_rss_kb_median"):
                rows.append(("memory", "RSS of the whole stack under c=100", fmt_mb(r["load_rss_kb_median"]),
                             _l(peer), fmt_mb(p["load_rss_kb_median"]),
                             _ratio(r["load_rss_kb_median"], p["load_rss_kb_median"])))
    for name, label in (("static", "static 1 KB file"), ("proxy", "reverse proxy"), ("lb", "load balancer, 3 backends")):
        sc = _sc(result, name)
        if not sc:
            continue
        for c in result["args"]["vs_conns"]:
            r, p = _pt(sc["summary"], "rein", c), _pt(sc["summary"], "nginx", c)
            if r.get("rps_median") and p.get("rps_median"):
                rows.append((label, f"RPS at c={c}", _num(r["rps_median"]), "nginx", _num(p["rps_median"]),
                             _ratio(r["rps_median"], p["rps_median"])))
    sc = _sc(result, "php")
    if sc:
        c = result["args"]["vs_conns"][0]
        for page in ("hello", "phpinfo"):
            sm = sc["summary"].get(page, {})
            peers = {k: _pt(sm, f"nginx → FPM {k}", c).get("rps_median") for k in ("unix", "tcp")}
            measured = False
            for kind in ("unix", "tcp"):
                for rein in ("rein (own FPM)", f"rein → FPM {kind}"):
                    r = _pt(sm, rein, c)
                    if r.get("rps_median") and peers[kind]:
                        measured = True
                        rows.append((f"PHP {page}", f"RPS at c={c}", f"{_num(r['rps_median'])} ({rein})",
                                     f"nginx → FPM {kind}", _num(peers[kind]), _ratio(r["rps_median"], peers[kind])))
            if not measured and any(peers.values()):
                rows.append((f"PHP {page}", f"RPS at c={c}", "skipped (see below)", "nginx → FPM unix; tcp",
                             f"{_num(peers['unix'])}; {_num(peers['tcp'])}", "–"))
    rows += pyreport.summary_rows(result)
    rows += rpreport.summary_rows(result)
    sc = _sc(result, "socket")
    if sc:
        c = result["args"]["vs_conns"][0]
        for who in ("rein", "nginx"):
            u, t = _pt(sc["summary"], f"{who}, unix", c), _pt(sc["summary"], f"{who}, tcp", c)
            if u.get("rps_median") and t.get("rps_median"):
                rows.append(("unix vs tcp (node)", f"{who}: RPS unix; tcp", _num(u["rps_median"]), f"{who} tcp",
                             _num(t["rps_median"]), _ratio(u["rps_median"], t["rps_median"]) + " (unix/tcp)"))
    return rows


def _skipped(sc, stack):
    return any(x["stack"] == stack for x in sc.get("skipped", []) + sc.get("failed_stacks", []))


def summary_table(result):
    rows = summary_rows(result)
    out = ["| scenario | figure | rein | peer | peer's figure | rein / peer |", "|---|---|---:|---|---:|---:|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    if any("†" in x for r in rows for x in r):
        out += ["", DRAIN_NOTE]
    st = [f"{n}: {s['status']}" + (f" ({s.get('error', '')[:120]})" if s["status"] == "failed" else "")
          + (f" ({s.get('reason', '')[:160]})" if s["status"] == "skipped" else "")
          for n, s in result["scenarios"].items()]
    out.append("")
    out.append("Scenarios: " + "; ".join(st) + ".")
    skips = skipped_lines(result)
    if skips:
        out.append("")
        out.append("Skipped or failed stacks:")
        out.append("")
        out += [f"- {x}" for x in skips]
    return "\n".join(out)


def skipped_lines(result):
    out = []
    for n, s in result["scenarios"].items():
        for x in s.get("skipped", []):
            out.append(f"{n}: {x['stack']} skipped: {x['reason']}")
        for x in s.get("failed_stacks", []):
            out.append(f"{n}: {x['stack']} failed to start: {x['error'][:300]}")
        if s["status"] == "failed":
            out.append(f"{n}: scenario failed: {s.get('error', '')[:400]}")
        if s["status"] == "skipped":
            out.append(f"{n}: scenario skipped: {s.get('reason', '')[:400]}")
    for name, p in result.get("peers", {}).items():
        if not p.get("available") and p.get("reason"):
            out.append(f"peer {name}: {p['reason']}")
    return out


# --------------------------------------------------------------------------------------------- sections

NODE_TARGET = 0.95  # issue 27, target 3: rein in front of 2 instances >= 0.95 x PM2's cluster of 2


def _setup_line(result, text, command):
    return [text, "", benchlib.provenance(result, command), ""]


def _stack_cpu(x):
    """Whole-stack CPU µs per request, with the proxy hop's user + kernel where the stack has one."""
    whole = x.get("server_cpu_us_per_req_median")
    if whole is None:
        return "–"
    if "proxy_user_us_per_req_median" in x:
        return (f"{whole:.1f} (hop {x['proxy_user_us_per_req_median']:.1f} + "
                f"{x['proxy_kernel_us_per_req_median']:.1f})")
    return f"{whole:.1f}"


def _err(x):
    return f"{x['errors']:,} ⚠" if x.get("errors") else "0"


NODE_TITLE = "Node.js JSON hello: rein vs PM2, nginx, Passenger"


def node_section(result):
    sc = _sc(result, "node")
    st = sc["setup"]
    out = [f"## {NODE_TITLE}", ""]
    out += _setup_line(result, (
        "The same app (`bench/apps/node/hello.js`: `http.createServer` answering `{\"hello\":\"world\"}`), 2 "
        "instances in every stack: rein (an `external` app with `\"processes\": 2`, reached over Unix sockets), "
        "PM2's cluster mode, nginx in front of 2 instances (upstream keepalive 64, HTTP/1.1), and Apache with "
        f"Passenger. `{st['wrk_command']}` against each stack in turn, medians of {_rounds(result)}; the load "
        f"generator and every stack share the same {result['machine']['nproc']} CPUs."), "bench/run-all --only node")
    stacks = [s for s in REIN_NODE + NODE_PEERS if s in sc["summary"]]
    peers = [s for s in stacks if s not in REIN_NODE]
    out.append("| connections | " + " | ".join(f"req/s {_l(s)}" for s in stacks) + " | "
               + " | ".join(f"rein / {_l(s)}" for s in peers[:2]) + " |")
    out.append("|---:|" + "---:|" * (len(stacks) + len(peers[:2])))
    for c in st["conns"]:
        pts = [_pt(sc["summary"], s, c) for s in stacks]
        cells = [(_num(x.get("rps_median")) + (" ⚠" if x.get("errors") else "")) for x in pts]
        r = pts[0]
        ratios = [_ratio(r.get("rps_median"), _pt(sc["summary"], s, c).get("rps_median")) for s in peers[:2]]
        out.append(f"| {c:,} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    out.append("")
    c = 100 if 100 in st["conns"] else st["conns"][-1]
    r = _pt(sc["summary"], "rein", c)
    out.append(f"At {c} connections (⚠: a point with errors, failed whatever its speed):\n")
    out.append("| stack | req/s | p99 | errors | CPU µs per request, whole stack (proxy hop: user + kernel) | "
               "rein / this: req/s | p99 | CPU |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in stacks:
        x = _pt(sc["summary"], s, c)
        if not x.get("rps_median"):
            continue
        me = s in REIN_NODE
        out.append(f"| {_l(s)} | {_num(x['rps_median'])} | {_ms(x['p99_ms_median'])} | {_err(x)} | {_stack_cpu(x)} | "
                   + " | ".join("–" if me else _ratio(r.get(k), x.get(k)) for k in (
                       "rps_median", "p99_ms_median", "server_cpu_us_per_req_median")) + " |")
    out.append("")
    chart = _chart(result, "run-all-latency.png")
    if chart:
        out += [chart, ""]
    out.append(_node_meaning(result, sc, c))
    out += _skips(sc)
    return "\n".join(out), _node_glance(result, sc, c)


def _node_meaning(result, sc, c):
    r, h, p, n = (_pt(sc["summary"], s, c) for s in ("rein", "rein-handoff", "pm2", "nginx"))
    parts = []
    if r.get("rps_median") and p.get("rps_median"):
        x = r["rps_median"] / p["rps_median"]
        parts.append(f"rein in front of 2 instances serves {x:.2f} × what PM2's cluster does at {c} connections "
                     f"(issue 27's target 3: ≥ {NODE_TARGET} ×, {'met' if x >= NODE_TARGET else 'missed'})"
                     + (f" and {r['rps_median'] / n['rps_median']:.2f} × nginx in front of the same 2 instances"
                        if n.get("rps_median") else "") + ".")
    if r.get("server_cpu_us_per_req_median") and p.get("server_cpu_us_per_req_median"):
        hop = (r.get("proxy_user_us_per_req_median") or 0) + (r.get("proxy_kernel_us_per_req_median") or 0)
        parts.append(f"The whole stack spends {r['server_cpu_us_per_req_median']:.1f} µs of CPU per request against "
                     f"PM2's {p['server_cpu_us_per_req_median']:.1f}: rein's own process, the proxy hop PM2's "
                     f"cluster does not have (its primary hands each connection to a worker, which then serves it "
                     f"directly), takes {hop:.1f} of them.")
    if h.get("rps_median") and p.get("rps_median"):
        x = h["rps_median"] / p["rps_median"]
        parts.append(f"With `\"handoff\": true` the instances take the client connections themselves, as PM2's "
                     f"workers do: {x:.2f} × PM2's rate (target 3: {'met' if x >= NODE_TARGET else 'missed'})"
                     + (f", {h['server_cpu_us_per_req_median']:.1f} µs of CPU per request for the whole stack"
                        if h.get("server_cpu_us_per_req_median") else "") + ".")
    ab = sc.get("ab_summary", {})
    if ab.get("rein", {}).get("rps_median") and ab.get("pm2", {}).get("rps_median"):
        parts.append(f"With `{sc['setup']['ab_command']}`, the tool of published comparisons: rein "
                     f"{_num(ab['rein']['rps_median'])} req/s, PM2 {_num(ab['pm2']['rps_median'])} "
                     f"({ab['rein']['rps_median'] / ab['pm2']['rps_median']:.2f} ×).")
    return " ".join(parts)


def _node_glance(result, sc, c):
    p = _pt(sc["summary"], "pm2", c)
    rows = []
    for stack, what in (("rein", "Node.js hello, 2 instances"), ("rein-handoff", "Node.js hello, 2 instances, handoff")):
        r = _pt(sc["summary"], stack, c)
        if not (r.get("rps_median") and p.get("rps_median")):
            continue
        cpu = "–"
        if r.get("server_cpu_us_per_req_median") and p.get("server_cpu_us_per_req_median"):
            cpu = (f"{r['server_cpu_us_per_req_median']:.1f} / {p['server_cpu_us_per_req_median']:.1f} µs "
                   f"({_ratio(r['server_cpu_us_per_req_median'], p['server_cpu_us_per_req_median'])}), whole stack")
        rows.append(benchlib.glance_row((what, NODE_TITLE), f"req/s, c={c}", _num(r["rps_median"]),
                                        f"PM2 cluster {_num(p['rps_median'])}", _ratio(r["rps_median"], p["rps_median"]),
                                        cpu, benchlib.run_label(result)))
    return rows


RESILIENCE_TITLE = "Reload and crash: rein vs PM2, nginx, Passenger"


def resilience_section(result):
    kinds = [k for k in ("reload", "crash") if _sc(result, k)]
    st = _sc(result, kinds[0])["setup"]
    out = [f"## {RESILIENCE_TITLE}", ""]
    out += _setup_line(result, (
        f"The 2-instance Node.js app of the section above under `{st['load_command'].replace(' D ', ' ')}` "
        f"({st['connections']} keep-alive connections, {st['load_seconds']} s); at {st['trigger_at_s']} s, a "
        "reload (rein: `GET /control/applications/web/restart`; PM2: `pm2 reload`; nginx: the two instances "
        "restarted one after the other, each awaited; Passenger: `passenger-config restart-app`) or a `kill -9` "
        "of the oldest instance, after which each stack's own view is polled until both instances are up again. "
        f"Medians of {_rounds(result)}; a failed request is one that got no 2xx."),
        "bench/run-all --only " + ",".join(kinds))
    cols = {"reload": ("failed requests", "longest gap", "reload took"),
            "crash": ("failed requests", "longest gap", "time to full capacity")}
    out.append("| stack | " + " | ".join(f"{k}: {c}" for k in kinds for c in cols[k]) + " |")
    out.append("|---|" + "---:|" * (3 * len(kinds)))
    names = [s for s in REIN_NODE + NODE_PEERS if any(s in _sc(result, k)["summary"] for k in kinds)]
    for name in names:
        cells = []
        for k in kinds:
            x = _sc(result, k)["summary"].get(name, {})
            if "failed_median" not in x:
                cells += ["–", "–", "–"]
                continue
            third = (f"{x['reload_s_median']:.2f} s" if k == "reload" else _num(x.get("ttc_s_median"), "{:.2f} s"))
            cells += [f"{x['failed_median']:,.0f}", f"{x['gap_ms_median']:.0f} ms{_drain(x)}", third]
        out.append(f"| {_l(name)} | " + " | ".join(cells) + " |")
    out.append("")
    if any(x.get("gap_in_drain_rounds") for k in kinds for x in _sc(result, k)["summary"].values()):
        out += [DRAIN_NOTE, ""]
    chart = _chart(result, "run-all-resilience.png")
    if chart:
        out += [chart, ""]
    out.append(_resilience_meaning(result, kinds))
    for k in kinds:
        out += _skips(_sc(result, k))
    return "\n".join(out), _resilience_glance(result, kinds)


def _resilience_meaning(result, kinds):
    parts = []
    for k in kinds:
        sm = _sc(result, k)["summary"]
        r = sm.get("rein", {})
        if "failed_median" not in r:
            continue
        worse = [f"{_l(s)} {sm[s]['failed_median']:,.0f}" for s in NODE_PEERS
                 if "failed_median" in sm.get(s, {}) and sm[s]["failed_median"] > 0]
        what = "a rolling reload" if k == "reload" else "a `kill -9`"
        h = sm.get("rein-handoff", {})
        handoff = (f", with `\"handoff\": true` {h['failed_median']:,.0f}" if "failed_median" in h else "")
        parts.append(f"Through {what} rein failed {r['failed_median']:,.0f} requests{handoff}"
                     + (f" (median of the rounds; {', '.join(worse)})" if worse else "") + ".")
    if "reload" in kinds and "nginx" in _sc(result, "reload")["summary"]:
        parts.append("nginx's upstream defaults (`max_fails=1 fail_timeout=10s`) mark an instance down for 10 s "
                     "after one failed attempt, so restarting the second instance within 10 s of the first can leave "
                     "none (502s until then); the `max_fails=0` row is the same stack with that check off.")
    return " ".join(parts)


def _resilience_glance(result, kinds):
    rows = []
    for k in kinds:
        sm = _sc(result, k)["summary"]
        p = sm.get("pm2", {})
        for stack in REIN_NODE:
            r = sm.get(stack, {})
            if "failed_median" not in r or "failed_median" not in p:
                continue
            what = "Rolling reload, 2 Node.js instances" if k == "reload" else "`kill -9` of 1 of 2 Node.js instances"
            if stack == "rein-handoff":
                what += ", handoff"
            rows.append(benchlib.glance_row((what, RESILIENCE_TITLE), "failed requests under load",
                                            f"{r['failed_median']:,.0f}", f"PM2 cluster {p['failed_median']:,.0f}",
                                            "–", "–", benchlib.run_label(result)))
    return rows


MEMORY_TITLE = "Memory of a Node.js stack: rein vs PM2, nginx, Passenger"


def memory_section(result):
    sc = _sc(result, "memory")
    out = [f"## {MEMORY_TITLE}", ""]
    out += _setup_line(result, (
        "The 2-instance Node.js stacks of the sections above, fresh: RSS and PSS summed over every process of the "
        "stack (rein and its instances; PM2's daemon and workers; nginx's master, workers and instances; Apache "
        "and Passenger's agents and apps), idle and halfway through "
        f"`{sc['setup']['wrk_command']}` (median of {_rounds(result)}), and the sum of their peaks (VmHWM)."),
        "bench/run-all --only memory")
    out.append("| stack | processes | RSS idle | RSS under c=100 | PSS under c=100 | peak | rein / this, RSS under "
               "c=100 |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    r = sc["summary"].get("rein", {})
    for name, x in sc["summary"].items():
        if "idle_rss_kb" not in x:
            continue
        out.append(f"| {_l(name)} | {x.get('processes_load', x.get('processes_idle'))} | {fmt_mb(x['idle_rss_kb'])} "
                   f"| {fmt_mb(x.get('load_rss_kb_median') or 0)} | {fmt_mb(x.get('load_pss_kb_median') or 0)} | "
                   f"{fmt_mb(x.get('peak_hwm_kb') or 0)} | "
                   f"{'–' if name == 'rein' else _ratio(r.get('load_rss_kb_median'), x.get('load_rss_kb_median'))} |")
    out.append("")
    chart = _chart(result, "run-all-memory.png")
    if chart:
        out += [chart, ""]
    text = ""
    if r.get("own_idle_rss_kb"):
        text = (f"Most of each stack is its two Node.js processes; rein's own process is "
                f"{fmt_mb(r['own_idle_rss_kb'])} idle and {fmt_mb(r.get('own_load_rss_kb_median') or 0)} under "
                "100 connections. " + benchlib.memory_targets(r["own_idle_rss_kb"], r.get("own_load_rss_kb_median")))
    out.append(text)
    out += _skips(sc)
    rows = []
    p = sc["summary"].get("pm2", {})
    if r.get("load_rss_kb_median") and p.get("load_rss_kb_median"):
        rows.append(benchlib.glance_row(("Memory of a Node.js stack", MEMORY_TITLE), "RSS under c=100, whole stack",
                                        fmt_mb(r["load_rss_kb_median"]), f"PM2 cluster {fmt_mb(p['load_rss_kb_median'])}",
                                        _ratio(r["load_rss_kb_median"], p["load_rss_kb_median"]), "–",
                                        benchlib.run_label(result)))
    return "\n".join(out), rows


LB_TITLE = "Load balancer over 3 backends: rein vs nginx"


def lb_section(result):
    sc = _sc(result, "lb")
    a = result["args"]
    out = [f"## {LB_TITLE}", ""]
    out += _setup_line(result, (
        "rein and nginx balancing round robin over 3 backends (3 nginx processes with `worker_processes 1` "
        "answering `hello\\n`), with the proxy settings of the section above (nginx: upstream keepalive 64, "
        f"HTTP/1.1). `wrk -t{a['threads']} -c N -d {a['duration']}s --latency` against each in turn, medians of "
        f"{_rounds(result)}; everything shares the same {result['machine']['nproc']} CPUs."),
        "bench/run-all --only lb")
    out += _vs_nginx_table(sc, a["vs_conns"])
    out.append("")
    rows, parts = [], []
    for c in a["vs_conns"]:
        r, n = _pt(sc["summary"], "rein", c), _pt(sc["summary"], "nginx", c)
        if not (r.get("rps_median") and n.get("rps_median")):
            continue
        cpu = _ratio(r.get("server_cpu_us_per_req_median"), n.get("server_cpu_us_per_req_median"))
        met = (r["rps_median"] >= n["rps_median"] and r["p99_ms_median"] <= n["p99_ms_median"]
               and cpu != "–" and float(cpu) <= 1 and not r["errors"] and not n["errors"])
        parts.append(f"At {c} connections rein balances {r['rps_median'] / n['rps_median']:.2f} × nginx's requests "
                     f"per second with {cpu} × its CPU per request and {_ratio(r['p99_ms_median'], n['p99_ms_median'])}"
                     f" × its p99: issue 27's target 1 (CPU ≤ nginx's, RPS ≥, p99 ≤, as for the proxy) "
                     f"{'met' if met else 'missed'}.")
        rows.append(benchlib.glance_row(("Load balancer, 3 backends", LB_TITLE), f"req/s, c={c}",
                                        _num(r["rps_median"]), f"nginx {_num(n['rps_median'])}",
                                        _ratio(r["rps_median"], n["rps_median"]),
                                        f"{r['server_cpu_us_per_req_median']:.1f} / "
                                        f"{n['server_cpu_us_per_req_median']:.1f} µs ({cpu})",
                                        benchlib.run_label(result)))
    out.append(" ".join(parts))
    out += _skips(sc)
    return "\n".join(out), rows


def _vs_nginx_table(sc, conns):
    out = ["| connections | server | req/s | p99 | errors | CPU µs per request | rein / nginx: req/s | p99 | CPU |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in conns:
        r = _pt(sc["summary"], "rein", c)
        for s in ("rein", "nginx"):
            x = _pt(sc["summary"], s, c)
            if not x.get("rps_median"):
                continue
            cpu = x.get("server_cpu_us_per_req_median")
            out.append(f"| {c} | {s} | {_num(x['rps_median'])} | {_ms(x['p99_ms_median'])} | {_err(x)} | "
                       f"{'–' if cpu is None else f'{cpu:.1f}'} | "
                       + " | ".join("–" if s == "rein" else _ratio(r.get(k), x.get(k)) for k in (
                           "rps_median", "p99_ms_median", "server_cpu_us_per_req_median")) + " |")
    return out


PHP_TITLE = "PHP through PHP-FPM: rein vs nginx"
PHP_REF = "rein → FPM unix"
PHP_PEER = "nginx → FPM unix"


def php_section(result):
    sc = _sc(result, "php")
    a = result["args"]
    children = sc.get("setup", {}).get("children", 4)
    out = [f"## {PHP_TITLE}", ""]
    out += _setup_line(result, (
        "`<?php echo \"Hello\";` and `phpinfo()` through one private PHP-FPM, a pool per stack and transport "
        f"(`pm = static`, {children} children): rein's own PHP app (`\"type\": \"php\"`, {children} processes), "
        "rein → the pool (a `fastcgi` action) over a Unix socket and over TCP, nginx → the pool with "
        "`fastcgi_keep_conn on` and an upstream keepalive pool, and nginx as Debian's `fastcgi-php.conf` sets it up "
        f"(a connection per request, \"default\"). `wrk -t{a['threads']} -c N -d {a['duration']}s --latency` "
        f"against each in turn, medians of {_rounds(result)}; CPU per request counts the server and the whole "
        "FPM."), "bench/run-all --only php")
    out.append(f"| page | connections | stack | req/s | p99 | errors | CPU µs per request | {PHP_REF} / this: "
               "req/s | p99 |")
    out.append("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for page in ("hello", "phpinfo"):
        sm = sc["summary"].get(page, {})
        for c in a["vs_conns"]:
            r = _pt(sm, PHP_REF, c)
            for s in sm:
                x = _pt(sm, s, c)
                if not x.get("rps_median"):
                    continue
                cpu = x.get("server_cpu_us_per_req_median")
                me = s == PHP_REF
                out.append(f"| {page} | {c} | {s} | {_num(x['rps_median'])} | {_ms(x['p99_ms_median'])} | "
                           f"{_err(x)} | {'–' if cpu is None else f'{cpu:.1f}'} | "
                           f"{'–' if me else _ratio(r.get('rps_median'), x['rps_median'])} | "
                           f"{'–' if me else _ratio(r.get('p99_ms_median'), x['p99_ms_median'])} |")
    out.append("")
    out.append(_php_meaning(result, sc))
    out += _skips(sc)
    return "\n".join(out), _php_glance(result, sc)


def _php_meaning(result, sc):
    c = result["args"]["vs_conns"][0]
    parts = []
    for page in ("hello", "phpinfo"):
        sm = sc["summary"].get(page, {})
        r, n = _pt(sm, PHP_REF, c), _pt(sm, PHP_PEER, c)
        if r.get("rps_median") and n.get("rps_median"):
            parts.append(f"`{page}` {r['rps_median'] / n['rps_median']:.2f} × the requests per second, p99 "
                         f"{_ms(r['p99_ms_median'])} against {_ms(n['p99_ms_median'])}"
                         + (f" ({n['errors']:,} errors on nginx's side)" if n.get("errors") else ""))
    text = ("Over the same Unix socket, rein → PHP-FPM against nginx → PHP-FPM: " + "; ".join(parts) + ". "
            if parts else "")
    text += ("With more connections than FPM children, nginx opens further FastCGI connections that wait in FPM's "
             "accept queue behind its kept-alive ones: that queueing is nginx's p99 and its errors; rein keeps one "
             "connection per child (its upstream server's `max_connections`) and queues the rest of the requests "
             "itself.")
    sm = sc["summary"].get("phpinfo", {})
    u, t = _pt(sm, PHP_PEER, c), _pt(sm, "nginx → FPM tcp", c)
    if u.get("rps_median") and t.get("rps_median") and t["rps_median"] < u["rps_median"] / 2:
        text += (f" nginx → PHP-FPM over TCP serves `phpinfo()` at {_num(t['rps_median'])} req/s: not traced, it "
                 "has the shape of a long answer's last segment held by PHP-FPM's Nagle until nginx's delayed ACK, "
                 "which rein avoids by acknowledging at once (`TCP_QUICKACK`).")
    return text


def _php_glance(result, sc):
    c = result["args"]["vs_conns"][0]
    sm = sc["summary"].get("hello", {})
    r, n = _pt(sm, PHP_REF, c), _pt(sm, PHP_PEER, c)
    if not (r.get("rps_median") and n.get("rps_median")):
        return []
    cpu = "–"
    if r.get("server_cpu_us_per_req_median") and n.get("server_cpu_us_per_req_median"):
        cpu = (f"{r['server_cpu_us_per_req_median']:.1f} / {n['server_cpu_us_per_req_median']:.1f} µs "
               f"({_ratio(r['server_cpu_us_per_req_median'], n['server_cpu_us_per_req_median'])}), with FPM")
    return [benchlib.glance_row(("PHP hello through PHP-FPM", PHP_TITLE), f"req/s, c={c}, Unix socket",
                                _num(r["rps_median"]), f"nginx {_num(n['rps_median'])}"
                                + (f" ({n['errors']:,} errors)" if n.get("errors") else ""),
                                _ratio(r["rps_median"], n["rps_median"]), cpu, benchlib.run_label(result))]


SOCKET_TITLE = "Unix socket or TCP between the server and its app"


def socket_section(result):
    sc = _sc(result, "socket")
    a = result["args"]
    out = [f"## {SOCKET_TITLE}", ""]
    out += _setup_line(result, (
        "The Node.js app of the sections above, 2 instances, reached over Unix sockets or over TCP: rein "
        "`\"socket\": \"unix\"` or `\"tcp\"`, nginx `server unix:…` or `127.0.0.1:PORT`; "
        f"`wrk -t{a['threads']} -c N -d {a['duration']}s`, medians of {_rounds(result)}."),
        "bench/run-all --only socket")
    out.append("| server | connections | req/s, Unix | req/s, TCP | Unix / TCP | p99, Unix | p99, TCP | CPU µs per "
               "request, whole stack, Unix | TCP |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = {}
    cpu = "server_cpu_us_per_req_median"
    for who in ("rein", "nginx"):
        for c in a["vs_conns"]:
            u, t = _pt(sc["summary"], f"{who}, unix", c), _pt(sc["summary"], f"{who}, tcp", c)
            if u or t:
                ratios.setdefault(who, _ratio(u.get("rps_median"), t.get("rps_median")))
                out.append(f"| {who} | {c} | {_num(u.get('rps_median'))} | {_num(t.get('rps_median'))} | "
                           f"{_ratio(u.get('rps_median'), t.get('rps_median'))} | {_ms(u.get('p99_ms_median'))} | "
                           f"{_ms(t.get('p99_ms_median'))} | {_num(u.get(cpu), '{:.1f}')} | "
                           f"{_num(t.get(cpu), '{:.1f}')} |")
    out.append("")
    if ratios:
        out.append("A Unix socket to the app serves " + " and ".join(f"{v} × TCP's rate through {k}"
                                                                      for k, v in ratios.items())
                   + " (`\"socket\": \"unix\"` is rein's default).")
    out += _skips(sc)
    return "\n".join(out), []






# Each section of docs/benchmarks.md this suite writes: its block, the scenarios it shows, the charts it links,
# and its renderer. A section is written from the latest results file holding one of its scenarios.
SECTIONS = [
    ("run-all-lb", ("lb",), (), lb_section),
    ("run-all-node", ("node",), ("latency",), node_section),
    ("run-all-resilience", ("reload", "crash"), ("resilience",), resilience_section),
    ("run-all-memory", ("memory",), ("memory",), memory_section),
    ("run-all-php", ("php",), (), php_section),
    (pyreport.BLOCK, ("python",), ("python",), pyreport.doc_block),
    (rpreport.BLOCK, (rpreport.SCENARIO,), (), rpreport.doc_block),
    ("run-all-socket", ("socket",), (), socket_section),
]
