"""The cells and lines the run-all report writers share (report, pyreport, rpreport): a ratio, a time, a number,
one stack's point of a summary, a chart's image line, the stacks a scenario skipped, the mark of a gap that was
the drain."""

from benchlib import fmt_ms


def ratio(a, b, fmt="{:.2f}"):
    return "–" if a is None or not b else fmt.format(a / b)


def ms(x):
    return "–" if x is None else fmt_ms(x)


def num(x, fmt="{:,.0f}"):
    return "–" if x is None else fmt.format(x)


def pt(summary, stack, point):
    return (summary.get(stack) or {}).get(str(point)) or {}


def chart(result, name):
    """The image line of the chart `name` the run drew, or None."""
    c = next((c for c in result.get("charts") or [] if c["path"].endswith("/" + name)), None)
    return f"![{c['title']}](bench/{name})" if c else None


def skips(sc):
    out = [f"- *{x['stack']} skipped:* {x['reason']}" for x in sc.get("skipped", [])]
    out += [f"- *{x['stack']} failed to start:* {x['error'][:400]}" for x in sc.get("failed_stacks", [])]
    return [""] + out if out else []


def drain(x):
    """The mark of a reload or crash summary row whose longest gap, in some round, was the drain (DRAIN_NOTE)."""
    return " †" if x.get("gap_in_drain_rounds") else ""


DRAIN_NOTE = ("† in at least one round the longest gap began only when the load stopped starting requests: "
              "requests stuck on the server until rein bench's 10 s timeout (counted as timeouts), so the gap "
              "measures the drain, not an outage seen by new requests.")
