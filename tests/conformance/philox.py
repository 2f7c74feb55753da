"""Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the Random123
generator), written out, and the keep mask of "dropout" that make_extras.py builds on it: Z[b][hd][i][j] is 1
iff the first output word x0 of counter (j, i, hd, b) and key (seed & 0xffffffff, seed >> 32) is at least
floor(p·2^32), an exact integer. check_philox compares the generator with Random123's known-answer vectors.
"""

import fractions
import math

MASK32 = 0xFFFFFFFF
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85  # the Weyl increments of the key (golden ratio, sqrt(3) - 1)


def philox4x32_10(ctr, key):
    """Random123's philox4x32_R with R = 10: ten rounds, the key bumped between rounds (nine times)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        p0 = PHILOX_M0 * c0  # a 64-bit product: hi and lo words
        p1 = PHILOX_M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
    return c0, c1, c2, c3


PHILOX_KATS = (  # Random123's kat_vectors for philox4x32_10
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32, MASK32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
)


def check_philox():
    for ctr, key, want in PHILOX_KATS:
        got = philox4x32_10(ctr, key)
        if got != want:
            raise AssertionError(f"Philox4x32-10 of ctr {ctr} key {key}: {[hex(x) for x in got]}, "
                                 f"Random123 {[hex(x) for x in want]}")


def threshold(p):
    """floor(p · 2^32) exactly: p is a double, so Fraction(p) is its exact value."""
    return math.floor(fractions.Fraction(p) * 2 ** 32)


def keep_mask(seed, p, B, h, n, m):
    """Z[b][hd][i][j] = 1 iff x0 of Philox4x32-10(ctr (j, i, hd, b), key (seed lo, seed hi)) ≥ floor(p·2^32)."""
    if not (isinstance(seed, int) and 0 <= seed < 2 ** 64):
        raise ValueError(f"a dropout seed is an integer 0 … 2^64 − 1, not {seed!r}")
    if not 0 <= p < 1:
        raise ValueError(f"dropout p must be in [0, 1), not {p!r}")
    t = threshold(p)
    key = (seed & MASK32, seed >> 32)
    return [[[[int(philox4x32_10((j, i, hd, b), key)[0] >= t) for j in range(m)] for i in range(n)]
             for hd in range(h)] for b in range(B)]
