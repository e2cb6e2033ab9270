#!/usr/bin/env python3
"""Writes the seed corpus of the capi_ops fuzz target (fuzz/seeds/capi_ops/), one small
program per file, in the byte encoding of fuzz_targets/capi_ops.rs (op = byte % 20, then its
argument bytes; a missing byte reads as 0; ops 16-19 are the queue ops of queue_ops.rs). Run
from the repository root after changing the encoding; libFuzzer takes it from there. (The
committed regression inputs beside these are not written here: when the op count changed from
16 to 20 their op bytes were rewritten to `byte % 16`, the same programs.)"""
import os

CREATE, SUBMIT, BATCH, SHUTDOWN, DESTROY, WAIT, LATCH, PROBE, MISC, BCREATE, BSUBMIT, BEND = 0, 2, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15
PLAIN, PARENT, FORK_JOIN = 0, 2, 3  # indices into the kind choices
QINIT, QSUBMIT, QCANCEL, QMISC = 16, 17, 18, 19
Q_PLAIN, Q_BLOCK, Q_NESTED = 0, 2, 3  # indices into the queue job kind choices
# pool_queue_submit; pool_queue_submit_timeout with 0; with 100 us, 1 ms, no limit, INT64_MIN
SUB, T0, T100US, T1MS, TINF, TMIN = (0, 0), (2, 0), (3, 0), (3, 1), (3, 2), (3, 3)
# Q_NESTED's arg bits: a blocking child, the refused timed submit has no limit, the child
# goes through a zero timeout, the child is cancelled at once; 0x80: the job frees itself
N_BLOCK, N_INF, N_ZERO, N_CANCEL, SELF_FREE = 1, 4, 8, 16, 0x80


def create(slot, threads_idx):
    # op, slot, threads, stack, spins, NULL config (rare), a `pool_create(config, NULL)` probe (rare)
    return [CREATE, slot, threads_idx, 0, 0, 0, 0]


def submit(slot, kind=PLAIN, b=0, via=0):
    # via 2 (pool_submit_after) reads its delay (0) too
    return [SUBMIT, slot, 0, kind, b, 0, 0, via] + ([0] if via == 2 else [])


def batch(slot, n, null_at=None, cycle_to=None):
    out = [BATCH, slot, 0, n] + [1, 0] * n
    if n:  # an empty batch reads no more bytes
        out += [3, null_at] if null_at is not None else [0]
        out += [7, cycle_to] if cycle_to is not None else [0]
    return out


def qinit(q, slot, width, bound=0, cancel=True):
    """A queue in slot q on pool slot `slot` (which must hold a pool); width 255 = SIZE_MAX."""
    return [QINIT, q, slot, 0, width, bound, 0 if cancel else 1, 0]


def qinit_on(q, t, width, bound=0, cancel=True):
    """A queue in slot q on the queue in slot t (pool_queue_init_target): the cancel byte's
    bits 1-2 are 1 and bits 3-4 name the target slot; the pool slot byte is not used."""
    return [QINIT, q, 0, 0, width, bound, (t << 3) | 2 | (0 if cancel else 1), 0]


def qsubmit(q, *jobs):
    """Up to three jobs: (kind, arg, how) with how one of SUB, T0, T100US, ..."""
    out = [QSUBMIT, q, len(jobs) - 1]
    for kind, arg, (how, t) in jobs:
        out += [kind, arg, 0, 0, how, t]
    return out


def qcancel(q, what, pick=0):
    """what: 0-2 a job of the queue (the pick-th), 3 one of another queue, 4 never submitted
    and NULL, 5 a finished one."""
    return [QCANCEL, q, what, pick]


def qwidth(q, width):
    return [QMISC, q, 0, width]


def qsettle(q, n):
    """Waits until n (1-4) tasks of the queue run (at most 2 ms)."""
    return [QMISC, q, 2, n - 1]


def qwait(q):
    return [QMISC, q, 3]


def qdestroy(q):
    return [QMISC, q, 5]


def qburst(q, k, pattern):
    """k (2-5) plain jobs, then those whose bit is set in pattern cancelled, newest first."""
    return [QMISC, q, 6, k - 2, pattern]


QNULL = [QMISC, 0, 7]
P, B, LONG = (Q_PLAIN, 0, SUB), (Q_BLOCK, 5, SUB), (Q_BLOCK, 12, SUB)  # blocking 220 us, 1.17 ms

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
    "misc": [PROBE, 2, 1, 0, 0, 0, 0]  # a valid config: then 0 = shut down and submit
    + [PROBE, 3, 0, 0, 0, 0]  # out of range: no more bytes
    + [PROBE, 0, 6, 0, 0, 0]
    + [MISC, 0, 0, 8, MISC, 0, 1, 0xFF, 0xFF, 0xFF, 0x7F]
    + sum(([MISC, 1, k] for k in range(24)), []),
    # A serial queue on a pool of 4, with tasks that block briefly: strictly in order.
    "queue-serial": create(0, 5)
    + qinit(0, 0, 1)
    + qsubmit(0, P, B, P) * 3
    + qsettle(0, 1)
    + qcancel(0, 0, 4)
    + qwait(0)
    + qcancel(0, 5)
    + qsubmit(0, B, (Q_PLAIN, SELF_FREE, T0), P)
    + qdestroy(0)
    + [DESTROY, 0, 0],
    # Width 4, narrowed to 1 while blockers run, suspended, cancels, widened again; a second
    # queue on the same pool, and a cancel across queues.
    "queue-widths": create(0, 5)
    + qinit(0, 0, 4, 0, cancel=False)
    + qinit(1, 0, 2, 3)
    + qsubmit(0, LONG, LONG, LONG) * 2
    + qsettle(0, 4)  # blockers running
    + qwidth(0, 1)  # narrowed under them
    + qsubmit(0, P, B, P)  # these start one at a time, after every blocker finished
    + qwait(0)
    + qsubmit(1, B, P)
    + qwidth(0, 0)
    + qsubmit(0, P, P, P)
    + qcancel(0, 1, 1)
    + qcancel(0, 3)
    + qcancel(1, 3, 1)
    + qwidth(0, 5)  # above max_threads: invalid
    + qwidth(0, 255)
    + qwidth(0, 3)
    + qwait(0)
    + qwait(1)
    + [DESTROY, 0, 0],
    # Suspended and bounded: FULL at the bound, timed submits that time out, cancels from
    # the list's tail, middle and head, destroy handing the rest to the cancel callback.
    "queue-suspended-bounded": create(1, 2)
    + qinit(2, 1, 0, 2)
    + qsubmit(2, P, P, P)
    + qsubmit(2, (Q_PLAIN, 0, T100US), (Q_PLAIN, 0, T1MS), (Q_PLAIN, 0, TINF))
    + qcancel(2, 0, 1)
    + qinit(3, 1, 0, 0, cancel=False)
    + qburst(3, 5, 0b10101)
    + qburst(3, 4, 0b0110)
    + qdestroy(2)
    + qwidth(3, 1)
    + qwait(3)
    + qdestroy(3)
    + [DESTROY, 0, 1],
    # Tasks that call their own queue from inside (wait, destroy, timed submit: refused),
    # submit children to it and cancel some; then the pool shuts down under the queue.
    "queue-nested": create(0, 5)
    + qinit(0, 0, 2, 0)
    + qsubmit(0, (Q_NESTED, 0, SUB), (Q_NESTED, N_BLOCK | N_INF, SUB), (Q_NESTED, N_ZERO | N_CANCEL, T0))
    + qsubmit(0, (Q_NESTED, N_CANCEL | SELF_FREE, SUB), (Q_NESTED, N_INF | N_ZERO, TINF))
    + qwait(0)
    + qinit(1, 0, 1, 1)
    + qsubmit(1, (Q_NESTED, N_BLOCK, SUB), (Q_NESTED, 0, SUB), (Q_NESTED, N_CANCEL, SUB))
    + qsubmit(0, (Q_NESTED, N_BLOCK, SUB), B)
    + qsettle(0, 2)
    + [SHUTDOWN, 0, 0]
    + qsubmit(0, P)
    + [DESTROY, 0, 0],
    # A suspended queue on a pool that shuts down: its tasks wait; a widening is refused
    # (SHUTDOWN, the width set), submits are refused, and destroy runs the tasks (no cancel
    # callback) on the driver's thread, in order.
    "queue-shutdown-suspended": create(1, 3)
    + qinit(1, 1, 0, 3, cancel=False)
    + qsubmit(1, P, B, (Q_NESTED, 0, SUB))
    + [SHUTDOWN, 0, 1]
    + qsubmit(1, P)
    + qwidth(1, 2)
    + qsubmit(1, P, P)
    + qcancel(1, 0, 0)
    + QNULL
    + [DESTROY, 0, 1],
    # Target queues (libuv's slow-I/O cap): a width-2 queue on a width-4 one; its tasks wait
    # behind 4 blockers in the target's list and are cancelled; a bounded target refused; a
    # drop while the target is suspended (its runner taken back); destroying a target with a
    # queue on it (BUSY, then the queue first); nested calls, waits, and a pool shutdown under
    # both.
    "queue-target": create(0, 5)
    + qinit(0, 0, 4, 0, cancel=False)
    + qinit_on(1, 0, 2)
    + qsubmit(0, LONG, LONG, LONG)
    + qsubmit(0, LONG)
    + qsettle(0, 4)
    + qsubmit(1, P, B, P)
    + qcancel(1, 0, 0)
    + qcancel(1, 1, 1)
    + qinit(2, 0, 1, 2)
    + qinit_on(3, 2, 1)  # a bounded target: invalid
    + qwidth(0, 0)
    + qsubmit(1, P, P)
    + qwidth(1, 1)
    + qdestroy(1)
    + qinit_on(1, 0, 2, cancel=False)
    + qsubmit(1, B, B, P)
    + qdestroy(0)
    + qinit(0, 0, 2)
    + qinit_on(1, 0, 1)
    + qsubmit(1, (Q_NESTED, 0, SUB), (Q_NESTED, N_BLOCK, SUB), P)
    + qsubmit(0, B, P)
    + qwait(1)
    + qwait(0)
    + qsubmit(1, P, B)
    + [SHUTDOWN, 0, 0]
    + qsubmit(1, P)
    + qwidth(0, 3)
    + qsubmit(1, P)
    + [DESTROY, 0, 0],
    # NULL and out-of-range arguments to every pool_queue_* entry point.
    "queue-null": qsubmit(0, P) + qcancel(0, 0) + qwidth(0, 1) + qwait(0) + QNULL
    + create(0, 1)
    + qinit(0, 0, 2)  # width 2 on 1 thread: invalid
    + qinit(0, 0, 255)
    + qinit(0, 0, 1)
    + QNULL
    + qcancel(0, 4)
    + [DESTROY, 0, 0],
}

if __name__ == "__main__":
    out = "fuzz/seeds/capi_ops"
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        assert all(0 <= b < 256 for b in data), name
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(data))
    print(f"wrote {len(SEEDS)} seeds to {out}")
