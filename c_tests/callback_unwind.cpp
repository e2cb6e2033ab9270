// callback_unwind.cpp: a task callback left by unwinding ends the process with a message that
// names the rule (pool.h, next to the callback type), instead of hanging or dying silently:
//   1. a C++ exception escaping a pool_submit_to task's callback;
//   2. the same on the global pool (pool_submit);
//   3. a C++ exception escaping a blocking task's callback;
//   4. pthread_exit inside a task's callback (a forced unwind).
// Each case runs in a forked child whose stderr goes to a pipe; the parent checks that the
// child was killed by SIGABRT and that its stderr names the rule. A child still alive after
// 15 s exits with status 11 (a swallowed unwind, a hung thread): a failure, not a hang; the
// parent's 120 s watchdog covers the rest.
#include "common.h"

#include <pthread.h>
#include <signal.h>
#include <stdexcept>
#include <string>
#include <sys/wait.h>

static void throwing_run(struct task *) { throw std::runtime_error("escaping the callback"); }

static void exiting_run(struct task *) { pthread_exit(nullptr); }

enum Case { TASK_POOL, GLOBAL_POOL, BLOCKING_POOL, PTHREAD_EXIT };

// The child: submits the bad callback and waits (the process must end before the sleep does).
[[noreturn]] static void child(Case c)
{
    static struct task t;
    static struct pool_blocking_task bt;
    struct pool *pool = nullptr;
    int rc = POOL_OK;
    switch (c) {
    case TASK_POOL:
    case PTHREAD_EXIT:
        t.callback = c == TASK_POOL ? throwing_run : exiting_run;
        rc = pool_create(nullptr, &pool);
        if (rc == POOL_OK)
            rc = pool_submit_to(pool, &t);
        break;
    case GLOBAL_POOL:
        t.callback = throwing_run;
        rc = pool_submit(&t);
        break;
    case BLOCKING_POOL:
        pool_blocking_task_init(&bt, throwing_run, nullptr, 0);
        rc = pool_blocking_submit(&bt);
        break;
    }
    if (rc != POOL_OK)
        _exit(10);
    sleep_us(15 * 1000 * 1000);
    _exit(11); // still alive: the unwind was swallowed or the thread hangs
}

static void run_case(Case c, const char *what)
{
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK(0, "pipe");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        child(c);
    }
    close(fds[1]);
    std::string err;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
        err.append(buf, (size_t)n);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    printf("%s: child status 0x%x, stderr: %s", what, status, err.empty() ? "(empty)\n" : err.c_str());
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, what);
    CHECK(err.find("callbacks must return normally") != std::string::npos, what);
}

int main()
{
    test_watchdog_start(120);
    run_case(TASK_POOL, "C++ exception out of a pool task");
    run_case(GLOBAL_POOL, "C++ exception out of a global-pool task");
    run_case(BLOCKING_POOL, "C++ exception out of a blocking task");
    run_case(PTHREAD_EXIT, "pthread_exit in a pool task");
    return test_finish();
}
