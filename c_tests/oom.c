/*
 * oom.c: running out of memory is a status, not an abort. In a forked child under a small
 * RLIMIT_AS (its current address space + 48 MiB):
 *   1. create pools (pool_create with 16383 worker slots, pool_blocking_create with the
 *      largest cap, alternately) until one fails: it must fail with POOL_ERR_NOMEM, with
 *      `*out` untouched;
 *   2. a lazy thread start that cannot get its memory is a failed spawn: the first submit to
 *      a pool with no thread returns POOL_ERR_SPAWN (the task stays the caller's);
 *   3. every pool created is destroyed and the child exits normally (status 0).
 * The parent checks the child's exit status; a watchdog turns a hang into a failure.
 */
#define _GNU_SOURCE
#include "common.h"

#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define MAX_POOLS 100000

static void *pools[MAX_POOLS];
static int kinds[MAX_POOLS]; /* 0: struct pool, 1: struct pool_blocking */

static void noop(struct task *t)
{
    (void)t;
}

/* The process's address space in bytes (/proc/self/statm, first field, in pages). */
static size_t address_space(void)
{
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Exit codes of the child: 0 passed; each failure its own code. */
static int child(void)
{
    struct pool_config cfg;
    struct pool_blocking_config bcfg;
    struct rlimit rl;
    struct task t = { NULL, noop };
    int n = 0, rc = POOL_OK;
    void *untouched = (void *)&untouched;

    pool_config_init(&cfg);
    cfg.max_threads = 16383;
    pool_blocking_config_init(&bcfg);
    bcfg.max_threads = POOL_BLOCKING_MAX_THREADS;

    rl.rlim_cur = rl.rlim_max = address_space() + ((size_t)48 << 20);
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        return 20;
    while (n < MAX_POOLS) {
        void *out = untouched;
        kinds[n] = n % 2;
        rc = kinds[n] == 0 ? pool_create(&cfg, (struct pool **)&out)
                           : pool_blocking_create(&bcfg, (struct pool_blocking **)&out);
        if (rc != POOL_OK) {
            if (out != untouched)
                return 21; /* *out written on failure */
            break;
        }
        pools[n++] = out;
    }
    if (rc != POOL_ERR_NOMEM)
        return n == MAX_POOLS ? 22 : 23; /* never failed / failed with another status */
    if (n < 2)
        return 24; /* too few pools to go on */
    /* Room for the worker's own state, none for a thread's stack (8 MiB): a failed spawn. */
    for (int i = n - 1; i >= 0; i--) {
        if (kinds[i] == 0) {
            rc = pool_submit_to((struct pool *)pools[i], &t);
            break;
        }
    }
    if (rc != POOL_ERR_SPAWN)
        return rc == POOL_OK ? 25 : 26;
    for (int i = 0; i < n; i++) {
        if (kinds[i] == 0)
            pool_destroy((struct pool *)pools[i]);
        else
            pool_blocking_destroy((struct pool_blocking *)pools[i]);
    }
    /* Everything was given back: a pool can be created again. */
    {
        struct pool *again = NULL;
        if (pool_create(&cfg, &again) != POOL_OK)
            return 27;
        pool_destroy(again);
    }
    return 0;
}

int main(void)
{
    int status = 0;
    pid_t pid;
    test_watchdog_start(120);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's own runtime maps memory as it reports, and deadlocks when the limit
     * refuses it: this program runs plain and under valgrind instead. */
    printf("SKIP: RLIMIT_AS under AddressSanitizer\n");
    return test_finish();
#endif
    fflush(stdout);
    pid = fork();
    if (pid == 0)
        _exit(child());
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait for the RLIMIT_AS child");
    if (WIFSIGNALED(status))
        printf("child killed by signal %d (an abort on allocation failure?)\n", WTERMSIG(status));
    else
        printf("child exit status %d\n", WEXITSTATUS(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "under RLIMIT_AS: creation fails with POOL_ERR_NOMEM, a lazy start with POOL_ERR_SPAWN, all destroyed");
    return test_finish();
}
