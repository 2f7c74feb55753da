"""`attn-trace scaling --json -` recomputed from scratch (docs/cli.md, "scaling").

The generator (SplitMix64) and the normal sampler (Box-Muller, cosine then sine) are written again
here with numpy, from their definitions in src/ops/random.hpp and src/lessons/scaling.hpp, and every
figure of the JSON is recomputed: the numbers must agree to 1e-12 relative. Then the statistics the experiment is about,
within bounds that a correct run misses with a tiny probability:

- var(q.k) ~ d_k and var(q.k / sqrt(d_k)) ~ 1 within 20% at N = 1000 (the relative standard error
  of a variance of N normal-ish values is about sqrt(2/N) = 4.5%; at d_k = 1 the scores are a
  product of two normals, whose variance estimate is noisier: sqrt(8/N) = 9%);
- the scaled mean of s(1-s) is at most (1 - 1/N)/N and above 0.5/N: never near 0.25;
- the scaled softmax at d_k >= 64 gives no sample more than 0.1 of the weight;
- the raw softmax at d_k = 1024 puts more than half its weight on one sample, and its mean
  s(1-s) is below half the scaled one.

usage: check_scaling.py path/to/attn-trace
"""

import json
import subprocess
import sys

import numpy as np

BIN = sys.argv[1]
MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
GAMMA = 0x9E3779B97F4A7C15
failures = []


def splitmix64(seed, count, start):
    """Outputs start .. start+count-1 of SplitMix64(seed): output i mixes state seed + (i+1)*GAMMA."""
    i = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + i * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def normals(seed, count):
    """The first `count` normals (count even): u in (0, 1] from the top 53 bits plus one."""
    u = ((splitmix64(seed, count, 0) >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0**-53
    u1, u2 = u[0::2], u[1::2]
    radius = np.sqrt(-2.0 * np.log(u1))
    angle = 2.0 * np.pi * u2
    z = np.empty(count)
    z[0::2] = radius * np.cos(angle)
    z[1::2] = radius * np.sin(angle)
    return z


def mean_grad(x):
    e = np.exp(x - x.max())
    top = int(np.argmax(x))
    others = np.delete(e, top).sum()  # 1 - s of the largest weight, without cancelling
    l = e[top] + others
    s = e / l
    one_minus = 1.0 - s
    one_minus[top] = others / l
    return float(np.mean(s * one_minus)), float(s.max())


def grad_norm(x, v, factor):
    """‖∂L/∂z‖ for L = Σ softmax(z)·v, z = x·factor: the softmax's Jacobian applied to v, written out."""
    y = x * factor
    e = np.exp(y - y.max())
    s = e / e.sum()
    jacobian = np.diag(s) - np.outer(s, s)  # formed here on purpose: an independent check of s ⊙ (v − s·v)
    return float(np.linalg.norm(jacobian @ v))


def expected(d_ks, n, seed):
    v = normals((seed + 1) % 2**64, n + n % 2)[:n]
    total = sum(2 * n * d for d in d_ks)
    z = normals(seed, total)  # 2·N·d_k per d_k: always even, whole Box-Muller pairs
    at, rows = 0, []
    for d in d_ks:
        q = z[at : at + n * d].reshape(n, d)
        k = z[at + n * d : at + 2 * n * d].reshape(n, d)
        at += 2 * n * d
        raw = np.zeros(n)
        for c in range(d):  # in order of c, as the C++ loop sums
            raw += q[:, c] * k[:, c]
        scaled = raw / np.sqrt(d)
        raw_grad, raw_max = mean_grad(raw)
        scaled_grad, scaled_max = mean_grad(scaled)
        rows.append({"d_k": d, "raw_var": float(np.var(raw)), "scaled_var": float(np.var(scaled)),
                     "raw_mean_grad": raw_grad, "scaled_mean_grad": scaled_grad,
                     "raw_max_weight": raw_max, "scaled_max_weight": scaled_max,
                     "raw_grad_norm": grad_norm(raw, v, 1.0), "scaled_grad_norm": grad_norm(raw, v, 1 / np.sqrt(d))})
    return rows


def check(ok, what):
    if not ok:
        failures.append(what)


def run(args):
    out = subprocess.run([BIN, "scaling", "--json", "-", *args], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0 and out.stderr == "", f"scaling {args}: exit {out.returncode}, stderr {out.stderr!r}")
    return json.loads(out.stdout)


def compare(doc, d_ks, n, seed):
    label = f"d_k {d_ks}, N {n}, seed {seed}"
    check(doc["format"] == "attn-trace.scaling" and doc["version"] == 1, f"{label}: format {doc.get('format')}")
    check(doc["samples"] == n and doc["seed"] == seed, f"{label}: samples {doc['samples']}, seed {doc['seed']}")
    check([r["d_k"] for r in doc["rows"]] == d_ks, f"{label}: rows for d_k {[r['d_k'] for r in doc['rows']]}")
    for got, want in zip(doc["rows"], expected(d_ks, n, seed)):
        for key, value in want.items():
            g = got[key]
            # the gradient norms: s ⊙ (v − s·v) against the Jacobian's product cancel differently when
            # the softmax saturates (s near 1), so they agree to 1e-9, not 1e-12
            tol = 1e-9 if key.endswith("grad_norm") else 1e-12
            if abs(g - value) > tol * abs(value):
                failures.append(f"{label}: d_k {want['d_k']} {key}: attn-trace {g!r}, numpy {value!r}")


# The defaults, as the docs show them.
default = run([])
compare(default, [1, 16, 64, 256, 1024], 1000, 0)
n = 1000
for r in default["rows"]:
    d = r["d_k"]
    check(abs(r["raw_var"] / d - 1) < 0.2, f"d_k {d}: raw_var {r['raw_var']} not within 20% of {d}")
    check(abs(r["scaled_var"] - 1) < 0.2, f"d_k {d}: scaled_var {r['scaled_var']} not within 20% of 1")
    check(0.5 / n < r["scaled_mean_grad"] <= (1 - 1 / n) / n,
          f"d_k {d}: scaled_mean_grad {r['scaled_mean_grad']} not in (0.5/N, (1 - 1/N)/N]")
    check(r["raw_mean_grad"] <= (1 - 1 / n) / n, f"d_k {d}: raw_mean_grad {r['raw_mean_grad']} above (1 - 1/N)/N")
last = default["rows"][-1]
check(last["raw_max_weight"] > 0.5, f"d_k 1024: raw_max_weight {last['raw_max_weight']}, expected > 0.5")
check(last["raw_mean_grad"] < last["scaled_mean_grad"] / 2,
      f"d_k 1024: raw_mean_grad {last['raw_mean_grad']} not below half of scaled {last['scaled_mean_grad']}")
check(last["raw_grad_norm"] < last["scaled_grad_norm"] / 2,
      f"d_k 1024: raw_grad_norm {last['raw_grad_norm']} not below half of scaled {last['scaled_grad_norm']}")
for r in default["rows"][2:]:  # d_k >= 64: scores close to normal, the largest of 1000 about 3.2 sd out
    check(r["scaled_max_weight"] < 0.1, f"d_k {r['d_k']}: scaled_max_weight {r['scaled_max_weight']}, expected < 0.1")

# Another seed (the largest), another N, and d_k in no particular order.
compare(run(["--d-k", "3,100,7", "--samples", "51", "--seed", "18446744073709551615"]), [3, 100, 7], 51,
        18446744073709551615)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("scaling: every figure agrees with numpy and with the statistics")
