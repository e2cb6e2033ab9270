/*
 * demo.c: a real workload on the pool from C (`make demo`).
 *
 * Parallel map + reduce over 32M uint32 values (128 MiB):
 *   map:    y = mix(x), a 64-bit hash of each value (a few multiplies: compute-bound);
 *   reduce: the exact 128-bit sum of x*x, and the sum of the hashes (mod 2^64).
 * Integer math, so the result does not depend on how the work is split: the parallel
 * results must equal the sequential reference bit for bit.
 *
 * The array is cut into chunks; each chunk is a host struct that embeds a `struct task`
 * (not as its first member) and is recovered with container_of in the callback. Completion:
 * a C11 atomic counter of chunks left; the task that takes it to zero signals a condition
 * variable the main thread waits on (with a 60 s watchdog).
 *
 * Runs, each timed as the best of 3:
 *   sequential   a plain loop on the main thread (the reference result);
 *   pool(1)      a pool with max_threads = 1;
 *   pool(N)      a pool with the default max_threads (one per CPU);
 *   global       the global pool, all chunks in one pool_submit_batch.
 * Prints time, elements/s and the speed-up over the sequential loop and over pool(1).
 * Exits non-zero if any result differs from the reference.
 *
 * Env: POOL_DEMO_N (elements, default 33554432), POOL_TEST_SCALE (multiplies it; for
 * valgrind), POOL_DEMO_REPS (default 3).
 *
 * Build: cc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude examples/c/demo.c
 *          target/release/libpool.a -lpthread -ldl -lm -o build/demo
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"

#define container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define CHUNK_ELEMS ((size_t)1 << 16)   /* 64 Ki elements = 256 KiB per task */

/* ---- the computation ---- */

struct result {
    uint64_t sq_lo, sq_hi;  /* exact sum of x*x as a 128-bit number */
    uint64_t hash_sum;      /* sum of mix(x) mod 2^64 */
};

static inline uint64_t mix(uint64_t z)
{
    /* splitmix64's finalizer, twice: ~10 integer ops per element */
    z += 0x9E3779B97F4A7C15u;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static void result_add(struct result *acc, const struct result *r)
{
    uint64_t lo = acc->sq_lo + r->sq_lo;
    acc->sq_hi += r->sq_hi + (lo < acc->sq_lo);
    acc->sq_lo = lo;
    acc->hash_sum += r->hash_sum;
}

static void compute(const uint32_t *data, size_t n, struct result *out)
{
    uint64_t lo = 0, hi = 0, h = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        uint64_t x = data[i];
        uint64_t sq = x * x;      /* < 2^64: exact */
        lo += sq;
        hi += lo < sq;            /* carry */
        h += mix(x);
    }
    out->sq_lo = lo;
    out->sq_hi = hi;
    out->hash_sum = h;
}

static int result_eq(const struct result *a, const struct result *b)
{
    return a->sq_lo == b->sq_lo && a->sq_hi == b->sq_hi && a->hash_sum == b->hash_sum;
}

/* ---- one parallel run: chunks embedding a task, a counter, a condition ---- */

struct run {
    atomic_size_t remaining;   /* chunks not finished yet */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;                  /* under lock */
};

struct chunk {
    const uint32_t *data;
    size_t len;
    struct result result;
    struct task task;          /* embedded, not first: recovered with container_of */
    struct run *run;
};

static void chunk_run(struct task *t)
{
    struct chunk *c = container_of(t, struct chunk, task);
    struct run *run = c->run;
    compute(c->data, c->len, &c->result);
    /* acq_rel: the last decrement sees every chunk's result; the mutex hands it to main */
    if (atomic_fetch_sub_explicit(&run->remaining, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_lock(&run->lock);
        run->done = 1;
        pthread_cond_signal(&run->cond);
        pthread_mutex_unlock(&run->lock);
    }
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits for the run's condition; after 60 s prints FAIL and exits (a lost wake-up). */
static void wait_run(struct run *run, size_t nchunks)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&run->lock);
    while (!run->done) {
        int rc = pthread_cond_timedwait(&run->cond, &run->lock, &deadline);
        if (rc == ETIMEDOUT && !run->done) {
            printf("FAIL: watchdog: %lu of %lu chunks still not done after 60 s\n",
                   (unsigned long)atomic_load(&run->remaining), (unsigned long)nchunks);
            exit(2);
        }
    }
    pthread_mutex_unlock(&run->lock);
}

/*
 * Runs the chunks on `pool` (NULL: the global pool as one batch) and returns the combined
 * result and the elapsed time. Returns 0 on success.
 */
static int run_parallel(struct pool *pool, struct chunk *chunks, size_t nchunks,
                        struct run *run, struct result *out, double *seconds)
{
    size_t i;
    double t0;
    int rc = POOL_OK;
    run->done = 0;
    atomic_store(&run->remaining, nchunks);
    for (i = 0; i < nchunks; i++) {
        chunks[i].run = run;
        chunks[i].task.callback = chunk_run;
        chunks[i].task.next = (pool == NULL && i + 1 < nchunks) ? &chunks[i + 1].task : NULL;
    }
    t0 = now_sec();
    if (pool == NULL) {
        rc = pool_submit_batch(&chunks[0].task);
    } else {
        for (i = 0; i < nchunks && rc == POOL_OK; i++)
            rc = pool_submit_to(pool, &chunks[i].task);
    }
    if (rc != POOL_OK) {
        printf("FAIL: submit: %s\n", pool_status_str(rc));
        return 1;
    }
    wait_run(run, nchunks);
    *seconds = now_sec() - t0;
    memset(out, 0, sizeof *out);
    for (i = 0; i < nchunks; i++)
        result_add(out, &chunks[i].result);
    return 0;
}

static void print_result(const char *name, const struct result *r)
{
    printf("  %-11s sum(x^2) = 0x%016llx%016llx  sum(mix(x)) = 0x%016llx\n", name,
           (unsigned long long)r->sq_hi, (unsigned long long)r->sq_lo,
           (unsigned long long)r->hash_sum);
}

int main(void)
{
    size_t n = (size_t)1 << 25, nchunks, i;
    int reps = 3, rep, passed = 0, failed = 0, c;
    const char *s;
    double scale = 1.0;
    uint32_t *data;
    struct chunk *chunks;
    struct run run;
    struct result ref, r;
    double t_seq = 1e30, t0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t state = 0x12345678u;

    if ((s = getenv("POOL_DEMO_N")) != NULL && strtoull(s, NULL, 10) > 0)
        n = (size_t)strtoull(s, NULL, 10);
    if ((s = getenv("POOL_TEST_SCALE")) != NULL && strtod(s, NULL) > 0.0)
        scale = strtod(s, NULL);
    n = (size_t)((double)n * scale);
    if (n < 1000)
        n = 1000;
    if ((s = getenv("POOL_DEMO_REPS")) != NULL && atoi(s) > 0)
        reps = atoi(s);

    nchunks = (n + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
    data = malloc(n * sizeof *data);
    chunks = calloc(nchunks, sizeof *chunks);
    if (data == NULL || chunks == NULL) {
        printf("FAIL: out of memory for %lu elements\n", (unsigned long)n);
        return 1;
    }
    for (i = 0; i < n; i++) { /* xorshift32: deterministic input */
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        data[i] = state;
    }
    for (i = 0; i < nchunks; i++) {
        chunks[i].data = data + i * CHUNK_ELEMS;
        chunks[i].len = (i + 1 < nchunks) ? CHUNK_ELEMS : n - i * CHUNK_ELEMS;
    }
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.cond, NULL);

    printf("pool demo: map+reduce over %lu uint32 (%.0f MiB) in %lu chunks of %lu, %ld CPUs, "
           "best of %d\n",
           (unsigned long)n, (double)(n * sizeof *data) / (1024.0 * 1024.0),
           (unsigned long)nchunks, (unsigned long)CHUNK_ELEMS, cpus, reps);

    /* Sequential reference. */
    for (rep = 0; rep < reps; rep++) {
        double dt;
        t0 = now_sec();
        compute(data, n, &ref);
        dt = now_sec() - t0;
        if (dt < t_seq)
            t_seq = dt;
    }
    print_result("sequential", &ref);

    printf("\n  %-22s %10s %14s %12s %12s\n", "run", "time", "elements/s", "vs loop",
           "vs pool(1)");
    printf("  %-22s %8.1fms %14.3e %11.2fx %12s\n", "sequential loop", t_seq * 1e3,
           (double)n / t_seq, 1.0, "");

    {
        struct { const char *name; int kind; size_t max_threads; } configs[3];
        double t_one = 0.0;
        configs[0].name = "pool, max_threads=1";
        configs[0].kind = 1;
        configs[0].max_threads = 1;
        configs[1].name = "pool, default threads";
        configs[1].kind = 1;
        configs[1].max_threads = 0;
        configs[2].name = "global pool (batch)";
        configs[2].kind = 0;
        configs[2].max_threads = 0;
        for (c = 0; c < 3; c++) {
            struct pool *pool = NULL;
            struct pool_config cfg;
            double best = 1e30;
            int ok = 1;
            if (configs[c].kind == 1) {
                int rc;
                pool_config_init(&cfg);
                cfg.max_threads = configs[c].max_threads;
                rc = pool_create(&cfg, &pool);
                if (rc != POOL_OK) {
                    printf("FAIL: pool_create: %s\n", pool_status_str(rc));
                    return 1;
                }
            }
            for (rep = 0; rep < reps; rep++) {
                double dt = 0.0;
                if (run_parallel(pool, chunks, nchunks, &run, &r, &dt) != 0)
                    return 1;
                if (dt < best)
                    best = dt;
                if (!result_eq(&r, &ref)) {
                    ok = 0;
                    printf("FAIL: %s, repetition %d: result differs from the sequential loop\n",
                           configs[c].name, rep + 1);
                    print_result("parallel", &r);
                    print_result("sequential", &ref);
                }
            }
            if (pool != NULL)
                pool_destroy(pool);
            if (c == 0)
                t_one = best;
            printf("  %-22s %8.1fms %14.3e %11.2fx %11.2fx%s\n", configs[c].name, best * 1e3,
                   (double)n / best, t_seq / best, t_one / best, ok ? "" : "  MISMATCH");
            if (ok)
                passed++;
            else
                failed++;
        }
    }
    printf("\n  every parallel result equals the sequential one: %s\n", failed ? "NO" : "yes");
    printf("%d passed, %d failed\n", passed, failed);
    pthread_cond_destroy(&run.cond);
    pthread_mutex_destroy(&run.lock);
    free(chunks);
    free(data);
    return failed == 0 ? 0 : 1;
}
