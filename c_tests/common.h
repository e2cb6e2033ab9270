/*
 * common.h: small helpers shared by the C test programs in c_tests/.
 *
 * Plain C99 + POSIX (no C11 atomics here, so C99 tests can include it too):
 *   - CHECK / CHECK_EQ: count and report checks; a failure prints "FAIL: ..." and the
 *     program goes on, so one run shows every broken check;
 *   - test_finish(): prints the final "N passed, M failed" line and gives main's status;
 *   - test_scale() / scaled(): task counts scaled by the env var POOL_TEST_SCALE
 *     (default 1.0; use e.g. 0.01 under valgrind);
 *   - test_watchdog_start(): a process-wide alarm so a hang (lost wake-up, a join that never
 *     returns) fails fast with exit status 2 instead of blocking `make test`;
 *   - wait_until(): poll a completion predicate with back-off and a deadline; on expiry it
 *     prints what is missing and exits with status 2;
 *   - count_threads(): entries in /proc/self/task; count_live_threads(): the same without
 *     threads already inside the kernel's exit path (see there).
 *
 * Every function is `static inline` so a test that uses only some of them still builds
 * with -Wall -Wextra -Werror.
 */
#ifndef POOL_C_TESTS_COMMON_H
#define POOL_C_TESTS_COMMON_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"

/* Recover the host struct from a pointer to one of its members. */
#define container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static int test_passed_;
static int test_failed_;
/* Set to 1 to print an "ok   ..." line for every passing check too (not only failures). */
static int test_verbose_;

/* Records one check; prints a FAIL line (with file:line) when it does not hold. */
static inline int test_check_(int ok, const char *file, int line, const char *what)
{
    if (ok) {
        test_passed_++;
        if (test_verbose_)
            printf("ok   %s\n", what);
    } else {
        test_failed_++;
        printf("FAIL: %s:%d: %s\n", file, line, what);
        fflush(stdout);
    }
    return ok;
}

/* Like test_check_, for two integers (status codes, counts): shows both values. */
static inline int test_check_eq_(long long got, long long want, const char *file, int line,
                                 const char *what)
{
    if (got == want) {
        test_passed_++;
        if (test_verbose_)
            printf("ok   %s (%lld)\n", what, got);
        return 1;
    }
    test_failed_++;
    printf("FAIL: %s:%d: %s: got %lld, want %lld\n", file, line, what, got, want);
    fflush(stdout);
    return 0;
}

#define CHECK(cond, what) test_check_(!!(cond), __FILE__, __LINE__, (what))
#define CHECK_EQ(got, want, what) \
    test_check_eq_((long long)(got), (long long)(want), __FILE__, __LINE__, (what))

/* A status code with its name, for messages. */
static inline const char *status_name(int status)
{
    switch (status) {
    case POOL_OK: return "POOL_OK";
    case POOL_ERR_INVALID: return "POOL_ERR_INVALID";
    case POOL_ERR_SHUTDOWN: return "POOL_ERR_SHUTDOWN";
    case POOL_ERR_SPAWN: return "POOL_ERR_SPAWN";
    case POOL_ERR_NOMEM: return "POOL_ERR_NOMEM";
    case POOL_ERR_PANIC: return "POOL_ERR_PANIC";
    case POOL_ERR_RANGE: return "POOL_ERR_RANGE";
    case POOL_ERR_STARTED: return "POOL_ERR_STARTED";
    case POOL_ERR_FORKED: return "POOL_ERR_FORKED";
    case POOL_ERR_FULL: return "POOL_ERR_FULL";
    case POOL_ERR_BUSY: return "POOL_ERR_BUSY";
    default: return "(unknown status)";
    }
}

/*
 * Checks a status code exactly and prints one line per check, pass or fail:
 *   ok   pool_submit(NULL) -> POOL_ERR_INVALID
 *   FAIL: file:line: pool_submit(NULL) -> POOL_OK (0), want POOL_ERR_INVALID (-1)
 */
static inline int test_check_status_(int got, int want, const char *file, int line,
                                     const char *what)
{
    if (got == want) {
        test_passed_++;
        printf("ok   %s -> %s\n", what, status_name(got));
        return 1;
    }
    test_failed_++;
    printf("FAIL: %s:%d: %s -> %s (%d), want %s (%d)\n", file, line, what, status_name(got), got,
           status_name(want), want);
    fflush(stdout);
    return 0;
}
#define CHECK_STATUS(got, want, what) test_check_status_((got), (want), __FILE__, __LINE__, (what))

/* Prints the summary line; returns main's exit status. */
static inline int test_finish(void)
{
    printf("%d passed, %d failed\n", test_passed_, test_failed_);
    fflush(stdout);
    return test_failed_ == 0 ? 0 : 1;
}

/* POOL_TEST_SCALE (default 1.0), clamped to [1e-6, 1000]. */
static inline double test_scale(void)
{
    const char *s = getenv("POOL_TEST_SCALE");
    double v;
    char *end;
    if (s == NULL || *s == '\0')
        return 1.0;
    v = strtod(s, &end);
    if (end == s || !(v > 0.0)) {
        fprintf(stderr, "warning: ignoring POOL_TEST_SCALE=%s\n", s);
        return 1.0;
    }
    if (v < 1e-6)
        v = 1e-6;
    if (v > 1000.0)
        v = 1000.0;
    return v;
}

/* n scaled by POOL_TEST_SCALE, at least `min`. */
static inline size_t scaled(size_t n, size_t min)
{
    double v = (double)n * test_scale();
    size_t r = (size_t)v;
    return r < min ? min : r;
}

/* Monotonic time in seconds. */
static inline double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void sleep_us(long us)
{
    struct timespec ts;
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Deadline (seconds) for one wait: POOL_TEST_WAIT_S, default 30. */
static inline double test_wait_limit(void)
{
    const char *s = getenv("POOL_TEST_WAIT_S");
    double v = s ? strtod(s, NULL) : 0.0;
    return v > 0.0 ? v : 30.0;
}

static void test_watchdog_fired_(int sig)
{
    static const char msg[] = "FAIL: watchdog: the test did not finish in time "
                              "(a hang: lost wake-up, or a shutdown/join that never returns)\n";
    ssize_t r;
    (void)sig;
    r = write(STDOUT_FILENO, msg, sizeof msg - 1);
    (void)r;
    _exit(2);
}

/*
 * Whole-program watchdog: after `seconds` (POOL_TEST_TIMEOUT_S overrides, e.g. for valgrind)
 * print a FAIL line and _exit(2). Catches hangs inside the library (pool_shutdown,
 * pool_destroy) that wait_until() cannot see.
 */
static inline void test_watchdog_start(unsigned seconds)
{
    struct sigaction sa;
    const char *s = getenv("POOL_TEST_TIMEOUT_S");
    if (s != NULL && atoi(s) > 0)
        seconds = (unsigned)atoi(s);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = test_watchdog_fired_;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
}

/*
 * Waits until done(ctx) returns non-zero: yields first, then sleeps with growing intervals
 * (up to 1 ms), so a lost wake-up in the pool shows up as a timeout, never as a hang.
 * On timeout (`limit` seconds; wait_until: POOL_TEST_WAIT_S, default 30) it prints
 * "FAIL: watchdog: <what> ...", calls report(ctx) (may be NULL) to show what is missing, and
 * exits with status 2.
 */
static inline void wait_until_for(int (*done)(void *ctx), void *ctx, void (*report)(void *ctx),
                                  const char *what, double limit)
{
    double deadline = now_sec() + limit;
    long nap = 20;
    unsigned spins = 0;
    while (!done(ctx)) {
        if (spins < 200) {
            spins++;
            sched_yield();
            continue;
        }
        if (now_sec() > deadline) {
            printf("FAIL: watchdog: %s: not complete after %.0f s\n", what, limit);
            if (report != NULL)
                report(ctx);
            printf("%d passed, %d failed\n", test_passed_, test_failed_ + 1);
            fflush(stdout);
            exit(2);
        }
        sleep_us(nap);
        if (nap < 1000)
            nap *= 2;
    }
}

static inline void wait_until(int (*done)(void *ctx), void *ctx, void (*report)(void *ctx),
                              const char *what)
{
    wait_until_for(done, ctx, report, what, test_wait_limit());
}

/* Number of threads of this process (entries of /proc/self/task), -1 on error. */
static inline int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(d);
    return n;
}

/*
 * Threads of this process that are not already exiting: entries of /proc/self/task whose
 * /proc/self/task/TID/stat flags lack PF_EXITING (0x4); -1 on error.
 *
 * Why: pthread_join returns when the kernel clears the thread's tid futex, which happens in
 * the middle of the kernel's do_exit (exit_mm), slightly BEFORE the thread is removed from
 * /proc/self/task. So even a plain pthread_create + pthread_join, with no pool at all, leaves
 * a joined thread listed for a few microseconds (measured here: ~1 in 1000 joins). Such a
 * thread already has PF_EXITING set (it is set at the very start of do_exit), whereas a
 * thread the pool failed to join is still running user code and does not. Counting threads
 * without PF_EXITING is therefore exact right after pool_destroy returns, without sleeping.
 */
static inline int count_live_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[1024];
        const char *close_paren;
        FILE *f;
        size_t len;
        char state;
        unsigned long flags;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue; /* gone since readdir: not live */
        len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        close_paren = strrchr(buf, ')'); /* comm may contain spaces and parentheses */
        if (close_paren == NULL || len == 0)
            continue; /* empty read: the thread is gone */
        if (sscanf(close_paren + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) == 2
            && (flags & 0x4UL) != 0)
            continue; /* PF_EXITING: joined (or exiting), only not yet reaped */
        n++;
    }
    closedir(d);
    return n;
}

#endif /* POOL_C_TESTS_COMMON_H */
