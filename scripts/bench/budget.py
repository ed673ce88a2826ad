# SPDX-License-Identifier: Apache-2.0
"""tlsprof's budget, line by line: each line names the figure it is judged on, and is judged on that one.

A line whose figure this run did not measure (a rate the machine does not reach, a recording not made) says so
and is SKIP, never judged on another figure.
"""

from .common import med, spread
from .figures import (accuracy_rows, counter_figures, noise_floor, own_cpu_projection, paired, per_request,
                      rss_growth, runs_of, serve_figures, stated_cost)
from .fmt import fnum, fpaired, fpct
from .profilers import TLSPROF_BUDGET
from .settings import setting
from .workloads import WORKLOADS

BUDGET_FULL_OVERHEAD = 0.01
BUDGET_KEEPALIVE_OVERHEAD = 0.03
BUDGET_OWN_CPU = 0.02
BUDGET_OWN_CPU_RATE = 2000.0
BUDGET_RSS_MB = 64.0
# "Must not grow": more than allocator noise between the second and the last tenth of the long recording.
BUDGET_RSS_GROWTH_MB = 1.0
BUDGET_LIVE_S = 1.0
BUDGET_REPORT_S = 1.0
BUDGET_ACCURACY = 0.10
# Exact mode (--max-overhead 100): what it may add per full handshake, by workload.
BUDGET_EXACT = {"full": ("nginx, RSA-2048", 0.03), "ecdsa_full": ("nginx, ECDSA P-256", 0.03),
                "go_full": ("the Go server (RSA-2048)", 0.05)}
# The report's statement of its own cost against the twins', at each budget it is judged at.
BUDGET_STATED = 0.30
STATED_CONDITIONS = ("tlsprof", "tlsprof-1", "tlsprof-2")
STATED_WORKLOADS = ("full", "keepalive", "go_full")


def verdict(ok):
    return "SKIP" if ok is None else ("PASS" if ok else "**FAIL**")


def within(figures, limit):
    """Whether every figure is ≤ limit; None when there is none to judge."""
    figures = [x for x in figures if x is not None]
    return None if not figures else all(x <= limit for x in figures)


def paired_text(data, workload):
    """The median paired overhead of tlsprof (defaults) under a workload, and how it reads."""
    po = paired(data, workload, "tlsprof") if "tlsprof" in data["settings"]["conditions"] else []
    if not po:
        return None, "–"
    floor = fpct(noise_floor(data, workload), 2, False)
    return med(po), f"{fpct(med(po), 2)} ({runs_text(po)}; pairs with no profiler: ±{floor})"


def runs_text(po):
    """How many paired runs a median is of, and their spread."""
    lo, hi = spread(po)
    return "1 paired run" if len(po) == 1 else f"median of {len(po)} paired runs, {fpct(lo, 2)}…{fpct(hi, 2)}"


def overhead_lines(data):
    lines = []
    long = data.get("long") or {}
    rate = med([r["rate"] for r in runs_of(data, "full", "tlsprof")])
    ov, text = paired_text(data, "full")
    text += f" at {fnum(rate, 0)} handshakes/s"
    # The short runs hold one or two probe windows each; the long recording shows the governor's steady state.
    steady = long.get("paired_overhead")
    if steady is not None:
        text += f"; over the {long['minutes']:g}-minute recording: {fpct(steady, 2)}"
    lines.append(("Full-handshake load: tlsprof (defaults) adds ≤ 1% target CPU per handshake", text,
                  verdict(None if ov is None else within([ov, steady], BUDGET_FULL_OVERHEAD))))

    ov, text = paired_text(data, "keepalive")
    lines.append(("Keep-alive load: tlsprof (defaults) adds ≤ 3% target CPU per request", text,
                  verdict(within([ov], BUDGET_KEEPALIVE_OVERHEAD))))
    rw_stages = [[((r.get("prof_report") or {}).get("stages", {}).get(st) or {}) for st in ("read", "write")]
                 for r in runs_of(data, "keepalive", "tlsprof")]
    rw = [all(st.get("calls") or st.get("cpu_ms") for st in pair) for pair in rw_stages]
    sampled = any(st.get("sampled") or not st.get("calls") for pair in rw_stages for st in pair)
    how = " (estimated from CPU samples: CPU, no call counts)" if sampled and any(rw) else ""
    lines.append(("Keep-alive load: … with the `read`/`write` stages still reported (defaults)",
                  (f"reported in {sum(rw)} of {len(rw)} runs{how}" if rw else "–"),
                  verdict(None if not rw else all(rw))))
    return lines


def exact_lines(data):
    """Exact mode's price per workload, and its probe hits single-stepped (none allowed, in any workload)."""
    lines = []
    for workload, (server, limit) in BUDGET_EXACT.items():
        po = paired(data, workload, "tlsprof-exact")
        line = (f"Exact mode (`--max-overhead 100`) adds ≤ {fpct(limit, 0, False)} target CPU per full handshake: "
                f"{server}")
        if not po:
            lines.append((line, "not measured: no exact-mode run of this workload", "SKIP"))
            continue
        hits, stepped = (per_request(data, workload, "tlsprof-exact", k) for k in ("probe_hits", "probe_stepped_hits"))
        lines.append((line, f"{fpct(med(po), 2)} ({runs_text(po)}); {fnum(hits, 1)} probe hits per handshake, "
                            f"{fnum(stepped, 1)} of them single-stepped",
                      verdict(within([med(po)], limit))))
    stepped = {w: per_request(data, w, "tlsprof-exact", "probe_stepped_hits") for w in WORKLOADS
               if runs_of(data, w, "tlsprof-exact")}
    lines.append(("Exact mode: no probe hit single-stepped, in any workload",
                  "; ".join(f"{WORKLOADS[w]}: {fnum(x, 2)} per request" for w, x in stepped.items()) or "–",
                  verdict(None if not stepped else all(x == 0 for x in stepped.values()))))
    return lines


def stated_lines(data):
    """The report's own-cost statement (its probes' and its other programs') against the twins' paired figure:
    within ±30%, or within the pairing's noise floor of it where that is wider (a small figure's ratio is noise)."""
    lines = []
    for workload in STATED_WORKLOADS:
        judged, parts = [], []
        floor = noise_floor(data, workload) or 0
        for c in STATED_CONDITIONS:
            f = stated_cost(data, workload, c)
            if f is None:
                continue
            ok = abs(f["stated"] - f["measured"]) <= max(BUDGET_STATED * abs(f["measured"]), floor)
            judged.append(ok)
            ratio = f" (×{f['stated'] / f['measured']:.2f})" if f["measured"] > 0 else ""
            parts.append(f"budget {TLSPROF_BUDGET[c]:g}%: stated {fpct(f['stated'], 2, False)}, measured "
                         f"{fpct(f['measured'], 2)}{ratio}")
        text = "; ".join(parts) + f"; the pairing's noise floor ±{fpct(floor, 2, False)}" if parts else "–"
        lines.append((f"The report's stated cost within ±30% of the twins' (or of their noise floor): "
                      f"{WORKLOADS[workload]}", text, verdict(all(judged) if judged else None)))
    return lines


def own_cpu_lines(data):
    """tlsprof's own CPU, judged at the rates measured; the budget's 2,000 handshakes/s only if a run reached it."""
    s = data["settings"]
    full = runs_of(data, "full", "tlsprof")
    frac, rate = med([r["prof_cpu_load_frac"] for r in full]), med([r["rate"] for r in full])
    runs = f"{len(full)} runs of {s['seconds']} s, median" if len(full) > 1 else f"1 run of {s['seconds']} s"
    measured = [(frac, rate, runs)] if frac is not None else []
    long = data.get("long")
    if long and long.get("cpu_frac") is not None:
        measured.append((long["cpu_frac"], long["twin"]["rate"], f"the {long['minutes']:g}-minute recording"))

    def says(ms):
        return "; ".join(f"{fpct(f, 2, False)} at {fnum(r, 0)} handshakes/s ({how})" for f, r, how in ms) or "–"

    lines = [("tlsprof's own CPU ≤ 2% of one core at 99 Hz, at the rate the full-handshake load reaches",
              says(measured), verdict(within([f for f, _, _ in measured], BUDGET_OWN_CPU)))]
    at_budget = [m for m in measured if m[1] >= BUDGET_OWN_CPU_RATE]
    if at_budget:
        text, ok = says(at_budget), within([f for f, _, _ in at_budget], BUDGET_OWN_CPU)
    else:
        linear, proj = own_cpu_projection(data, BUDGET_OWN_CPU_RATE)
        text = (f"not measured: the full-handshake load reaches {fnum(rate, 0)} handshakes/s here. Estimated from "
                f"the runs: {fpct(proj, 2, False)} (fixed part + per-handshake part scaled), at most "
                f"{fpct(linear, 2, False)} (all of it scaled)")
        ok = None
    lines.append(("tlsprof's own CPU ≤ 2% of one core at 99 Hz and 2,000 handshakes/s", text, verdict(ok)))
    return lines


def growth_line(line, samples, minutes):
    """A "memory does not grow" line: RSS from the second tenth of a run of `minutes` to the last tenth."""
    early, late, slope = rss_growth(samples)
    reach = ""
    if slope and slope > 0 and late < BUDGET_RSS_MB:
        reach = f" (if it kept that pace: 64 MB after {minutes + (BUDGET_RSS_MB - late) / slope:.0f} min)"
    return (line, f"RSS {fnum(early)} MB at {minutes * 0.1:g}–{minutes * 0.2:g} min → {fnum(late)} MB in the last "
                  f"tenth; trend {fnum(slope, 2)} MB/min{reach}",
            verdict(None if early is None else within([late - early], BUDGET_RSS_GROWTH_MB)))


def memory_lines(data):
    long = data.get("long")
    if long:
        peak = long["maxrss_mb"]
        return [(f"Peak RSS ≤ 64 MB over a {long['minutes']:g}-minute recording",
                 f"{fnum(peak)} MB (ru_maxrss)", verdict(within([peak], BUDGET_RSS_MB))),
                growth_line("Memory does not grow with duration (≤ 1 MB from the second tenth of the recording to "
                            "the last)", long["samples"], long["minutes"])]
    # No long recording: the line names the recordings that were made.
    seconds = data["settings"]["seconds"]
    peaks = [r["prof_maxrss_mb"] for r in runs_of(data, "full", "tlsprof") + runs_of(data, "keepalive", "tlsprof")
             if r.get("prof_maxrss_mb")]
    peak = max(peaks) if peaks else None
    return [(f"Peak RSS ≤ 64 MB over a {seconds} s recording (no long recording)",
             f"{fnum(peak)} MB (ru_maxrss, the most of {len(peaks)} recordings)",
             verdict(within([peak], BUDGET_RSS_MB))),
            ("Memory does not grow with duration", "not measured: no long recording (--long-minutes 0)", "SKIP")]


def serve_lines(data):
    """Continuous mode, judged as the defaults' overhead and the long recording's memory are, and its counter
    against the clients'."""
    serve, f = data.get("serve"), serve_figures(data.get("serve"))
    minutes = f", {serve['minutes']:g} min" if serve else ""
    lines = [f"Continuous mode (serve{minutes}): overhead within the budget (≤ 1% target CPU per handshake, as "
             f"the defaults' line)",
             "Continuous mode: memory does not grow (≤ 1 MB from the second tenth of the run to the last)",
             "Continuous mode: handshakes counter within its stated interval of the clients' count, sign stage "
             "CPU counted"]
    if not f:
        why = ("this benchmark had no continuous-mode stage" if "serve_minutes" not in data["settings"]
               else f"--serve-minutes {setting(data['settings'], 'serve_minutes'):g}")
        return [(line, f"not measured ({why})", "SKIP") for line in lines]
    sign = f["sign_cpu_s"]
    return [
        (lines[0], f"{fpct(f['paired'], 2)} over the whole run, paired with twin B; per slice "
                   f"({len(f['slices'])} of {serve['slice_s']} s), median (min…max): {fpaired(f['slices'])}; "
                   f"tlsprof's own CPU {fpct(serve['cpu_frac'], 2, False)} of a core",
         verdict(within([f["paired"]], BUDGET_FULL_OVERHEAD))),
        growth_line(lines[1], serve["samples"], serve["minutes"]),
        (lines[2], f"`sum(tlsprof_handshakes_total)` {fnum(f['handshakes'], 0)} [{fnum(f['lower'], 0)}–"
                   f"{fnum(f['upper'], 0)}] after the load, {fnum(f['clients'], 0)} by twin A's clients "
                   f"({fpct(f['error'], 2)}); sign {fnum(sign, 2)} s",
         verdict(f["inside"] and bool(sign))),
    ]


def time_lines(data):
    s = data["settings"]
    live = [r["prof_live_s"] for r in data["runs"] if r["condition"] == "tlsprof"]
    m = med(live)
    lines = [("Probes live ≤ 1 s after `tlsprof record` starts",
              f"{fnum(m, 3)} s median, {fnum(spread(live)[1], 3)} s max (nginx worker)",
              verdict(within([m], BUDGET_LIVE_S)))]
    long = data.get("long")
    if long:
        rt = med(long["report_times_s"])
        lines.append((f"`tlsprof report` of a {long['minutes']:g}-minute recording ≤ 1 s",
                      f"{fnum(rt, 3)} s median of {len(long['report_times_s'])}",
                      verdict(within([rt], BUDGET_REPORT_S))))
    else:
        rt = med(data["report_times_short"])
        lines.append(("`tlsprof report` of a 10-minute recording ≤ 1 s",
                      f"not measured: no long recording; {fnum(rt, 3)} s for {s['seconds']} s recordings", "SKIP"))
    return lines


def twin_text(err, ours, theirs):
    return (f"{fpct(err)} (median of {len(ours)} runs against their twin; medians {fnum(med(ours))} µs vs "
            f"{fnum(med(theirs))} µs)")


def twin_line(what, err, ours, theirs):
    """A budget line judging tlsprof's per-call figures against the fixture's unprobed twin's, run by run."""
    return (f"Accuracy: {what}", twin_text(err, ours, theirs),
            verdict(None if err is None else abs(err) <= BUDGET_ACCURACY))


def accuracy_lines(data):
    """Judged against the ground truth, the fixture's unprobed twin making the same operations at the same time;
    `openssl speed` runs apart from the fixture's calls, seconds away on a machine whose speed drifts by more than
    the ±10% in that time, so its comparison is shown beside them, not judged."""
    lines = []
    for row in accuracy_rows(data):
        lines.append(twin_line(f"{row['name']} within ±10% of the fixture (unprobed twin), made as libssl makes it",
                               row["err_fixture"], row["ours"], row["unprobed"]))
        lines.append(twin_line(f"{row['name']} within ±10% of the fixture (unprobed twin), made as `openssl speed` "
                               f"makes it", row["err_fixture_as_speed"], row["ours_as_speed"], row["fixture_as_speed"]))
        lo, hi = spread(row["speed"])
        lines.append((f"Accuracy: {row['name']} against `openssl speed` (apart in time: shown, not judged)",
                      f"{fpct(row['err_speed'])} (tlsprof {fnum(med(row['ours_as_speed']))} µs on the fixture made "
                      f"as speed makes it vs speed's {fnum(med(row['speed']))} µs, {fnum(lo)}–{fnum(hi)} over "
                      f"{len(row['speed'])} runs)", "–"))
    for library, name in (("go", "Go"), ("rustls", "rustls")):
        lines += [twin_line(f"{name} {row['name']} within ±10% of its fixture (unprobed twin), made as a {name} "
                            f"handshake makes it", row["err_fixture"], row["ours"], row["unprobed"])
                  for row in accuracy_rows(data, library) if row["ours"]]
    for library, name in (("boringssl", "BoringSSL"), ("aws-lc", "AWS-LC")):
        for row in accuracy_rows(data, library):
            if not row["ours"]:
                continue
            if row["name"].startswith("server handshake"):
                # A handshake's probes cost it more than their calibrated hits (docs/limits.md): shown.
                lines.append((f"Accuracy: {name} {row['name']}, CPU per handshake against its fixture (unprobed "
                              f"twin; shown, not judged)", twin_text(row["err_fixture"], row["ours"], row["unprobed"]),
                              "–"))
            else:
                lines.append(twin_line(f"{name} {row['name']} within ±10% of its fixture (unprobed twin), in a "
                                       f"handshake", row["err_fixture"], row["ours"], row["unprobed"]))
    return lines


def counter_text(data):
    """The connection counter's cost per connection as one sentence, or None when this run did not time it."""
    c = counter_figures(data)
    if not c:
        return None
    runs = "1 full-handshake run" if c["runs"] == 1 else f"median of {c['runs']} full-handshake runs"
    return (f"{fnum(c['ns_per_conn'], 0)} ns per connection = {fnum(c['ns_per_run'], 0)} ns per run × "
            f"{fnum(c['runs_per_conn'], 2)} runs per target connection (bpf_stats, {runs}) = "
            f"{fpct(c['share_full'], 3, False)} of the CPU of a full handshake, "
            f"{fpct(c['share_keepalive'], 2, False)} of a keep-alive request's, measured in the same run")


def counter_lines(data):
    """The counter has no budget line of its own: its figure, shown beside the lines it is part of."""
    text = counter_text(data)
    return [("Connection counter (accept/accept4/connect tracepoints, attached throughout): what a connection "
             "costs the machine, every process's runs included",
             text or "not measured: no tlsprof run timed its programs", "–" if text else "SKIP")]


def budget_lines(data):
    """(budget line, what was measured, PASS/**FAIL**/SKIP) for every line of the budget."""
    return (overhead_lines(data) + exact_lines(data) + stated_lines(data) + counter_lines(data) + own_cpu_lines(data)
            + memory_lines(data) + serve_lines(data) + time_lines(data) + accuracy_lines(data))
