"""PNG charts of a bench/run-all results file, drawn headless (matplotlib's Agg backend) by the venv's Python:

    bench/.venv/bin/python bench/suite/charts.py bench/results/run-all-DATE.json docs/bench

Writes run-all-latency.png (RPS, p50 and p99 against connections per server), run-all-rps.png (RPS per server
in each scenario), run-all-resilience.png (failed requests, longest gap and recovery during reload and crash)
run-all-memory.png and python.png (the python scenario: RPS, p99, CPU per request and memory of each stack); a
third argument, a comma-separated list of latency, rps, resilience, memory, python, draws only those. It prints
one JSON line [{"path", "title"}] of what it wrote. Each chart's footer states
the machine, the date and the command. Figures are plotted as measured.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

LABEL = {"rein": "rein", "rein-handoff": "rein,\nhandoff", "pm2": "PM2 cluster", "nginx": "nginx →\n2 node", "nginx-mf0": "nginx → 2 node,\nmax_fails=0",
         "passenger": "Passenger\n+ Apache"}
COLORS = {"rein": "#d9480f", "rein-handoff": "#f76707", "pm2": "#1971c2", "nginx": "#2f9e44", "nginx-mf0": "#8ce99a", "passenger": "#7048e8",
          "Granian": "#f59f00"}


def rounds(result):
    n = result["args"]["rounds"]
    return f"{n} round{'s' if n != 1 else ''}"


def color(name, i):
    """rein orange, nginx green, PM2 blue, Passenger violet; a TCP variant or nginx with max_fails=0 lighter."""
    base = next((COLORS[k] for k in ("nginx-mf0", "rein", "pm2", "nginx", "passenger", "Granian")
                 if name == k or name.startswith(k)), None)
    if base is None:
        return plt.cm.tab10(i % 10)
    if "tcp" in name:
        r, g, b = matplotlib.colors.to_rgb(base)
        return (r + (1 - r) * 0.45, g + (1 - g) * 0.45, b + (1 - b) * 0.45)
    return base


def footer(fig, result, extra=""):
    m = result["machine"]
    text = (f"{m['nproc']} CPUs ({m['cpu_model']}), Linux {m['kernel']} · {result['date']} · "
            f"{result['command']}" + (f" · {extra}" if extra else ""))
    fig.text(0.01, 0.005, text, fontsize=6.5, color="#555", ha="left", va="bottom", wrap=True)


def ok(result, name):
    s = result["scenarios"].get(name)
    return s if s and s.get("status") == "ok" else None


def latency(result, outdir):
    sc = ok(result, "node")
    if not sc:
        return None
    conns = sc["setup"]["conns"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    for i, (name, pts) in enumerate(sc["summary"].items()):
        xs = [c for c in conns if pts.get(str(c), {}).get("rps_median")]
        if not xs:
            continue
        kw = dict(label=LABEL.get(name, name).replace("\n", " "), color=color(name, i), marker="o")
        axes[0].plot(xs, [pts[str(c)]["rps_median"] for c in xs], **kw)
        axes[1].plot(xs, [pts[str(c)]["p50_ms_median"] for c in xs], **kw)
        axes[2].plot(xs, [pts[str(c)]["p99_ms_median"] for c in xs], **kw)
        bad = [c for c in xs if pts[str(c)].get("errors")]
        for ax, key in ((axes[0], "rps_median"), (axes[2], "p99_ms_median")):
            ax.scatter(bad, [pts[str(c)][key] for c in bad], marker="x", s=80, color="black", zorder=5)
    for ax, title, unit in ((axes[0], "Requests per second", "req/s"), (axes[1], "p50 latency", "ms"),
                            (axes[2], "p99 latency", "ms")):
        ax.set_xscale("log")
        if unit == "ms":
            ax.set_yscale("log")
        ax.set_xticks(conns)
        ax.set_xticklabels([str(c) for c in conns])
        ax.set_xlabel("connections")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Node.js JSON hello, 2 instances: medians of {rounds(result)} "
                 "(× = point with errors)")
    footer(fig, result, sc["setup"]["wrk_command"])
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path = os.path.join(outdir, "run-all-latency.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"path": path, "title": "Node.js hello: RPS and latency vs connections per server"}


def rps(result, outdir):
    panels = []
    node = ok(result, "node")
    if node:
        c = "100" if "100" in next(iter(node["summary"].values()), {}) else str(node["setup"]["conns"][-1])
        panels.append((f"Node.js hello, c={c}", {LABEL.get(k, k): v.get(c, {}).get("rps_median")
                                                 for k, v in node["summary"].items()}))
    vc = str(result["args"]["vs_conns"][0])
    for name, title in (("static", "static 1 KB"), ("proxy", "reverse proxy"), ("lb", "LB, 3 backends")):
        sc = ok(result, name)
        if sc:
            panels.append((f"{title}, c={vc}", {k: v.get(vc, {}).get("rps_median") for k, v in sc["summary"].items()}))
    php = ok(result, "php")
    if php:
        for page in ("hello", "phpinfo"):
            sm = php["summary"].get(page, {})
            if sm:
                panels.append((f"PHP {page}, c={vc}", {k: v.get(vc, {}).get("rps_median") for k, v in sm.items()}))
    py = ok(result, "python")
    if py:
        for case in ("wsgi", "asgi"):
            sm = py["summary"].get(case, {})
            if sm:
                panels.append((f"Python {case.upper()}, c={vc}",
                               {k: v.get(vc, {}).get("rps_median") for k, v in sm.items()}))
    sock = ok(result, "socket")
    if sock:
        panels.append((f"unix vs tcp (node), c={vc}", {k: v.get(vc, {}).get("rps_median")
                                                       for k, v in sock["summary"].items()}))
    panels = [(t, {k: v for k, v in d.items() if v}) for t, d in panels]
    panels = [p for p in panels if p[1]]
    if not panels:
        return None
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows + 0.6), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    keys = {v: k for k, v in LABEL.items()}
    for ax, (title, d) in zip(axes.flat, panels):
        names = list(d.keys())
        vals = [d[n] for n in names]
        bars = ax.barh(names, vals, color=[color(keys.get(n, n), i) for i, n in enumerate(names)])
        ax.bar_label(bars, labels=[f"{v:,.0f}" for v in vals], fontsize=7, padding=2)
        ax.set_title(title, fontsize=10)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlabel("requests/s (median)", fontsize=8)
        ax.set_xlim(0, max(vals) * 1.25)
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"Requests per second per server and scenario (medians of {rounds(result)})")
    footer(fig, result, f"wrk -t{result['args']['threads']} -c N -d {result['args']['duration']}s --latency")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path = os.path.join(outdir, "run-all-rps.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"path": path, "title": "Requests per second per server and scenario"}


def resilience(result, outdir):
    kinds = [k for k in ("reload", "crash") if ok(result, k)]
    if not kinds:
        return None
    fig, axes = plt.subplots(len(kinds), 3, figsize=(14, 3.6 * len(kinds) + 0.6), squeeze=False)
    for row, kind in zip(axes, kinds):
        sm = {k: v for k, v in result["scenarios"][kind]["summary"].items() if "failed_median" in v}
        names = [LABEL.get(k, k) for k in sm]
        cols = [color(k, i) for i, k in enumerate(sm)]
        third_key, third_title = (("reload_s_median", "reload took (s)") if kind == "reload"
                                  else ("ttc_s_median", "time to full capacity (s)"))
        for ax, key, title in ((row[0], "failed_median", "failed requests"),
                               (row[1], "gap_ms_median", "longest gap without a 2xx (ms)"),
                               (row[2], third_key, third_title)):
            vals = [v.get(key) or 0 for v in sm.values()]
            bars = ax.bar(names, vals, color=cols)
            if key == "gap_ms_median":
                for bar, v in zip(bars, sm.values()):
                    if v.get("gap_in_drain_rounds"):
                        bar.set_hatch("//")
                        bar.set_edgecolor("white")
            ax.bar_label(bars, labels=[f"{v:,.0f}" if key != third_key else f"{v:.2f}" for v in vals], fontsize=8)
            ax.set_title(f"{kind}: {title}", fontsize=10)
            ax.tick_params(axis="x", labelsize=8)
            ax.set_ylim(0, (max(vals) or 1) * 1.2)
            ax.grid(True, axis="y", alpha=0.3)
    st = result["scenarios"][kinds[0]]["setup"]
    fig.suptitle(f"Reload and crash (kill -9 of one of 2 instances) under 100 keep-alive connections, medians of "
                 f"{rounds(result)}")
    footer(fig, result, st["load_command"].replace(" D ", f" {st['load_seconds']} ")
           + " · hatched gap: it began when the load stopped starting requests (requests stuck until the 10 s "
             "timeout), the drain rather than an outage")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path = os.path.join(outdir, "run-all-resilience.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"path": path, "title": "Failures during reload and crash per server"}


def memory(result, outdir):
    sc = ok(result, "memory")
    if not sc:
        return None
    sm = {k: v for k, v in sc["summary"].items() if "idle_rss_kb" in v}
    if not sm:
        return None
    names = [LABEL.get(k, k) for k in sm]
    fig, ax = plt.subplots(figsize=(10, 4.4))
    width = 0.26
    for j, (key, label) in enumerate((("idle_rss_kb", "idle"), ("load_rss_kb_median", "under c=100"),
                                      ("peak_hwm_kb", "peak (VmHWM sum)"))):
        vals = [(v.get(key) or 0) / 1024 for v in sm.values()]
        bars = ax.bar([i + (j - 1) * width for i in range(len(names))], vals, width, label=label)
        ax.bar_label(bars, labels=[f"{v:.0f}" for v in vals], fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylabel("MB (RSS summed over the stack's processes)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    r = sm.get("rein", {})
    own = (f"; rein's own process {r['own_idle_rss_kb'] / 1024:.1f} MB idle, "
           f"{(r.get('own_load_rss_kb_median') or 0) / 1024:.1f} MB under load") if r.get("own_idle_rss_kb") else ""
    ax.set_title(f"Memory of each stack (app: Node.js hello, 2 instances){own}", fontsize=10)
    footer(fig, result, sc["setup"]["wrk_command"])
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    path = os.path.join(outdir, "run-all-memory.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"path": path, "title": "Memory per stack: idle, under 100 connections, peak"}


def python(result, outdir):
    """One row per case (WSGI, ASGI), at the first --vs-conns count: RPS, p99, CPU per request (user and kernel)
    and PSS after the runs, one bar per stack."""
    sc = ok(result, "python")
    if not sc:
        return None
    c = str(result["args"]["vs_conns"][0])
    cases = [k for k in ("wsgi", "asgi") if sc["summary"].get(k)]
    if not cases:
        return None
    fig, axes = plt.subplots(len(cases), 4, figsize=(16, 2.9 * len(cases) + 0.7), squeeze=False)
    for row, case in zip(axes, cases):
        sm, mem = sc["summary"][case], sc.get("memory", {}).get(case, {})
        names = [n for n in sm if sm[n].get(c, {}).get("rps_median")]
        cols = [color(n.split()[0], i) for i, n in enumerate(names)]
        pts = [sm[n][c] for n in names]
        panels = ((row[0], "requests/s", [p["rps_median"] for p in pts], "{:,.0f}"),
                  (row[1], "p99 latency (ms)", [p["p99_ms_median"] for p in pts], "{:.1f}"),
                  (row[3], "PSS, alone after a run (MB)", [(mem.get(n, {}).get("pss_kb") or 0) / 1024 for n in names],
                   "{:.1f}"))
        for ax, title, vals, fmt in panels:
            bars = ax.barh(names, vals, color=cols)
            ax.bar_label(bars, labels=[fmt.format(v) for v in vals], fontsize=7, padding=2)
            ax.set_title(f"{case.upper()}: {title}", fontsize=9)
            ax.set_xlim(0, (max(vals) or 1) * 1.3)
        # The median round's user and kernel time, which add up to the median total.
        split = [p.get("median_round_cpu_us_per_req") or {} for p in pts]
        user = [x.get("user") or 0 for x in split]
        kern = [x.get("kernel") or 0 for x in split]
        ax = row[2]
        ax.barh(names, user, color=cols, label="user")
        bars = ax.barh(names, kern, left=user, color=cols, alpha=0.45, hatch="//", label="kernel")
        ax.bar_label(bars, labels=[f"{p.get('server_cpu_us_per_req_median') or 0:.1f}" for p in pts], fontsize=7,
                     padding=2)
        ax.set_title(f"{case.upper()}: CPU per request (µs, user + kernel)", fontsize=9)
        ax.set_xlim(0, (max(u + k for u, k in zip(user, kern)) or 1) * 1.3)
        ax.legend(handles=[matplotlib.patches.Patch(color="#888", label="user"),
                           matplotlib.patches.Patch(facecolor="#888", alpha=0.45, hatch="//", label="kernel")],
                  fontsize=7, loc="lower right")
        for ax in row:
            ax.invert_yaxis()
            ax.tick_params(axis="y", labelsize=8)
            ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"Python hello, 2 processes × 1 thread per stack, c={c}: medians of {rounds(result)}; whole stack's "
                 "CPU and memory (every process)")
    footer(fig, result, f"wrk -t{result['args']['threads']} -c {c} -d {result['args']['duration']}s --latency · "
                        f"{result['versions'].get('python', '')}")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    path = os.path.join(outdir, "python.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"path": path, "title": "Python WSGI and ASGI: RPS, p99, CPU per request and memory per stack"}


CHARTS = {"latency": latency, "rps": rps, "resilience": resilience, "memory": memory, "python": python}


def main():
    with open(sys.argv[1]) as f:
        result = json.load(f)
    outdir = sys.argv[2]
    which = sys.argv[3].split(",") if len(sys.argv) > 3 else list(CHARTS)
    os.makedirs(outdir, exist_ok=True)
    made = []
    for fn in (CHARTS[k] for k in which):
        try:
            c = fn(result, outdir)
            if c:
                made.append(c)
        except Exception as e:  # noqa: BLE001 - one chart failing must not lose the others
            print(f"chart {fn.__name__} failed: {e!r}", file=sys.stderr)
    print(json.dumps(made))


if __name__ == "__main__":
    main()
