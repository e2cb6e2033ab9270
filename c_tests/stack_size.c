/*
 * stack_size.c: `stack_size = 0` in the C API means the system's default thread stack, the
 * size `pthread_attr_init` gives a fresh attribute (glibc: it follows `ulimit -s`), for both
 * kinds of pool:
 *   - a pool_create pool and a pool_blocking_create pool with stack_size 0: each pool
 *     thread's own stack (pthread_getattr_np) is the fresh attribute's size;
 *   - an explicit stack_size is still honoured (256 KiB);
 *   - the same again in a child run with `ulimit -s` at 3 MiB (a size that is neither
 *     glibc's usual 8 MiB nor Rust std's 2 MiB): the default follows the limit.
 */
#define _GNU_SOURCE
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>

static size_t fresh_attr_stack(void)
{
    pthread_attr_t attr;
    size_t size = 0;
    pthread_attr_init(&attr);
    pthread_attr_getstacksize(&attr, &size);
    pthread_attr_destroy(&attr);
    return size;
}

struct probe {
    struct pool_blocking_task blocking; /* its `task` serves the task pool too */
    atomic_size_t stack;                /* the running thread's stack size; 0 until it ran */
};

static void probe_run(struct task *t)
{
    struct probe *p = container_of(t, struct probe, blocking.task);
    pthread_attr_t attr;
    size_t size = 1;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstacksize(&attr, &size);
        pthread_attr_destroy(&attr);
    }
    atomic_store(&p->stack, size);
}

static int probe_ran(void *ctx)
{
    return atomic_load(&((struct probe *)ctx)->stack) != 0;
}

static size_t task_pool_stack(size_t stack_size)
{
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct probe p;
    memset(&p, 0, sizeof p);
    p.blocking.task.callback = probe_run;
    atomic_init(&p.stack, 0);
    pool_config_init(&cfg);
    cfg.max_threads = 1;
    cfg.stack_size = stack_size;
    if (!CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "pool_create"))
        return 0;
    CHECK_STATUS(pool_submit_to(pool, &p.blocking.task), POOL_OK, "pool_submit_to");
    wait_until(probe_ran, &p, NULL, "the task pool's probe ran");
    pool_destroy(pool);
    return atomic_load(&p.stack);
}

static size_t blocking_pool_stack(size_t stack_size)
{
    struct pool_blocking_config cfg;
    struct pool_blocking *pool = NULL;
    struct probe p;
    memset(&p, 0, sizeof p);
    atomic_init(&p.stack, 0);
    pool_blocking_task_init(&p.blocking, probe_run, NULL, 0);
    pool_blocking_config_init(&cfg);
    cfg.stack_size = stack_size;
    if (!CHECK_STATUS(pool_blocking_create(&cfg, &pool), POOL_OK, "pool_blocking_create"))
        return 0;
    CHECK_STATUS(pool_blocking_submit_to(pool, &p.blocking), POOL_OK, "pool_blocking_submit_to");
    wait_until(probe_ran, &p, NULL, "the blocking pool's probe ran");
    pool_blocking_destroy(pool);
    return atomic_load(&p.stack);
}

static void check_defaults(void)
{
    size_t want = fresh_attr_stack();
    printf("pthread_attr_init's stack size: %zu\n", want);
    CHECK_EQ(task_pool_stack(0), want, "pool_create(stack_size 0): the pthread default stack");
    CHECK_EQ(blocking_pool_stack(0), want, "pool_blocking_create(stack_size 0): the pthread default stack");
    CHECK_EQ(task_pool_stack(256 << 10), 256 << 10, "pool_create(stack_size 256 KiB)");
    CHECK_EQ(blocking_pool_stack(256 << 10), 256 << 10, "pool_blocking_create(stack_size 256 KiB)");
}

int main(int argc, char **argv)
{
    const size_t child_limit = 3u << 20;
    test_watchdog_start(60);
    (void)argc;
    if (getenv("POOL_STACK_TEST_CHILD") != NULL) {
        /* Valgrind keeps RLIMIT_STACK to itself, so under it the limit never reaches this
         * child: the pool still has to match whatever pthread_attr_init says. */
        if (fresh_attr_stack() != child_limit)
            printf("note: ulimit -s did not reach this child (valgrind?): checking against %zu\n",
                   fresh_attr_stack());
        check_defaults();
        return test_finish();
    }
    check_defaults();

    /* A child under `ulimit -s 3072`: a limit is read when a program starts, so exec. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = { child_limit, child_limit };
        if (setrlimit(RLIMIT_STACK, &rl) != 0 || setenv("POOL_STACK_TEST_CHILD", "1", 1) != 0)
            _exit(3);
        execv(argv[0], argv); /* not /proc/self/exe: under valgrind that is valgrind */
        _exit(4);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait for the ulimit -s child");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the ulimit -s 3072 child passed");
    return test_finish();
}
