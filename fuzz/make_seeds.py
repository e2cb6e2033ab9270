#!/usr/bin/env python3
"""Writes the seed corpus of the capi_ops fuzz target (fuzz/seeds/capi_ops/), one small
program per file, in the byte encoding of fuzz_targets/capi_ops.rs (op = byte % 16, then its
argument bytes; a missing byte reads as 0). Run from the repository root after changing the
encoding; libFuzzer takes it from there."""
import os

CREATE, SUBMIT, BATCH, SHUTDOWN, DESTROY, WAIT, LATCH, PROBE, MISC, BCREATE, BSUBMIT, BEND = 0, 2, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15
PLAIN, PARENT, FORK_JOIN = 0, 2, 3  # indices into the kind choices


def create(slot, threads_idx):
    return [CREATE, slot, threads_idx, 0, 0, 0]


def submit(slot, kind=PLAIN, b=0, via=0):
    return [SUBMIT, slot, 0, kind, b, 0, 0, via]


def batch(slot, n, null_at=None, cycle_to=None):
    out = [BATCH, slot, 0, n] + [1, 0] * n
    if n:  # an empty batch reads no more bytes
        out += [3, null_at] if null_at is not None else [0]
        out += [7, cycle_to] if cycle_to is not None else [0]
    return out


SEEDS = {
    "basic": create(0, 2) + submit(0) * 3 + [WAIT, 0] + [SHUTDOWN, 0, 0] * 2 + [DESTROY, 0, 0],
    "nested": create(0, 5)
    + submit(0, PARENT, 0x85)
    + submit(0, PARENT, 13)
    + submit(0, PARENT, 22, via=1)
    + submit(0, FORK_JOIN, 4, via=2)
    + [SHUTDOWN, 0, 0, DESTROY, 0, 0],
    "batches": create(1, 1)
    + batch(1, 6)
    + batch(1, 3, null_at=1)
    + batch(1, 3, cycle_to=0)
    + batch(1, 0)
    + [WAIT, 1, DESTROY, 0, 1],
    "latch": create(0, 3)
    + [LATCH, 0, 0, 0, 5, 2, 0, 1, 0, 1, 0, 3, 0]
    + [LATCH, 7, 3, 1, 0, 1, 0, 0, 1]
    + [SHUTDOWN, 0, 0]
    + [LATCH, 0, 0, 0, 2, 1, 0, 1, 0, 1],
    "blocking": [BCREATE, 2, 2, 0, 0]
    + [BSUBMIT, 0, 3] + [0, 0, 0, 0] + [0, 0, 2, 0] + [0, 1, 0, 0] + [0, 0, 3, 0]
    + [BEND, 1, 1] * 2
    + [BSUBMIT, 0, 0, 0, 0, 0, 0]
    + [BEND, 1, 0, BEND, 0],
    "misc": [PROBE, 2, 1, 0, 0, 0]
    + [PROBE, 3, 0, 0, 0]  # out of range: no more bytes
    + [PROBE, 0, 6, 0, 0]
    + [MISC, 0, 0, 8, MISC, 0, 1, 0xFF, 0xFF, 0xFF, 0x7F]
    + sum(([MISC, 1, k] for k in range(24)), []),
}

if __name__ == "__main__":
    out = "fuzz/seeds/capi_ops"
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        assert all(0 <= b < 256 for b in data), name
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(data))
    print(f"wrote {len(SEEDS)} seeds to {out}")
