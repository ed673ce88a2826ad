# SPDX-License-Identifier: Apache-2.0
"""BENCHMARKS.md from the raw data: the prose is the template BENCHMARKS.md.in, this module supplies its figures."""

import os
import re

from . import java, starts, top, wire
from .budget import budget_lines, counter_text
from .common import CLK_TCK, med
from .figures import (accuracy_rows, background_cores, counter_figures, counter_runs, paired, per_request,
                      rss_growth, runs_of, serve_figures, stated_cost, unpaired_spread)
from .fmt import fmed, fnum, fpaired, fpct, frange, table
from .profilers import CONDITIONS, TLSPROF_BUDGET
from .settings import reproduce_command, setting
from .workloads import WORKLOADS

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "BENCHMARKS.md.in")
COMMENT = re.compile(r"\{\{!.*?\}\}\n?", re.S)
BLOCK = re.compile(r"^\{\{#(\w+)\}\}\n(.*?)^\{\{/\1\}\}\n", re.S | re.M)
FIELD = re.compile(r"\{\{(\w+)\}\}")


def _present(v):
    return v is not None and v is not False and not (isinstance(v, (str, list, dict)) and not v)


def fill(template, values):
    """The template with its blocks kept or dropped and its fields filled; a name without a value is an error."""
    def value(name):
        if name not in values:
            raise KeyError(f"{TEMPLATE}: no value for {{{{{name}}}}}")
        return values[name]

    text = COMMENT.sub("", template)
    text = BLOCK.sub(lambda m: m.group(2) if _present(value(m.group(1))) else "", text)
    text = FIELD.sub(lambda m: str(value(m.group(1))), text)
    if "{{" in text:
        raise ValueError(f"{TEMPLATE}: a tag is left unfilled near {text[text.index('{{'):][:40]!r}")
    return text


def unwrap(text):
    """One line per paragraph and per list item, as Markdown renders them: the template is wrapped for its
    readers, the output is not, so that a figure's width never reflows the lines around it in a diff."""
    out, fence = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fence = not fence
        elif (not fence and out and out[-1] and line and not line.startswith(("- ", "#", "|", "<"))
              and not out[-1].startswith(("#", "|", "<", "```"))):
            out[-1] += " " + line.strip()
            continue
        out.append(line)
    return "\n".join(out)


def overhead_table(data, workload):
    unit = "request" if workload == "keepalive" else "handshake"
    rows = []
    for c in data["settings"]["conditions"]:
        rs = runs_of(data, workload, c)
        if not rs:
            continue
        rows.append([
            CONDITIONS[c],
            " / ".join(str(sum(r["profiled_twin"] == t for r in rs)) for t in ("A", "B")),
            fmed([r["cpu_us_per_req_ns"] for r in rs], 1),
            fmed([r["control"]["cpu_us_per_req_ns"] for r in rs], 1),
            fpaired(paired(data, workload, c)),
            fmed([r["rate"] for r in rs], 0),
            fpaired(paired(data, workload, c, "paired_rate"), 1),
            "–" if c == "none" else fmed([r["prof_cpu_load_frac"] * 100 for r in rs], 2),
            "–" if c == "none" else fmed([r.get("prof_cpu_total_ms") for r in rs], 0),
            "–" if c == "none" else fmed([r.get("prof_maxrss_mb") for r in rs], 1),
            "–" if c == "none" else fmed([r.get("prof_live_s") for r in rs], 3),
        ])
    return table(["Condition", "runs on twin A / B", f"profiled twin CPU µs/{unit}", f"control twin CPU µs/{unit}",
                  "paired overhead: median (min…max)", f"profiled twin {unit}s/s",
                  "Δ throughput vs the control twin", "profiler CPU % of a core (during load)",
                  "profiler CPU ms (whole run)", "profiler peak RSS MB", "live after s"], rows)


def probes_row(data, workload, c, rs):
    added = med([r["control"]["cpu_us_per_req_ns"] * r["paired_overhead"] for r in rs])
    ctx = med([r.get("ctx_per_req") for r in rs])
    hits, stepped, cost, trapped, est, notes = None, None, None, None, None, ""
    if c.startswith("tlsprof"):
        hits, stepped = (per_request(data, workload, c, k) for k in ("probe_hits", "probe_stepped_hits"))
        cost = med([r["prof_report"]["probe_cost_us_per_hit"] for r in rs])
        # Raw data from before the trap sampler has none.
        trapped = med([r["prof_report"]["probe_traps"]["cpu_ms"] * 1e3 / r["prof_report"]["probe_hits"]
                       for r in rs if r["prof_report"].get("probe_traps") and r["prof_report"]["probe_hits"]])
        est = med([(r["prof_report"]["probe_overhead_ms"] or 0) * 1e3 / r["requests"] for r in rs])
        stages = sorted({n + ("~" if st.get("sampled") else "")
                         for r in rs for n, st in r["prof_report"]["stages"].items()
                         if st.get("calls") or st.get("cpu_ms")})
        samples = med([r["prof_report"]["samples"] for r in rs])
        live = med([100 * ((r["prof_report"].get("probing") or {}).get("fraction") or 0) for r in rs])
        notes = (f"probes attached {fnum(live, 0)}% of the time; {fnum(samples, 0)} samples/run; "
                 f"stages seen: {', '.join(stages) or '–'} (~: from samples)")
    elif c == "bpftrace":
        calls = {}
        for r in rs:
            for fn, n in (r.get("prof_bpftrace_calls") or {}).items():
                calls.setdefault(fn, []).append(n / r["requests"])
        per = {fn: med(v) for fn, v in calls.items()}
        hits = 2 * sum(per.values())
        notes = "calls/request: " + ", ".join(f"{fn} {v:.2f}" for fn, v in
                                              sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.005)
    elif c == "perf":
        notes = "no probes: a 99 Hz cpu-clock event on the worker"
    implied = added / hits if hits and added is not None and c != "none" else None
    return [WORKLOADS[workload], CONDITIONS[c], fnum(ctx, 2), fnum(hits, 2), fnum(stepped, 2), fnum(added, 1),
            fnum(implied, 2), fnum(cost, 2), fnum(trapped, 2), fnum(est, 2), notes]


def probes_table(data):
    rows = [probes_row(data, w, c, rs) for w in WORKLOADS for c in data["settings"]["conditions"]
            if (rs := runs_of(data, w, c))]
    return table(["Workload", "Condition", "ctx sw/req", "probe hits/req", "of them single-stepped",
                  "added target CPU µs/req",
                  "implied µs/hit", "tlsprof's calibrated µs/hit", "measured in the traps µs/hit",
                  "tlsprof's probe-cost estimate µs/req", "notes"],
                 rows)


def stated_row(data, workload, c):
    """A row of what tlsprof's reports said it cost against what the twins measured; None without both."""
    f = stated_cost(data, workload, c)
    if f is None:
        return None
    ratio = f["stated"] / f["measured"] if f["measured"] > 0 else None
    return [workload, CONDITIONS[c], fnum(TLSPROF_BUDGET[c], 1), fpct(f["probes"], 2, sign=False),
            fpct(f["other"], 2, sign=False), fpct(f["stated"], 2, sign=False), fpct(f["measured"], 2),
            "–" if ratio is None else f"×{ratio:.2f}"]


def stated_table(data):
    rows = [row for w in WORKLOADS for c in data["settings"]["conditions"]
            if c in TLSPROF_BUDGET and (row := stated_row(data, w, c))]
    return table(["Workload", "Condition", "budget %", "stated: probes", "stated: other programs",
                  "stated in all", "twins measured", "stated / measured"], rows)


# The connection counter's programs, as the kernel names them, and what they are attached to.
COUNTER_TRACEPOINTS = {"on_accept4_exit": "syscalls:sys_exit_accept4", "on_accept_exit": "syscalls:sys_exit_accept",
                       "on_connect_exit": "syscalls:sys_exit_connect"}


def counter_values(data):
    """The figures of the connection-counter section; {} when no run timed it (the template drops the section)."""
    c = counter_figures(data)
    if not c:
        return {}
    progs = c["programs"]
    rows = []
    for name, tp in COUNTER_TRACEPOINTS.items():
        p = progs.get(name) or {}
        rows.append([f"`{name}`", f"`{tp}`", p.get("run_cnt", 0),
                     fnum(p["run_time_ns"] / p["run_cnt"], 0) if p.get("run_cnt") else "–",
                     fnum(p["full_cnt"] / p["full_conns"], 2) if p.get("full_conns") else "–"])
    cnt = sum(p["run_cnt"] for p in progs.values())
    full_cnt, conns = sum(p["full_cnt"] for p in progs.values()), sum(r["requests"] for r in counter_runs(data, "full"))
    rows.append(["all three", "", cnt, fnum(sum(p["run_time_ns"] for p in progs.values()) / cnt, 0) if cnt else "–",
                 fnum(full_cnt / conns, 2) if conns else "–"])
    programs = table(["Program", "Tracepoint", "runs (every timed run)", "ns per run",
                      "runs per target connection (full-handshake runs)"], rows)
    runs = [[r["round"], r["condition"], r["profiled_twin"], r["requests"],
             sum(p["run_cnt"] for p in r["counter"].values()), fnum(x["ns_per_run"], 0), fnum(x["runs_per_conn"], 2),
             fnum(x["ns_per_conn"], 0), fnum(r["control"]["cpu_us_per_req_ns"], 1), fpct(x["share_full"], 3, False)]
            for r, x in zip(counter_runs(data, "full"), c["per_run"])]
    per_run = table(["round", "condition", "profiled twin", "target connections (s_time)", "counter runs",
                     "ns per run", "runs per target connection", "ns per target connection",
                     "control twin CPU µs/handshake", "share of a full handshake"], runs)
    return {"counter_line": counter_text(data), "counter_programs_table": programs, "counter_runs_table": per_run,
            "counter_keepalive_us": fnum(c["keepalive_ns"] / 1e3 if c["keepalive_ns"] else None, 1)}


def fixture_table(rows):
    return table(["Operation", "tlsprof", "fixture unprobed", "fixture probed", "hits in its window",
                  "fixture probed − hits", "tlsprof vs unprobed (runs' median)", "vs probed − hits (runs' median)",
                  "calls exact"],
                 [[r["name"], fmed(r["ours"]), fmed(r["unprobed"]), fmed(r["probed"]), fnum(r["hits"], 0),
                   fmed(r["probed_corr"]), fpct(r["err_fixture"]), fpct(r["err_probed"]),
                   "yes" if r["calls_ok"] else "no"] for r in rows])


def accuracy_tables(data):
    rows = accuracy_rows(data)
    libssl = fixture_table(rows)
    speed = table(["Operation", "tlsprof (fixture --as-speed)", "fixture --as-speed unprobed", "openssl speed",
                   "tlsprof vs speed", "tlsprof vs fixture --as-speed (runs' median)",
                   "libssl's way vs speed (fixture unprobed)"],
                  [[r["name"], fmed(r["ours_as_speed"]), fmed(r["fixture_as_speed"]), fmed(r["speed"]),
                    fpct(r["err_speed"]), fpct(r["err_fixture_as_speed"]), fpct(r["libssl_vs_speed"])]
                   for r in rows])
    return libssl, speed


def attach_table(data):
    s, long = data["settings"], data.get("long")
    live = [r["prof_live_s"] for r in data["runs"] if r["condition"] == "tlsprof"]
    live_all = [r["prof_live_s"] for r in data["runs"] if r["condition"] == "tlsprof-all"]
    own = [r["prof_live_own_ms"] for r in data["runs"] if r["condition"].startswith("tlsprof")]
    fx_live = [r["live_s"] for r in data["accuracy"]]
    rows = [
        ["`tlsprof record` start → \"probes live\" (nginx worker, defaults), s", fmed(live, 3), len(live)],
        ["… with --all-probes, s", fmed(live_all, 3), len(live_all)],
        ["… its own figure in that line (attach + calibration), ms", fmed(own, 0), len(own)],
        ["… fixture target, s", fmed(fx_live, 3), len(fx_live)],
        [f"`tlsprof report --json` of a {s['seconds']} s recording, s", fmed(data["report_times_short"], 3),
         len(data["report_times_short"])],
    ]
    if long:
        rows.append([f"`tlsprof report` of the {long['minutes']:g}-minute recording, s",
                     fmed(long["report_times_s"], 3), len(long["report_times_s"])])
    for c in ("bpftrace", "perf"):
        v = [r["prof_live_s"] for r in data["runs"] if r["condition"] == c]
        if v:
            rows.append([f"{c} start → live, s", fmed(v, 3), len(v)])
    return table(["What", "median (min–max)", "n"], rows)


def handshakes_note(rep, clients):
    """What tlsprof's report said of the handshakes, against the count of the target's clients."""
    h, p = rep["handshakes"], rep.get("probing") or {}
    windows = (f"probes attached {100 * (p.get('fraction') or 0):.0f}% of the time and "
               f"{100 * (p.get('cpu_share') or 0):.0f}% of the worker's CPU, in {p.get('windows')} windows")
    if not isinstance(h, dict):
        # Raw data from before the benchmark kept the in-window count and the interval: the report's total alone.
        return f"tlsprof's report: {h} handshakes (`handshakes.total`; {windows})"
    if not h["estimated"]:
        return f"tlsprof counted {h['total']} ({windows}: exact)"
    lo, hi = h["total_ci95"]
    inside = "inside" if lo <= clients <= hi else "**outside**"
    return (f"tlsprof saw {h['observed']} in its probe windows ({windows}) and estimated ≈ {h['total']} "
            f"[{lo}–{hi}] over the recording (95% interval; the clients' count is {inside} it)")


def rss_table(samples, clk_tck):
    """About a dozen of the RSS samples, the last one included."""
    picked = samples[::max(1, len(samples) // 12)]
    if samples and picked[-1] is not samples[-1]:
        picked.append(samples[-1])
    rows = [[f"{int(x['t_s'] // 60)}:{int(x['t_s'] % 60):02d}", fnum(x["rss_mb"]), fnum(x["hwm_mb"]),
             fnum(x["cpu_ticks"] * 1e3 / clk_tck, 0)] for x in picked]
    return table(["elapsed m:ss", "VmRSS MB", "VmHWM MB", "tlsprof CPU ms since live"], rows)


def long_values(long, clk_tck):
    """The figures of the long-recording section; {} without one (the template then drops the section)."""
    if not long:
        return {}
    early, late, slope = rss_growth(long["samples"])
    rep, mine, other = long["report"], long["twin"], long["control"]
    return {
        "long_handshakes": mine["requests"], "long_rate": fnum(mine["rate"], 0),
        "long_seen": handshakes_note(rep, mine["requests"]), "long_kib": f"{long['file_bytes'] / 1024:.0f}",
        "long_cpu_us": fnum(mine["cpu_us_per_req_ns"], 1), "long_control_cpu_us": fnum(other["cpu_us_per_req_ns"], 1),
        "long_control_handshakes": other["requests"], "long_paired": fpct(long["paired_overhead"], 2),
        "long_attach_ms": fnum(long.get("cpu_attach_ms"), 0), "long_cpu_frac": fpct(long["cpu_frac"], 2, False),
        "long_finish_ms": fnum(long.get("cpu_finish_ms"), 0), "long_finish_s": fnum(long.get("finish_s"), 1),
        "long_total_ms": fnum(long["cpu_total_ms"], 0), "long_maxrss": fnum(long["maxrss_mb"]),
        "long_rss_early": fnum(early), "long_rss_late": fnum(late), "long_rss_slope": fnum(slope, 3),
        "long_table": rss_table(long["samples"], clk_tck),
    }


def serve_values(serve, clk_tck):
    """The figures of the continuous-mode section; {} without one (the template then drops the section)."""
    f = serve_figures(serve)
    if not f:
        return {}
    mine, other, final = serve["twin"], serve["control"], serve["final"]
    scrapes, profiles = serve["scrapes"] + [final], serve["profiles"]

    def span(a, b):
        return f"{int(a // 60)}:{int(a % 60):02d}–{int(b // 60)}:{int(b % 60):02d}"

    ends = [x["end_s"] for x in serve["slices"]]
    slices = table(["slice", "elapsed m:ss", "handshakes A / B", "CPU µs/handshake A / B", "paired overhead"],
                   [[i + 1, span(start, end), f"{x['twin']['requests']} / {x['control']['requests']}",
                     f"{fnum(x['twin']['cpu_us_per_req_ns'])} / {fnum(x['control']['cpu_us_per_req_ns'])}",
                     fpct(x["paired_overhead"], 2)]
                    for i, (x, start, end) in enumerate(zip(serve["slices"], [0.0] + ends, ends))])
    return {
        "serve_slices": len(serve["slices"]), "serve_slice_s": serve["slice_s"],
        **{f"serve_{k}": f"{serve['schedule'][k]:g}" for k in ("scrape_every_s", "profile_seconds",
                                                                "first_profile_s", "profile_every_s")},
        "serve_live_s": fnum(serve["live_s"], 2),
        "serve_scrapes": f"{len(scrapes)} scrapes of {fmed([x['bytes'] / 1024 for x in scrapes])} KiB, answered in "
                         f"{fmed([x['fetch_s'] * 1e3 for x in scrapes])} ms",
        "serve_profiles": f"{len(profiles)} profiles of {fmed([x['bytes'] / 1024 for x in profiles])} KiB gzipped, "
                          f"answered in {fmed([x['fetch_s'] * 1e3 for x in profiles], 0)} ms",
        "serve_handshakes": mine["requests"], "serve_rate": fnum(mine["rate"], 0),
        "serve_cpu_us": fnum(mine["cpu_us_per_req_ns"]), "serve_control_handshakes": other["requests"],
        "serve_control_cpu_us": fnum(other["cpu_us_per_req_ns"]), "serve_paired": fpct(f["paired"], 2),
        "serve_slices_paired": fpaired(f["slices"]),
        "serve_counted": fnum(f["handshakes"], 0), "serve_lower": fnum(f["lower"], 0),
        "serve_upper": fnum(f["upper"], 0), "serve_error": fpct(f["error"], 2),
        "serve_inside": "inside" if f["inside"] else "**outside**",
        "serve_connections": fnum(final["connections"], 0), "serve_intervals": fnum(final["intervals"], 0),
        "serve_estimated": fnum(final["estimated_intervals"] or 0, 0), "serve_sign": fnum(f["sign_cpu_s"], 2),
        "serve_lost": fnum(final["lost_events"], 0),
        "serve_monotonic": "never went down" if f["monotonic"] else "**went down**",
        "serve_attach_ms": fnum(serve["cpu_attach_ms"], 0), "serve_cpu_frac": fpct(serve["cpu_frac"], 2, False),
        "serve_total_ms": fnum(serve["cpu_total_ms"], 0), "serve_stop_s": fnum(serve["stop_s"], 2),
        "serve_maxrss": fnum(serve["maxrss_mb"]), "serve_rss_early": fnum(f["rss_early"]),
        "serve_rss_late": fnum(f["rss_late"]), "serve_rss_slope": fnum(f["rss_slope"], 3),
        "serve_slices_table": slices, "serve_table": rss_table(serve["samples"], clk_tck),
    }


def runs_table(data):
    def pair(r, key, digits):
        return f"{fnum(r[key], digits)} / {fnum(r['control'][key], digits)}"

    rows = [[r["round"], r["workload"], r["condition"], r["profiled_twin"], pair(r, "requests", 0),
             pair(r, "rate", 0), pair(r, "cpu_us_per_req_ns", 2), pair(r, "cpu_us_per_req", 2),
             fpct(r["paired_overhead"], 2), fpct(r["paired_overhead_ticks"], 2),
             "–" if r["prof_cpu_load_frac"] is None else fnum(r["prof_cpu_load_frac"] * 100, 2),
             fnum(r.get("prof_maxrss_mb"), 1), fnum(r.get("prof_live_s"), 3),
             pair(r, "vol_ctx_per_req", 3), pair(r, "invol_ctx_per_req", 3),
             fnum(r.get("background_cores"), 2)] for r in data["runs"]]
    return table(["round", "workload", "condition", "profiled twin", "requests", "req/s", "µs/req (schedstat)",
                  "µs/req (stat ticks)", "paired overhead", "paired overhead (ticks)", "profiler CPU %",
                  "profiler RSS MB", "live s", "voluntary ctx sw/req", "involuntary ctx sw/req",
                  "background load, cores"], rows)


def unpaired_text(data, workload):
    lo_hi = unpaired_spread(data, workload)
    n = len(runs_of(data, workload, "none"))
    return f"{frange(lo_hi)} over {n} runs" if lo_hi[0] is not None else f"– ({n} run: it takes two or more)"


def render_section(data, module):
    """One measured section alone (--starts-only, --top-only, --wire-only-bench), as a full run writes it: module is
    starts, top or wire."""
    name = {starts: "starts", top: "top", wire: "wire", java: "java"}[module]
    with open(TEMPLATE) as f:
        template = f.read()
    block = re.search(r"^\{\{#%s_measured\}\}\n(.*?)^\{\{/%s_measured\}\}\n" % (name, name), template, re.S | re.M)
    return unwrap(fill(block.group(1), module.section_values(data)))


def splice(path, section, heading, before="## Connection counter"):
    """The file at `path` with its section under `heading` replaced by `section` (inserted before the section under
    `before`, by default the connection counter's, if it has none): what --starts-only, --top-only and
    --wire-only-bench write, the other sections as they were."""
    with open(path) as f:
        lines = f.read().split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith(heading)), None)
    if start is None:
        start = end = next((i for i, l in enumerate(lines) if l.startswith(before)), len(lines))
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    new = section.strip("\n").split("\n") + [""]
    return "\n".join(lines[:start] + new + lines[end:])


def render(data, template=None):
    s, mach, long, serve = data["settings"], data["machine"], data.get("long"), data.get("serve")
    clk_tck = mach.get("clk_tck", CLK_TCK)
    bg_med, bg_max = background_cores(data)
    libssl_table, speed_table = accuracy_tables(data)
    go_rows, rustls_rows, boring_rows = (accuracy_rows(data, lib) for lib in ("go", "rustls", "boringssl"))
    aws_lc_rows = accuracy_rows(data, "aws-lc")
    values = {
        "kind": "smoke run: checks the harness, not the figures" if s["smoke"] else "full run",
        "started": data.get("started", "?"), "finished": data.get("finished", "?"),
        **{k: mach[k] for k in ("nproc", "cpu", "kernel", "os", "tlsprof", "date")},
        # Raw data from before these were read has none.
        "virtualization": mach.get("virtualization", "not recorded"), "pmu": mach.get("pmu", "not recorded"),
        "tools": "; ".join(mach[k] for k in ("openssl", "nginx", "wrk", "bpftrace", "perf")),
        "clk_tck": clk_tck, "tick_ms": f"{1000 / clk_tck:g}",
        "neighbours": data.get("loadavg_start"), "loadavg_start": data.get("loadavg_start"),
        "loadavg_end": data.get("loadavg_end", "?"), "steal": fpct(data.get("steal_frac"), 1, False),
        "background": f"{fnum(bg_med, 2)} ({fnum(bg_max, 2)})",
        "reproduce": reproduce_command(s), "rounds": s["rounds"], "conditions": ", ".join(s["conditions"]),
        "seconds": s["seconds"], "full_clients": s["full_clients"],
        "long_minutes": f"{long['minutes'] if long else s['long_minutes']:g}",
        "serve_minutes": f"{serve['minutes'] if serve else setting(s, 'serve_minutes'):g}",
        "worker_cpu": data.get("worker_cpu"),
        "unpaired_full": unpaired_text(data, "full"), "unpaired_keepalive": unpaired_text(data, "keepalive"),
        "paired_none_full": fpaired(paired(data, "full", "none")),
        "paired_none_keepalive": fpaired(paired(data, "keepalive", "none")),
        "skipped": "; ".join(data.get("skipped") or []),
        "budget_table": table(["Budget line", "Measured (medians)", "Result"], budget_lines(data)),
        "overhead_full_table": overhead_table(data, "full"),
        "overhead_keepalive_table": overhead_table(data, "keepalive"),
        "ecdsa": bool(runs_of(data, "ecdsa_full", "none")),
        "overhead_ecdsa_table": overhead_table(data, "ecdsa_full"),
        "go": bool(runs_of(data, "go_full", "none")),
        "overhead_go_table": overhead_table(data, "go_full"),
        "rustls": bool(runs_of(data, "rustls_full", "none")),
        "overhead_rustls_table": overhead_table(data, "rustls_full"),
        "boring": bool(runs_of(data, "boring_full", "none")),
        "overhead_boring_table": overhead_table(data, "boring_full"),
        "aws_lc": bool(runs_of(data, "aws_lc_full", "none")),
        "overhead_aws_lc_table": overhead_table(data, "aws_lc_full"),
        "accuracy_go": any(r["ours"] for r in go_rows),
        "accuracy_go_table": fixture_table(go_rows),
        "accuracy_rustls": any(r["ours"] for r in rustls_rows),
        "accuracy_rustls_table": fixture_table(rustls_rows),
        "accuracy_boringssl": any(r["ours"] for r in boring_rows),
        "accuracy_boringssl_table": fixture_table(boring_rows),
        "accuracy_aws_lc": any(r["ours"] for r in aws_lc_rows),
        "accuracy_aws_lc_table": fixture_table(aws_lc_rows),
        # Raw data from before wrk's errors were checked has no counts, and no such claim.
        "wrk_checked": all("socket_errors" in r for r in data["runs"] if r["workload"] == "keepalive"),
        "probes_table": probes_table(data),
        "stated_table": stated_table(data),
        "accuracy_repeats": s.get("accuracy_repeats", 1),
        "accuracy_libssl_table": libssl_table, "accuracy_speed_table": speed_table,
        "attach_table": attach_table(data),
        "counter": bool(counter_figures(data)), **counter_values(data),
        **starts.section_values(data),
        **top.section_values(data),
        **wire.section_values(data),
        **java.section_values(data),
        "long": long, **long_values(long, clk_tck),
        "serve": serve, **serve_values(serve, clk_tck),
        "runs_table": runs_table(data),
    }
    if template is None:
        with open(TEMPLATE) as f:
            template = f.read()
    return unwrap(fill(template, values))
