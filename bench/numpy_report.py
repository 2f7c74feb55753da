#!/usr/bin/python3
"""The table of bench/numpy_compare.sh: attn-trace bench's JSON files and numpy_attention.py's, side by
side, with the ratios, issue 14's targets and issue 44's (with, for one that is not met, the arithmetic of
what meeting it would take). Reads only the files named; times nothing.

usage: numpy_report.py --ours FILE... --numpy FILE... [--package NAME=VERSION] [--unset VAR=VALUE...]
                       [--rounds R] [--json OUT]

With --rounds R the files are R rounds in turn (each list R equal parts, in the order run): every figure
is the median over the rounds, and every ratio the median of each round's own ratio, ours and NumPy's
measured minutes apart rather than one before the other.
"""

import argparse
import json
import os
import statistics
import sys

CAUSAL_TARGET = 0.55  # ours flash, causal time ÷ unmasked time, at most
MHA_TARGET = 2.0      # NumPy's multi-head attention time ÷ ours, at least
# Issue 44, unmasked, by thread count: flash's share of the FMA peak measured in the same bench run, and
# NumPy's multi-head attention time ÷ ours (flash), at least; and ours naive at least as fast as NumPy's.
PEAK_SHARE_TARGET = {1: 0.65, 2: 0.60}
LAYER_TARGET = {1: 1.6, 2: 2.0}


def load(paths):
    out = []
    for path in paths:
        with open(path) as f:
            out.append(json.load(f))
    return out


def shape_key(n, d_model, heads):
    return (n, d_model, heads)


def row_key(r):
    """A row's key: its shape, thread count and mask."""
    return (shape_key(r["n"], r["d_model"], r["heads"]), r["threads"], r["mask"])


def row_order(key):
    """The table's order: by shape, unmasked first, then by mask and thread count."""
    shape, threads, mask = key
    return (shape, mask != "none", mask, threads)


def shape_label(n, d_model, heads):
    return f"n={n} d={d_model // heads} h={heads}"


def collect(ours_files, numpy_files, stat):
    """Rows keyed by (shape, threads, mask) with ours and NumPy's figures; `stat` is median or min."""
    rows = {}

    def row(n, d_model, heads, threads, mask):
        r = {"n": n, "d_model": d_model, "heads": heads, "d": d_model // heads, "threads": threads, "mask": mask}
        return rows.setdefault(row_key(r), r)

    for doc in ours_files:
        peak = ((doc.get("machine") or {}).get("fma_peak") or {}).get("gflops")
        for run in doc.get("runs", []):
            if run.get("refused"):
                continue
            r = row(run["n"], run["d_model"], run["heads"], run["threads"], run["mask"])
            seconds = run["attention_s"][stat]
            gflops = run["attention_flops"] / seconds / 1e9 if seconds else None
            r[f"ours_{run['engine']}"] = {
                "attention_s": seconds, "attention_gflops": gflops,
                "total_s": run["total_s"][stat], "kernels": run.get("kernels"),
                "attention_flops": run["attention_flops"], "projection_s": run["projection_s"][stat],
                "projection_flops": run.get("projection_flops"), "fma_peak_gflops": peak,
                "peak_share": gflops / peak if gflops and peak else None,
            }
    for doc in numpy_files:
        for run in doc["runs"]:
            r = row(doc["n"], doc["d_model"], doc["heads"], doc["threads"], run["mask"])
            seconds = run["seconds"][stat]
            if run["kind"] == "mha":
                r["numpy_mha"] = {"total_s": seconds, "attention": run["attention"]}
            else:
                r[f"numpy_{run['kind']}"] = {"attention_s": seconds, "attention_gflops": run["flops"] / seconds / 1e9}
    for r in rows.values():
        flash, naive = r.get("ours_flash"), r.get("ours_naive")
        nps = [r[k]["attention_gflops"] for k in ("numpy_naive", "numpy_tiled") if k in r]
        best = max(nps) if nps else None
        ratios = {}
        if best:
            if flash and flash["attention_gflops"]:
                ratios["flash_vs_best_numpy"] = flash["attention_gflops"] / best
            if naive and naive["attention_gflops"]:
                ratios["naive_vs_best_numpy"] = naive["attention_gflops"] / best
        if naive and naive["attention_gflops"] and "numpy_naive" in r:
            ratios["naive_vs_numpy_naive"] = naive["attention_gflops"] / r["numpy_naive"]["attention_gflops"]
        mha = r.get("numpy_mha")
        if mha and flash:
            ratios["numpy_mha_vs_ours_flash"] = mha["total_s"] / flash["total_s"]
        if mha and naive:
            ratios["numpy_mha_vs_ours_naive"] = mha["total_s"] / naive["total_s"]
        r["ratios"] = ratios
    for (shape, threads, mask), r in rows.items():
        if mask != "causal":
            continue
        plain = rows.get((shape, threads, "none"))
        if plain and "ours_flash" in plain and "ours_flash" in r:
            r["ratios"]["ours_flash_causal_vs_none_time"] = (r["ours_flash"]["attention_s"]
                                                            / plain["ours_flash"]["attention_s"])
    return [rows[k] for k in sorted(rows, key=row_order)]


def merge_rounds(rounds):
    """One row per key from the rows of every round: numbers the median over the rounds that have them, the
    rest as the first round has them; `spread` keeps each ratio's lowest and highest."""
    def median_of(values):
        if all(isinstance(v, dict) for v in values):
            return {k: median_of([v[k] for v in values if k in v]) for k in dict.fromkeys(k for v in values for k in v)}
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return statistics.median(numbers) if numbers and len(numbers) == len(values) else values[0]

    by_key = {}
    for rows in rounds:
        for r in rows:
            by_key.setdefault(row_key(r), []).append(r)
    merged = []
    for k in sorted(by_key, key=row_order):
        r = median_of(by_key[k])
        r["spread"] = {name: [min(x["ratios"][name] for x in by_key[k] if name in x["ratios"]),
                              max(x["ratios"][name] for x in by_key[k] if name in x["ratios"])]
                       for name in r["ratios"]}
        r["rounds"] = len(by_key[k])
        merged.append(r)
    return merged


def spread(r, name):
    """' (rounds: lo–hi)' for a ratio measured in more than one round."""
    lo_hi = (r.get("spread") or {}).get(name)
    if not lo_hi or r.get("rounds", 1) < 2:
        return ""
    return f" (rounds: {lo_hi[0]:.2f}–{lo_hi[1]:.2f})"


def fmt(value, spec, suffix=""):
    return "—" if value is None else format(value, spec) + suffix


def get(r, key, field):
    return r[key][field] if key in r else None


def print_table(rows, header):
    print("\n".join(header))
    print()
    print("Attention alone (Q, K, V given), GFLOP/s: higher is faster")
    cols = ("shape", "mask", "threads", "ours flash", "ours naive", "NumPy naive", "NumPy tiled",
            "flash/NumPy", "naive/NumPy")
    lines = [cols]
    for r in rows:
        lines.append((shape_label(r["n"], r["d_model"], r["heads"]), r["mask"], str(r["threads"]),
                      fmt(get(r, "ours_flash", "attention_gflops"), ".1f"),
                      fmt(get(r, "ours_naive", "attention_gflops"), ".1f"),
                      fmt(get(r, "numpy_naive", "attention_gflops"), ".1f"),
                      fmt(get(r, "numpy_tiled", "attention_gflops"), ".1f"),
                      fmt(r["ratios"].get("flash_vs_best_numpy"), ".2f", "×"),
                      fmt(r["ratios"].get("naive_vs_best_numpy"), ".2f", "×")))
    print_columns(lines)
    print("(x/NumPy: ours over the faster of NumPy's naive and tiled)")
    print()
    print("Multi-head attention (X·W_q, X·W_k, X·W_v, split, attention, merge, ·W_o), seconds: lower is faster")
    cols = ("shape", "mask", "threads", "ours flash", "ours naive", "NumPy", "NumPy's attention",
            "NumPy/ours flash")
    lines = [cols]
    for r in rows:
        lines.append((shape_label(r["n"], r["d_model"], r["heads"]), r["mask"], str(r["threads"]),
                      fmt(get(r, "ours_flash", "total_s"), ".3f"),
                      fmt(get(r, "ours_naive", "total_s"), ".3f"),
                      fmt(get(r, "numpy_mha", "total_s"), ".3f"),
                      get(r, "numpy_mha", "attention") or "—",
                      fmt(r["ratios"].get("numpy_mha_vs_ours_flash"), ".2f", "×")))
    print_columns(lines)
    print()
    print("Issue 14's targets (float32, ours flash)")
    for r in rows:
        where = f"{shape_label(r['n'], r['d_model'], r['heads'])}, {r['threads']} thread(s), {r['mask']}"
        ratios = r["ratios"]
        if "flash_vs_best_numpy" in ratios:
            v = ratios["flash_vs_best_numpy"]
            print(f"  {where}: attention ahead of NumPy's naive and tiled: {v:.2f}× — {verdict(v > 1.0)}")
        if "ours_flash_causal_vs_none_time" in ratios:
            v = ratios["ours_flash_causal_vs_none_time"]
            print(f"  {where}: causal time ÷ unmasked time {v:.2f}, at most {CAUSAL_TARGET} — "
                  f"{verdict(v <= CAUSAL_TARGET)}")
        if "numpy_mha_vs_ours_flash" in ratios:
            v = ratios["numpy_mha_vs_ours_flash"]
            print(f"  {where}: multi-head attention {v:.2f}× faster than NumPy{spread(r, 'numpy_mha_vs_ours_flash')}, "
                  f"at least {MHA_TARGET}× — {verdict(v >= MHA_TARGET)}")
    print_issue44(rows)


def print_issue44(rows):
    """Issue 44's targets, unmasked, and for a layer target not met what the attention would have to reach."""
    print()
    print("Issue 44's targets (float32, no mask; % of the FMA peak bench measured in the same run)")
    for r in rows:
        if r["mask"] != "none" or r["threads"] not in PEAK_SHARE_TARGET:
            continue
        t = r["threads"]
        where = f"{shape_label(r['n'], r['d_model'], r['heads'])}, {t} thread(s)"
        flash, naive = r.get("ours_flash"), r.get("ours_naive")
        if flash and flash.get("peak_share") is not None:
            share, want = flash["peak_share"], PEAK_SHARE_TARGET[t]
            print(f"  {where}: flash at {100 * share:.0f}% of the peak ({flash['fma_peak_gflops']:.1f} GFLOP/s), "
                  f"at least {100 * want:.0f}% — {verdict(share >= want)}")
        ratios = r["ratios"]
        if naive and "naive_vs_numpy_naive" in ratios:
            v = ratios["naive_vs_numpy_naive"]
            print(f"  {where}: naive {v:.2f}× as fast as NumPy's naive{spread(r, 'naive_vs_numpy_naive')}, "
                  f"at least 1× — {verdict(v >= 1.0)}")
        mha = r.get("numpy_mha")
        if flash and mha and "numpy_mha_vs_ours_flash" in ratios:
            v, want = ratios["numpy_mha_vs_ours_flash"], LAYER_TARGET[t]
            print(f"  {where}: multi-head attention {v:.2f}× faster than NumPy"
                  f"{spread(r, 'numpy_mha_vs_ours_flash')}, at least {want}× — {verdict(v >= want)}")
            if v < want and flash.get("fma_peak_gflops"):
                for line in layer_arithmetic(flash, mha["total_s"], want):
                    print(f"      {line}")


def layer_arithmetic(flash, numpy_s, want):
    """What the attention would have to reach for ours to take numpy_s / want in all."""
    peak = flash["fma_peak_gflops"] * 1e9
    budget = numpy_s / want
    lines = [f"{want}× means the whole layer in {budget * 1e3:.0f} ms (NumPy took {numpy_s * 1e3:.0f} ms); "
             f"ours took {flash['total_s'] * 1e3:.0f} ms, {flash['projection_s'] * 1e3:.0f} of them the projections "
             f"and {flash['attention_s'] * 1e3:.0f} the attention ({100 * flash['peak_share']:.0f}% of the peak)"]
    for label, projections in (("with the projections as measured", flash["projection_s"]),
                               ("with the projections at 100% of the peak",
                                flash["projection_flops"] / peak if flash.get("projection_flops") else None)):
        if projections is None:
            continue
        left = budget - projections
        if left <= 0:
            lines.append(f"{label} ({projections * 1e3:.0f} ms): no time is left for the attention at all")
        else:
            need = flash["attention_flops"] / left / peak
            lines.append(f"{label} ({projections * 1e3:.0f} ms): the attention in {left * 1e3:.0f} ms, "
                         f"{100 * need:.0f}% of the peak" + (", more than the machine has" if need > 1 else ""))
    return lines


def busy_warnings(blas):
    """A 2048² product that does not speed up with threads says other work had the cores meanwhile."""
    one = [b["gemm_2048_gflops"] for b in blas if b["threads"] == 1]
    out = []
    for b in blas:
        if one and b["threads"] and b["threads"] > 1 and b["gemm_2048_gflops"] < 0.8 * b["threads"] * max(one):
            out.append(f"NumPy's 2048² product ran {b['gemm_2048_gflops'] / max(one):.2f}× as fast on "
                       f"{b['threads']} threads as on 1: other work probably had the cores during those runs, "
                       f"whose figures (ours' too) are then worth little")
    return out


def verdict(ok):
    return "met" if ok else "NOT met"


def print_columns(lines):
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        cells = [cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths))]
        print("  ".join(cells).rstrip())


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ours", nargs="+", default=[], help="attn-trace bench --json files")
    p.add_argument("--numpy", nargs="+", default=[], help="numpy_attention.py --json files")
    p.add_argument("--package", default=None, help="the OpenBLAS package used, NAME=VERSION")
    p.add_argument("--unset", nargs="*", default=[], metavar="VAR=VALUE",
                   help="variables unset for NumPy's runs, with the value they had (empty: not set)")
    p.add_argument("--stat", choices=("median", "min"), default="median",
                   help="which of each run's repeats to compare: the median (default) or the fastest")
    p.add_argument("--env", nargs="*", default=[], metavar="VAR=VALUE",
                   help="other variables of NumPy's runs worth recording (empty: not set)")
    p.add_argument("--rounds", type=int, default=1,
                   help="the files are this many rounds in turn: medians over the rounds (default 1)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)

    ours, numpy_docs = load(args.ours), load(args.numpy)
    if args.rounds < 1 or len(ours) % args.rounds or len(numpy_docs) % args.rounds:
        p.error(f"--rounds {args.rounds} does not split {len(ours)} + {len(numpy_docs)} files into equal rounds")
    per_ours, per_numpy = len(ours) // args.rounds, len(numpy_docs) // args.rounds
    round_rows = [collect(ours[i * per_ours:(i + 1) * per_ours], numpy_docs[i * per_numpy:(i + 1) * per_numpy],
                          args.stat) for i in range(args.rounds)]
    rows = merge_rounds(round_rows) if args.rounds > 1 else round_rows[0]
    blas = [{"threads": d["threads"], **d["blas"]} for d in numpy_docs]
    ob = next((b["openblas"] for b in blas if b.get("openblas")), None) or {}
    kernels = sorted({v["kernels"] for r in rows for k, v in r.items()
                      if k.startswith("ours_") and v.get("kernels")})
    repeats = sorted({d["repeat"] for d in ours + numpy_docs if "repeat" in d})
    unset = dict(item.split("=", 1) if "=" in item else (item, None) for item in args.unset)
    kept = dict(item.split("=", 1) if "=" in item else (item, None) for item in args.env)
    shown = lambda v: "not set" if v is None else repr(v)  # noqa: E731

    header = [
        f"attn-trace bench (kernels: {', '.join(kernels) or '?'}) against NumPy "
        f"{numpy_docs[0]['numpy'] if numpy_docs else '?'} + {ob.get('config', 'no OpenBLAS').split(' NO_')[0]}",
        f"OpenBLAS: package {args.package or '?'}, core picked: {ob.get('corename', '?')}; "
        f"config: {ob.get('config', '?')}",
        f"library mapped into NumPy's process: {ob.get('library', '?')}",
        "2048² float32 product in NumPy: " + ", ".join(
            f"{t} thread(s) " + "/".join(f"{b['gemm_2048_gflops']:.1f}" for b in blas if b["threads"] == t)
            + " GFLOP/s" for t in dict.fromkeys(b["threads"] for b in blas)),
        "unset for NumPy's runs: " + (", ".join(f"{k} (was {shown(v)})" for k, v in unset.items()) or "—")
        + "".join(f"; {k} {shown(v)}" for k, v in kept.items()),
        f"float32, {'median' if args.stat == 'median' else 'fastest'} of {'/'.join(map(str, repeats))} runs, "
        + (f"{args.rounds} rounds of ours then NumPy's (each figure the median over the rounds, each ratio "
           f"the median of the rounds' own), " if args.rounds > 1 else "")
        + f"{os.cpu_count()} cores; "
        f"NumPy tiled blocks: {', '.join(sorted({str(d['block_q']) + '×' + str(d['block_k']) for d in numpy_docs}))}",
    ]
    print_table(rows, header)
    warnings = busy_warnings(blas)
    for w in warnings:
        print(f"warning: {w}")

    if args.json:
        doc = {
            "format": "attn-trace.numpy-compare", "version": 1,
            "openblas": {"package": args.package, "corename": ob.get("corename"), "config": ob.get("config"),
                         "library": ob.get("library")},
            "stat": args.stat, "unset": unset, "env": kept, "warnings": warnings, "rounds": args.rounds,
            "rows": rows, "round_rows": round_rows if args.rounds > 1 else None, "ours": ours, "numpy": numpy_docs,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
