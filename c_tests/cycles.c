/*
 * cycles.c: pools created and destroyed in a loop leak no thread (and, under valgrind or
 * ASan, no byte).
 *
 *   - 200 cycles of: create (max_threads 4) / submit 1000 tasks / wait / destroy; after each
 *     pool_destroy returns, /proc/self/task has exactly as many entries as before the first
 *     pool_create (no sleeping to let threads die: destroy joins them). Counted without
 *     threads that have PF_EXITING set: a joined thread can stay listed for microseconds
 *     after pthread_join returns (a kernel detail, see count_live_threads in common.h); a
 *     thread that was not joined is still running and is counted;
 *   - while a pool runs, it never has more than max_threads threads of its own;
 *   - cycles that destroy right after submitting (pool_destroy runs what is queued);
 *   - cycles of create/destroy with no task at all (no thread may start);
 *   - cycles of create/shutdown/destroy, with and without tasks;
 *   - 8 pools alive at once, all fed, all destroyed;
 *   - the heap: after a warm-up (one cycle and 8 pools at once), glibc's bytes in use
 *     (mallinfo2().uordblks, every arena) are the baseline; after all the cycles they must be
 *     back within HEAP_SLACK bytes. The warm-up and the cycles each run on a thread of their
 *     own and the heap is read from main after joining it: glibc keeps a thread's freed small
 *     blocks in its tcache until the thread exits, and mallinfo2 counts those as in use.
 *     Skipped, with a note, where malloc is replaced (ASan, LSan, valgrind: their own leak
 *     check applies). `make test-cycles` runs this program under LeakSanitizer too.
 * POOL_CYCLES sets the number of create/submit/wait/destroy cycles (default 200 x
 * POOL_TEST_SCALE); `make verify` runs 1000.
 * This program never touches the global pool (its threads would stay alive by design).
 *
 * Build: cc -std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude c_tests/cycles.c \
 *          target/release/libpool.a -lpthread -ldl -lm -o build/cycles
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define HAVE_MALLINFO2 1
#endif

#define MAX_THREADS 4
/* Heap growth allowed over all the cycles, in bytes (a leak of even one small allocation per
 * cycle exceeds it after 200 cycles). */
#define HEAP_SLACK 4096

struct job {
    unsigned id;
    struct task task;
    atomic_int runs;
    atomic_long *done;
};

static void job_run(struct task *t)
{
    struct job *j = container_of(t, struct job, task);
    atomic_fetch_add_explicit(&j->runs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(j->done, 1, memory_order_release);
}

struct waiter {
    atomic_long *done;
    long target;
};

static int reached(void *p)
{
    struct waiter *w = p;
    return atomic_load_explicit(w->done, memory_order_acquire) >= w->target;
}

static void report(void *p)
{
    struct waiter *w = p;
    printf("  %ld of %ld tasks ran\n", atomic_load(w->done), w->target);
}

static int baseline;            /* threads before the first pool_create (of this phase thread) */
static size_t thread_leaks;     /* cycles after which the count was not the baseline */
static size_t over_limit;       /* samples with more than MAX_THREADS pool threads */
static size_t unreaped;         /* joined threads still listed (PF_EXITING): informational */

static void check_threads(const char *where, size_t cycle)
{
    int raw = count_threads();
    int live = count_live_threads();
    if (live != baseline) {
        if (thread_leaks < 5)
            printf("  %s, cycle %lu: %d live threads (%d listed) after pool_destroy, %d before "
                   "the first pool_create\n", where, (unsigned long)cycle, live, raw, baseline);
        thread_leaks++;
    } else if (raw != baseline) {
        unreaped++;
    }
}

static void init_jobs(struct job *jobs, size_t n, atomic_long *done)
{
    size_t i;
    for (i = 0; i < n; i++) {
        jobs[i].id = (unsigned)i;
        jobs[i].task.next = NULL;
        jobs[i].task.callback = job_run;
        atomic_store(&jobs[i].runs, 0);
        jobs[i].done = done;
    }
}

static size_t count_not_once(struct job *jobs, size_t n)
{
    size_t i, bad = 0;
    for (i = 0; i < n; i++)
        if (atomic_load(&jobs[i].runs) != 1)
            bad++;
    return bad;
}

/*
 * One cycle: create, submit n, then (mode) 0: wait and destroy; 1: destroy at once;
 * 2: shutdown at once, then destroy. Returns the number of problems found.
 */
static size_t one_cycle(struct job *jobs, size_t n, int mode, size_t cycle, const char *where)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    atomic_long done;
    size_t i, problems = 0;
    int rc, during;

    pool_config_init(&cfg);
    cfg.max_threads = MAX_THREADS;
    rc = pool_create(&cfg, &pool);
    if (rc != POOL_OK) {
        printf("FAIL: %s, cycle %lu: pool_create -> %s\n", where, (unsigned long)cycle,
               status_name(rc));
        return 1;
    }
    atomic_init(&done, 0);
    init_jobs(jobs, n, &done);
    for (i = 0; i < n; i++) {
        rc = pool_submit_to(pool, &jobs[i].task);
        if (rc != POOL_OK) {
            if (problems++ == 0)
                printf("  %s, cycle %lu: pool_submit_to -> %s\n", where, (unsigned long)cycle,
                       status_name(rc));
        }
    }
    during = count_live_threads();
    if (during - baseline > MAX_THREADS) {
        if (over_limit++ < 5)
            printf("  %s, cycle %lu: %d threads while the pool runs, baseline %d, max_threads %d\n",
                   where, (unsigned long)cycle, during, baseline, MAX_THREADS);
    }
    if (mode == 0) {
        struct waiter w;
        w.done = &done;
        w.target = (long)(n - problems);
        wait_until(reached, &w, report, where);
    } else if (mode == 2) {
        rc = pool_shutdown(pool);
        if (rc != POOL_OK) {
            printf("  %s, cycle %lu: pool_shutdown -> %s\n", where, (unsigned long)cycle,
                   status_name(rc));
            problems++;
        }
    }
    pool_destroy(pool);
    check_threads(where, cycle);
    if (atomic_load(&done) != (long)n || count_not_once(jobs, n) != 0) {
        if (problems++ == 0)
            printf("  %s, cycle %lu: %ld of %lu tasks ran (%lu not exactly once) when "
                   "pool_destroy returned\n", where, (unsigned long)cycle, atomic_load(&done),
                   (unsigned long)n, (unsigned long)count_not_once(jobs, n));
    }
    return problems;
}

static void run_cycles(size_t cycles, size_t n, int mode, const char *what)
{
    struct job *jobs = calloc(n ? n : 1, sizeof *jobs);
    size_t c, problems = 0, leaks_before = thread_leaks;
    double t0 = now_sec();
    char msg[200];
    if (jobs == NULL) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    for (c = 0; c < cycles; c++)
        problems += one_cycle(jobs, n, mode, c, what);
    printf("  %s: %lu cycles in %.3f s\n", what, (unsigned long)cycles, now_sec() - t0);
    snprintf(msg, sizeof msg, "%s: %lu cycles, every task ran exactly once, no error", what,
             (unsigned long)cycles);
    CHECK_EQ(problems, 0, msg);
    snprintf(msg, sizeof msg, "%s: cycles after which /proc/self/task != baseline (%d)", what,
             baseline);
    CHECK_EQ(thread_leaks - leaks_before, 0, msg);
    free(jobs);
}

/* Several pools alive at once. */
static void many_pools(size_t pools_n, size_t n)
{
    struct pool *pools[8];
    struct job *jobs = calloc(pools_n * n, sizeof *jobs);
    struct pool_config cfg;
    atomic_long done;
    struct waiter w;
    size_t p, i, errors = 0;
    int during;

    if (jobs == NULL || pools_n > 8) {
        printf("FAIL: setup\n");
        exit(1);
    }
    atomic_init(&done, 0);
    init_jobs(jobs, pools_n * n, &done);
    pool_config_init(&cfg);
    cfg.max_threads = 2;
    for (p = 0; p < pools_n; p++)
        if (pool_create(&cfg, &pools[p]) != POOL_OK) {
            printf("FAIL: pool_create\n");
            exit(1);
        }
    for (p = 0; p < pools_n; p++)
        for (i = 0; i < n; i++)
            if (pool_submit_to(pools[p], &jobs[p * n + i].task) != POOL_OK)
                errors++;
    during = count_live_threads();
    CHECK_EQ(errors, 0, "8 pools: every submit returned POOL_OK");
    CHECK(during - baseline <= (int)(2 * pools_n), "8 pools: at most 2 threads each while running");
    w.done = &done;
    w.target = (long)(pools_n * n - errors);
    wait_until(reached, &w, report, "8 pools: all tasks");
    for (p = 0; p < pools_n; p++)
        pool_destroy(pools[p]);
    CHECK_EQ(count_live_threads(), baseline, "8 pools: thread count back to the baseline after destroying all");
    CHECK_EQ(count_not_once(jobs, pools_n * n), 0, "8 pools: every task ran exactly once");
    free(jobs);
}

/* Bytes of heap in use (glibc, every arena), or -1 where that cannot be measured: no
 * mallinfo2, or malloc replaced (a sanitizer or valgrind), seen as a 64 KiB block that does
 * not show up in the count. */
static long long heap_in_use(void)
{
#ifdef HAVE_MALLINFO2
    long long before = (long long)mallinfo2().uordblks, with;
    void *volatile probe = malloc(64 * 1024);
    if (probe == NULL)
        return -1;
    with = (long long)mallinfo2().uordblks;
    free(probe);
    if (with - before < 64 * 1024)
        return -1;
    return (long long)mallinfo2().uordblks;
#else
    return -1;
#endif
}

/* POOL_CYCLES if set (a count), else `dflt`. */
static size_t env_cycles(size_t dflt)
{
    const char *s = getenv("POOL_CYCLES");
    char *end;
    unsigned long v;
    if (s == NULL || *s == '\0')
        return dflt;
    v = strtoul(s, &end, 10);
    if (*end != '\0' || v == 0) {
        fprintf(stderr, "warning: ignoring POOL_CYCLES=%s\n", s);
        return dflt;
    }
    return (size_t)v;
}

struct phases {
    int warm_up;
    size_t cycles, n, small;
};

/* The cycles, on a thread of their own (see the heap note at the top); `baseline` counts
 * that thread too. */
static void *run_phases(void *arg)
{
    const struct phases *ph = arg;
    baseline = count_live_threads();
    if (ph->warm_up) {
        /* First-use allocations, and glibc's arenas for the most threads at once. */
        run_cycles(1, ph->n, 0, "warm-up");
        many_pools(8, ph->n);
        return NULL;
    }
    /* No task: no thread may even start. */
    run_cycles(ph->small, 0, 0, "create/destroy, no task");
    run_cycles(ph->small, 0, 2, "create/shutdown/destroy, no task");

    run_cycles(ph->cycles, ph->n, 0, "create/submit/wait/destroy");
    run_cycles(ph->small, ph->n, 1, "create/submit/destroy at once");
    run_cycles(ph->small, ph->n, 2, "create/submit/shutdown/destroy");
    run_cycles(ph->small, 1, 1, "create/submit 1/destroy at once");

    many_pools(8, ph->n);
    return NULL;
}

static void run_on_thread(struct phases *ph)
{
    pthread_t t;
    if (pthread_create(&t, NULL, run_phases, ph) != 0 || pthread_join(t, NULL) != 0) {
        printf("FAIL: pthread_create/join\n");
        exit(1);
    }
}

int main(void)
{
    size_t cycles = env_cycles(scaled(200, 5));
    long long heap_before, heap_after;
    struct phases ph;
    int start;
    size_t n = scaled(1000, 10);
    size_t small = scaled(50, 3);
    int end;

    test_watchdog_start(120);
#ifdef HAVE_MALLINFO2
    /* One arena for every thread: how many arenas glibc creates depends on how many threads
     * happened to contend in malloc at once, and each new one moves the count of bytes in use
     * by some KiB, in the warm-up or after it, whatever the library does (seen under load:
     * warm-up baselines 34,880 to 41,648 B for the same final 41,952). */
    mallopt(M_ARENA_MAX, 1);
#endif
    start = count_live_threads();
    printf("cycles: %d threads at start; %lu cycles of %lu tasks\n", start,
           (unsigned long)cycles, (unsigned long)n);
    CHECK(start >= 1, "count /proc/self/task");
    if (start < 1)
        return test_finish();

    ph.cycles = cycles;
    ph.n = n;
    ph.small = small;
    ph.warm_up = 1;
    run_on_thread(&ph);
    heap_before = heap_in_use();
    ph.warm_up = 0;
    run_on_thread(&ph);
    heap_after = heap_in_use();

    CHECK_EQ(over_limit, 0, "samples with more than max_threads=4 pool threads running");
    end = count_live_threads();
    CHECK_EQ(end, start, "threads at the end == threads at the start (exactly)");
    if (heap_before < 0 || heap_after < 0) {
        printf("  heap: not measurable here (no mallinfo2, or malloc replaced by a sanitizer "
               "or valgrind, whose own leak check applies)\n");
    } else {
        printf("  heap in use: %lld bytes after the warm-up, %lld after %lu more cycles "
               "and 8 pools at once (growth %lld, slack %d)\n", heap_before, heap_after,
               (unsigned long)(cycles + 5 * small), heap_after - heap_before, HEAP_SLACK);
        CHECK(heap_after - heap_before <= HEAP_SLACK,
              "heap in use after all the cycles within HEAP_SLACK of the warm-up baseline");
    }
    printf("  threads: %d at start, %d at end; %lu times a joined thread was still listed "
           "(PF_EXITING) right after pool_destroy\n", start, end, (unsigned long)unreaped);
    return test_finish();
}
