"""Markdown for bench/run-all's results: the summary table (also printed on stdout) and the generated block
of docs/benchmarks.md, one section per scenario, with ratios rein / peer and links to the charts.

Everything here reads the results dict only, so `bench/run-all --render FILE.json` re-renders a past run.
"""

import os

from benchlib import fmt_mb, fmt_ms

from . import pyreport

LABEL = {"rein": "rein", "pm2": "PM2 cluster", "nginx": "nginx → 2 node", "nginx-mf0": "nginx → 2 node, max_fails=0",
         "passenger": "Passenger + Apache"}
NODE_PEERS = ("pm2", "nginx", "nginx-mf0", "passenger")


def _l(name):
    return LABEL.get(name, name)


def _ratio(a, b, fmt="{:.2f}"):
    if a is None or b in (None, 0):
        return "–"
    return fmt.format(a / b)


def _ms(x):
    return "–" if x is None else fmt_ms(x)


def _num(x, fmt="{:,.0f}"):
    return "–" if x is None else fmt.format(x)


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


def _pt(summary, stack, point):
    return (summary.get(stack) or {}).get(str(point)) or {}


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


def _drain(x):
    return " †" if x.get("gap_in_drain_rounds") else ""


DRAIN_NOTE = ("† in at least one round the longest gap began only when the load stopped starting requests: "
              "requests stuck on the server until rein bench's 10 s timeout (counted as timeouts), so the gap "
              "measures the drain, not an outage seen by new requests.")


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


def _points_table(summary, stacks, points, ref=None, label=_l, point_name="connections"):
    """Rows of RPS / p50 / p99 per stack and point, with ratios rein / `ref`-or-each-peer."""
    out = [f"| {point_name} | server | RPS | p50 | p99 | errors | rein/this RPS | rein/this p99 | RPS per round |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for pt in points:
        r = _pt(summary, ref or "rein", pt)
        for s in stacks:
            x = _pt(summary, s, pt)
            if not x:
                continue
            if not x.get("rps_median"):
                out.append(f"| {pt} | {label(s)} | failed | | | | | | {'; '.join(x.get('run_errors', []))[:200]} |")
                continue
            is_ref = s == (ref or "rein")
            err = x["errors"]
            out.append(f"| {pt} | {label(s)} | {_num(x['rps_median'])} | {_ms(x['p50_ms_median'])} | "
                       f"{_ms(x['p99_ms_median'])} | {err}{' ⚠' if err else ''} | "
                       f"{'–' if is_ref else _ratio(r.get('rps_median'), x['rps_median'])} | "
                       f"{'–' if is_ref else _ratio(r.get('p99_ms_median'), x['p99_ms_median'])} | "
                       f"{', '.join(f'{v:,}' for v in x['rps_rounds'])} |")
    return out


def _resilience_section(result, kind):
    sc = result["scenarios"].get(kind)
    title = {"reload": "1. Reload downtime", "crash": "2. Crash recovery"}[kind]
    out = [f"### {title}", ""]
    if not sc or sc["status"] != "ok":
        out.append(f"Not measured: {_why(sc)}.")
        return out
    st = sc["setup"]
    trig = ("the reload (rein: `GET /control/applications/web/restart`; PM2: `pm2 reload hello`; nginx: the two "
            "instances restarted one after the other, each awaited; Passenger: `passenger-config restart-app`)"
            if kind == "reload" else
            "`kill -9` of the oldest instance (at least 10.5 s old), then the stack's own view polled every 20 ms "
            "until as many instances are up again (rein: `ready` in /status; PM2: `online`; nginx: the respawned "
            "instance answering, respawned 0.1 s after its exit as systemd's `Restart=always` would; Passenger: "
            "`ALIVE` in its pool)")
    out.append(f"The same 2-instance Node.js app; load `{st['load_command']}` with D = {st['load_seconds']} s "
               f"(100 keep-alive connections), and {trig} at {st['trigger_at_s']} s. Medians of "
               f"{_rounds(result)}; failed = requests that got no 2xx (by kind, per round).\n")
    if kind == "reload":
        out.append("| server | failed requests | failure kinds (per round) | longest gap without a 2xx | reload took | "
                   "p99 overall | RPS overall |")
        out.append("|---|---:|---|---:|---:|---:|---:|")
    else:
        out.append("| server | failed requests | failure kinds (per round) | longest gap without a 2xx | "
                   "time to full capacity | p99 overall | RPS overall |")
        out.append("|---|---:|---|---:|---:|---:|---:|")
    for name, x in sc["summary"].items():
        if "failed_median" not in x:
            out.append(f"| {_l(name)} | failed: {'; '.join(x['errors'])[:200]} | | | | | |")
            continue
        third = (f"{x['reload_s_median']:.2f} s ({x['reload_ok']}/{x['rounds']} ok)" if kind == "reload" else
                 f"{_num(x.get('ttc_s_median'), '{:.2f} s')} ({x['recovered']}/{x['rounds']} recovered)")
        out.append(f"| {_l(name)} | {x['failed_median']:.0f} ({', '.join(map(str, x['failed_rounds']))}) | "
                   f"{'; '.join(x['failed_kinds'])} | {x['gap_ms_median']:.0f} ms{_drain(x)} "
                   f"({', '.join(f'{g:.0f}' for g in x['gap_ms_rounds'])}) | {third} | "
                   f"{_ms(x['p99_ms_median'])} | {_num(x['rps_median'])} |")
    if any(x.get("gap_in_drain_rounds") for x in sc["summary"].values()):
        out += ["", DRAIN_NOTE]
    if kind == "reload" and "nginx" in sc["summary"]:
        out += ["", "nginx's upstream defaults (`max_fails=1 fail_timeout=10s`) mark an instance down for 10 s after "
                "one failed attempt, so restarting the second instance within 10 s of the first can leave no live "
                "upstream (502s until fail_timeout passes), depending on whether a request met the first instance "
                "while it was down; the `max_fails=0` row is the same stack with that passive check off."]
    out += _skips(sc)
    return out


def _skips(sc):
    out = []
    for x in sc.get("skipped", []):
        out.append(f"- *{x['stack']} skipped:* {x['reason']}")
    for x in sc.get("failed_stacks", []):
        out.append(f"- *{x['stack']} failed to start:* {x['error'][:400]}")
    return [""] + out if out else []


NODE_TARGET = 1.2  # issue 4: rein's RPS at least 1.2 × nginx's over the same instances


def node_budget(rein, nginx):
    """The most user-space CPU per request (µs) rein's own process could spend and still reach NODE_TARGET ×
    nginx's RPS on this saturated machine, everything else (its kernel work, its instances, wrk) as measured:
    RPS follows the CPU a request costs everything on the machine. Negative: out of reach even with none."""
    keys = ("server_cpu_us_per_req_median", "wrk_us_per_req_median", "proxy_user_us_per_req_median")
    if not all(k in rein for k in keys) or not all(k in nginx for k in keys[:2]):
        return None
    allowed = (nginx["server_cpu_us_per_req_median"] + nginx["wrk_us_per_req_median"]) / NODE_TARGET
    rest = rein["server_cpu_us_per_req_median"] - rein["proxy_user_us_per_req_median"] + rein["wrk_us_per_req_median"]
    return allowed - rest


def _node_cpu(summary, stacks, conns):
    """CPU per request of each part of each stack, and rein's user-space budget for the RPS target."""
    rows, budgets = [], []
    for c in conns:
        for name in stacks:
            x = summary.get(name, {}).get(str(c), {})
            if "server_cpu_us_per_req_median" not in x:
                continue
            whole = x["server_cpu_us_per_req_median"]
            if "proxy_user_us_per_req_median" in x:
                pu, pk = x["proxy_user_us_per_req_median"], x["proxy_kernel_us_per_req_median"]
                proxy, apps = f"{pu:.1f} + {pk:.1f}", f"{whole - pu - pk:.1f}"
            else:
                proxy, apps = "–", f"{whole:.1f}"
            rows.append(f"| {c} | {_l(name)} | {whole:.1f} | {proxy} | {apps} | "
                        f"{x.get('wrk_us_per_req_median', 0):.1f} |")
        b = node_budget(summary.get("rein", {}).get(str(c), {}), summary.get("nginx", {}).get(str(c), {}))
        if b is not None:
            budgets.append(f"c={c}: {b:.1f} µs (rein's is "
                           f"{summary['rein'][str(c)]['proxy_user_us_per_req_median']:.1f})")
    if not rows:
        return []
    out = ["CPU per request, medians (µs; the stack is the server and its two instances, the proxy hop its "
           "user + kernel time, the instances the rest):\n",
           "| connections | server | stack | proxy hop (user + kernel) | instances | wrk |",
           "|---:|---|---:|---:|---:|---:|"] + rows + [""]
    if budgets:
        out.append(f"On these two shared CPUs, RPS follows what a request costs everything on the machine. For "
                   f"rein to reach {NODE_TARGET} × nginx's RPS, with its kernel work, its instances and wrk as "
                   "measured, its own user-space work per request could be at most: " + "; ".join(budgets) +
                   ". A negative budget: out of reach even with none.\n")
    return out


def _node_section(result):
    sc = result["scenarios"].get("node")
    out = ["### 3. Node.js JSON hello: requests per second and latency", ""]
    if not sc or sc["status"] != "ok":
        out.append(f"Not measured: {_why(sc)}.")
        return out
    st = sc["setup"]
    out.append(f"`{st['wrk_command']}`, N = {', '.join(map(str, st['conns']))}, against each stack in turn "
               f"(interleaved), medians of {_rounds(result)}; 2 app instances everywhere. Ratios "
               "are rein / that server (RPS above 1 and p99 below 1 favour rein); ⚠ marks a point with errors "
               "(non-2xx or socket errors), which counts as failed whatever its speed.\n")
    stacks = list(sc["summary"].keys())
    out += _points_table(sc["summary"], stacks, st["conns"])
    out.append("")
    out += _node_cpu(sc["summary"], stacks, st["conns"])
    ab = sc.get("ab_summary", {})
    if ab:
        out.append(f"`{st['ab_command']}` (the published comparisons' tool; HTTP/1.0 keep-alive), medians of "
                   f"{result['args']['rounds']}:\n")
        out.append("| server | RPS | p50 | p99 | failed | non-2xx | keep-alive requests | rein/this RPS |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        r = ab.get("rein", {})
        for name, x in ab.items():
            if not x.get("rps_median"):
                out.append(f"| {_l(name)} | failed: {'; '.join(x['run_errors'])[:200]} | | | | | | |")
                continue
            out.append(f"| {_l(name)} | {_num(x['rps_median'])} | {_num(x['p50_ms_median'], '{:.0f} ms')} | "
                       f"{_num(x['p99_ms_median'], '{:.0f} ms')} | {x['failed']} | {x['non_2xx']} | "
                       f"{_num(x['keepalive_requests_median'])} | "
                       f"{'–' if name == 'rein' else _ratio(r.get('rps_median'), x['rps_median'])} |")
    out += _skips(sc)
    return out


def _memory_section(result):
    sc = result["scenarios"].get("memory")
    out = ["### 4. Memory", ""]
    if not sc or sc["status"] != "ok":
        out.append(f"Not measured: {_why(sc)}.")
        return out
    out.append("Every process of each stack summed (rein + its 2 instances; PM2 daemon + 2 workers; nginx master + "
               "workers + 2 instances; Apache + Passenger's watchdog, core and 2 apps). RSS counts shared pages in "
               "every process, PSS shares them out. Under load: halfway through `"
               f"{sc['setup']['wrk_command']}`, median of {result['args']['rounds']}; peak: the sum of each live "
               "process's VmHWM after the runs.\n")
    out.append("| server | processes | idle RSS | idle PSS | RSS under c=100 | PSS under c=100 | peak (VmHWM sum) | "
               "rein/this under load |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    r = sc["summary"].get("rein", {})
    for name, x in sc["summary"].items():
        if "idle_rss_kb" not in x:
            continue
        out.append(f"| {_l(name)} | {x.get('processes_idle')}–{x.get('processes_load', '?')} | {fmt_mb(x['idle_rss_kb'])} | "
                   f"{fmt_mb(x['idle_pss_kb'])} | {fmt_mb(x.get('load_rss_kb_median') or 0)} | "
                   f"{fmt_mb(x.get('load_pss_kb_median') or 0)} | {fmt_mb(x.get('peak_hwm_kb') or 0)} | "
                   f"{'–' if name == 'rein' else _ratio(r.get('load_rss_kb_median'), x.get('load_rss_kb_median'))} |")
    if r.get("own_idle_rss_kb"):
        out.append("")
        out.append(f"rein's own process: {fmt_mb(r['own_idle_rss_kb'])} RSS idle, "
                   f"{fmt_mb(r.get('own_load_rss_kb_median') or 0)} under c=100, peak "
                   f"{fmt_mb(r.get('own_peak_hwm_kb') or 0)} (VmHWM); the rest of its stack is the two Node.js "
                   "instances.")
    out += _skips(sc)
    return out


def _vs_nginx_section(result):
    out = ["### 5. rein vs nginx: static file, reverse proxy, load balancer, PHP", ""]
    a = result["args"]
    out.append(f"`wrk -t{a['threads']} -c N -d {a['duration']}s --latency`, nginx and rein in turn, medians of "
               f"{_rounds(result)}. nginx: worker_processes = CPUs, access_log off, upstream keepalive 64 with "
               "HTTP/1.1 (as `bench/static-file` and `bench/proxy` set it up); backends: nginx `worker_processes 1` "
               "answering `hello\\n` (3 separate ones for the load balancer, round robin on both sides). The PHP "
               "rows are in section 7.\n")
    any_ = False
    for name, label in (("static", "Static 1 KB file"), ("proxy", "Reverse proxy, 1 backend"),
                        ("lb", "Load balancer, 3 backends")):
        sc = result["scenarios"].get(name)
        if not sc:
            continue
        any_ = True
        out.append(f"**{label}**\n")
        if sc["status"] != "ok":
            out.append(f"Not measured: {_why(sc)}\n")
            continue
        out += _points_table(sc["summary"], ["nginx", "rein"], a["vs_conns"], label=lambda s: s)
        out += _skips(sc)
        out.append("")
    if not any_:
        out.append("Not run.")
    return out


def _socket_section(result):
    out = ["### 6. Unix socket vs TCP between server and app", ""]
    a = result["args"]
    sc = result["scenarios"].get("socket")
    if sc and sc["status"] == "ok":
        out.append(f"Node.js hello, 2 instances; rein `\"socket\": \"unix\"` vs `\"tcp\"`, nginx upstream "
                   f"`server unix:…` vs `127.0.0.1:PORT`; `wrk -t{a['threads']} -c N -d {a['duration']}s`, medians "
                   f"of {a['rounds']}.\n")
        out.append("| server | connections | RPS unix | RPS tcp | unix/tcp RPS | p99 unix | p99 tcp |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for who in ("rein", "nginx"):
            for c in a["vs_conns"]:
                u, t = _pt(sc["summary"], f"{who}, unix", c), _pt(sc["summary"], f"{who}, tcp", c)
                if u or t:
                    out.append(f"| {who} | {c} | {_num(u.get('rps_median'))} | {_num(t.get('rps_median'))} | "
                               f"{_ratio(u.get('rps_median'), t.get('rps_median'))} | {_ms(u.get('p99_ms_median'))} | "
                               f"{_ms(t.get('p99_ms_median'))} |")
        out += _skips(sc)
    elif sc:
        out.append(f"Node.js: not measured: {_why(sc)}")
    php = _sc(result, "php")
    if php:
        out.append("")
        out.append("PHP hello through PHP-FPM (from the php scenario, same runs):\n")
        out.append("| server | connections | RPS unix | RPS tcp | unix/tcp RPS | p99 unix | p99 tcp |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        sm = php["summary"].get("hello", {})
        for who in ("nginx", "rein"):
            for c in a["vs_conns"]:
                u, t = _pt(sm, f"{who} → FPM unix", c), _pt(sm, f"{who} → FPM tcp", c)
                if u or t:
                    out.append(f"| {who} → PHP-FPM | {c} | {_num(u.get('rps_median'))} | {_num(t.get('rps_median'))} | "
                               f"{_ratio(u.get('rps_median'), t.get('rps_median'))} | {_ms(u.get('p99_ms_median'))} | "
                               f"{_ms(t.get('p99_ms_median'))} |")
    if not sc and not php:
        out.append("Not run.")
    return out


def _apps_section(result):
    out = ["### 7. PHP and Python application stacks", ""]
    a = result["args"]
    php = result["scenarios"].get("php")
    if php:
        out.append("**PHP** (`<?php echo \"Hello\";` and `phpinfo()`), PHP-FPM with "
                   f"`pm = static`, `pm.max_children = {php.get('setup', {}).get('children', 4)}` for every stack "
                   "(rein's own FPM: `\"processes\": 4`); rein → FPM through an upstream whose server has "
                   "`max_connections` = the pool's size; nginx with `fastcgi_keep_conn on` and an upstream keepalive "
                   "pool (the peer of the summary's ratios); `nginx → FPM unix, default`: nginx as Debian's "
                   "`snippets/fastcgi-php.conf` and most guides set it up, `fastcgi_pass` straight to the socket "
                   f"with a connection per request; `wrk -t{a['threads']} -c N -d {a['duration']}s`. "
                   "Ratios: rein / that row.\n")
        if php["status"] != "ok":
            out.append(f"Not measured: {_why(php)}\n")
        else:
            for page in ("hello", "phpinfo"):
                sm = php["summary"].get(page, {})
                if not sm:
                    continue
                ref = next((x for x in ("rein (own FPM)", "rein → FPM unix", "rein → FPM tcp")
                            if any(_pt(sm, x, c).get("rps_median") for c in a["vs_conns"])), None)
                out.append(f"*{page}*" + (f" (ratios against {ref}):\n" if ref else " (no rein stack ran: no ratios):\n"))
                out += _points_table(sm, list(sm.keys()), a["vs_conns"], ref=ref, label=lambda s: s)
                out.append("")
            out.append("Each stack has its own FPM pools (a child serves one FastCGI connection at a time, and a kept-"
                       "alive connection holds its child even when idle). With more connections than children, "
                       "nginx opens further FastCGI connections that wait in FPM's accept queue while the children "
                       "serve the kept-alive ones: that queueing is in nginx's p99.")
            out += _skips(php)
        out.append("")
    py = result["scenarios"].get("python")
    if py:
        out += pyreport.run_all_pointer()
    if not php and not py:
        out.append("Not run.")
    return out


def doc_block(result):
    m, v, a = result["machine"], result["versions"], result["args"]
    out = ["## Comparison suite: rein vs nginx, PM2, Passenger, PHP-FPM, gunicorn, uvicorn", ""]
    if a.get("quick"):
        out.append("> **Quick mode** (`--quick`: 1 round of 2 s, few connection counts): a smoke test of the suite, "
                   "not figures to quote.\n")
    out.append(f"- **Date:** {result['date']}")
    out.append(f"- **Command:** `{result['command']}` (from the repository root); the run took "
               f"{result['elapsed_s'] / 60:.1f} min")
    out.append(f"- **Machine:** {m['nproc']} CPUs ({m['cpu_model']}), {m['ram_gib']} GiB RAM, Linux {m['kernel']}; "
               "load generator and servers share the same CPUs")
    out.append("- **Versions:** " + "; ".join(f"{val}" for k, val in v.items() if k not in ("rein_binary",)))
    out.append(f"- **Rounds:** medians of {a['rounds']} round{'s' if a['rounds'] != 1 else ''}, {a['duration']} s per wrk run, reload/crash loads "
               f"of {a['resilience_duration']} s")
    out.append(f"- **Raw results:** `{os.path.relpath(result['json_path'], result['repo'])}` (every run, configs, "
               "tool output)")
    out.append("")
    out.append("### Summary")
    out.append("")
    out.append(summary_table(result))
    out.append("")
    charts = [c for c in result.get("charts") or [] if os.path.basename(c["path"]) != pyreport.CHART]
    if charts:
        out.append("Charts (each states machine, date and command):")
        out.append("")
        for c in charts:
            out.append(f"![{c['title']}](bench/{os.path.basename(c['path'])})")
            out.append("")
    for part in (_resilience_section(result, "reload"), _resilience_section(result, "crash"), _node_section(result),
                 _memory_section(result), _vs_nginx_section(result), _socket_section(result), _apps_section(result)):
        out += part
        out.append("")
    out.append("Figures are measured as they came, on a machine shared by the load generator and the servers: "
               "ratios are the meaningful part, absolute RPS is bounded by the 2 CPUs.")
    return "\n".join(out)
