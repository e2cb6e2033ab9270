/*
 * driver.c: a host's I/O driver (`pool_set_driver`), here poll(2) on two pipes: a data pipe
 * the test writes "requests" into, and a wake pipe that `unpark` writes to. When the data pipe
 * is readable the driver reads one byte per event and submits a task that counts it.
 *
 *   1. bad input: NULL pool, driver or callback give POOL_ERR_INVALID; a second driver gives
 *      POOL_ERR_STARTED;
 *   2. 200 requests, one at a time from the main thread, each waited for: an idle worker
 *      blocks in the driver's park (counted) and dispatches each request; submits from the
 *      main thread in between must wake a worker blocked in the driver (unpark counted);
 *   3. a delayed submit runs while the workers idle: the worker in the driver parks with a
 *      timeout (not POOL_NO_TIMEOUT), and the task does not run early;
 *   4. busy workers poll the driver at their tick ends (poll counted): 5,000 tasks of about
 *      20 us; the driver is watched throughout: polled at tick ends, or a worker blocked in its
 *      park (under valgrind one worker may run them all while the other stays parked).
 *
 * A 120 s watchdog turns a hang (a lost wake-up of the worker in park) into exit status 2.
 */
#include "common.h"

#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

struct host_driver {
    struct pool *pool;
    int data[2]; /* [0] read end, [1] write end */
    int wake[2];
    atomic_int polls, parks, timed_parks, unparks;
    atomic_int in_park; /* workers inside drv_park now */
};

static atomic_int requests_done;

static void request_run(struct task *t)
{
    free(t);
    atomic_fetch_add(&requests_done, 1);
}

/* Waits up to `timeout_ms` (-1: forever) for either pipe, then dispatches. */
static void turn(struct host_driver *d, int timeout_ms)
{
    struct pollfd fds[2] = {{d->data[0], POLLIN, 0}, {d->wake[0], POLLIN, 0}};
    char buf[64];
    if (poll(fds, 2, timeout_ms) <= 0)
        return;
    if (fds[1].revents & POLLIN)
        while (read(d->wake[0], buf, sizeof buf) == (ssize_t)sizeof buf) {
        }
    if (fds[0].revents & POLLIN) {
        ssize_t n = read(d->data[0], buf, sizeof buf);
        for (ssize_t i = 0; i < n; i++) {
            struct task *t = calloc(1, sizeof *t);
            t->callback = request_run;
            if (pool_submit_to(d->pool, t) != POOL_OK)
                free(t);
        }
    }
}

static void drv_poll(void *ctx)
{
    struct host_driver *d = ctx;
    atomic_fetch_add(&d->polls, 1);
    turn(d, 0);
}

static void drv_park(void *ctx, uint64_t timeout_ns)
{
    struct host_driver *d = ctx;
    atomic_fetch_add(&d->parks, 1);
    atomic_fetch_add(&d->in_park, 1);
    if (timeout_ns == POOL_NO_TIMEOUT) {
        turn(d, -1);
    } else {
        atomic_fetch_add(&d->timed_parks, 1);
        /* Rounded up: never back before the deadline. */
        turn(d, (int)((timeout_ns + 999999) / 1000000 > 3600000 ? 3600000 : (timeout_ns + 999999) / 1000000));
    }
    atomic_fetch_sub(&d->in_park, 1);
}

static void drv_unpark(void *ctx)
{
    struct host_driver *d = ctx;
    char b = 1;
    atomic_fetch_add(&d->unparks, 1);
    if (write(d->wake[1], &b, 1) < 0) {
        /* The pipe is full: a wake is pending anyway. */
    }
}

static int request_seen(void *ctx)
{
    return atomic_load(&requests_done) >= *(int *)ctx;
}

static atomic_int plain_done;
static void plain_run(struct task *t)
{
    free(t);
    atomic_fetch_add(&plain_done, 1);
}

/* A task that keeps its worker busy for about 20 us. */
static void busy_run(struct task *t)
{
    double until = now_sec() + 20e-6;
    while (now_sec() < until) {
    }
    plain_run(t);
}
static int plain_seen(void *ctx)
{
    return atomic_load(&plain_done) >= *(int *)ctx;
}

struct delayed {
    struct task task;
    double not_before;
    atomic_int runs;
    atomic_int early;
};

static void delayed_run(struct task *t)
{
    struct delayed *d = container_of(t, struct delayed, task);
    if (now_sec() < d->not_before)
        atomic_fetch_add(&d->early, 1);
    atomic_fetch_add(&d->runs, 1);
}

static int delayed_seen(void *ctx)
{
    return atomic_load(&((struct delayed *)ctx)->runs) > 0;
}

int main(void)
{
    static struct host_driver d;
    struct pool_config cfg;
    struct pool *pool = NULL;
    struct pool_driver drv = {&d, drv_poll, drv_park, drv_unpark};
    struct pool_driver bad = drv;
    static struct delayed later;
    int want;

    test_watchdog_start(120);
    if (pipe(d.data) != 0 || pipe(d.wake) != 0) {
        printf("FAIL: pipe\n");
        return 1;
    }
    /* A non-blocking wake pipe: `unpark` never blocks, the drain loop stops when empty. */
    {
        int fl = fcntl(d.wake[0], F_GETFL);
        fcntl(d.wake[0], F_SETFL, fl | O_NONBLOCK);
        fl = fcntl(d.wake[1], F_GETFL);
        fcntl(d.wake[1], F_SETFL, fl | O_NONBLOCK);
    }
    pool_config_init(&cfg);
    cfg.max_threads = 2;
    if (!CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "create"))
        return test_finish();
    d.pool = pool;

    /* 1. bad input */
    CHECK_STATUS(pool_set_driver(NULL, &drv), POOL_ERR_INVALID, "NULL pool");
    CHECK_STATUS(pool_set_driver(pool, NULL), POOL_ERR_INVALID, "NULL driver");
    bad.park = NULL;
    CHECK_STATUS(pool_set_driver(pool, &bad), POOL_ERR_INVALID, "NULL park");
    CHECK_STATUS(pool_set_driver(pool, &drv), POOL_OK, "install");
    CHECK_STATUS(pool_set_driver(pool, &drv), POOL_ERR_STARTED, "a second driver");

    /* 2. requests through the driver, with plain submits in between */
    for (int i = 1; i <= 200; i++) {
        char b = 1;
        if (i % 20 == 0)
            sleep_us(2000); /* let the workers go idle, one blocked in the driver */
        CHECK(write(d.data[1], &b, 1) == 1, "write a request");
        want = i;
        wait_until(request_seen, &want, NULL, "a request dispatched by the driver");
        {
            struct task *t = calloc(1, sizeof *t);
            t->callback = plain_run;
            CHECK_STATUS(pool_submit_to(pool, t), POOL_OK, "a plain submit");
            wait_until(plain_seen, &want, NULL, "a plain submit while a worker waits in the driver");
        }
    }
    CHECK(atomic_load(&d.parks) > 0, "an idle worker blocked in the driver's park");
    CHECK(atomic_load(&d.unparks) > 0, "submits woke the worker in the driver through unpark");

    /* 3. a delayed submit: the worker in the driver waits for its deadline */
    sleep_us(5000);
    later.task.callback = delayed_run;
    later.not_before = now_sec() + 0.300; /* long enough to be parked first, even under valgrind */
    CHECK_STATUS(pool_submit_after(pool, &later.task, 300000000ULL), POOL_OK, "delayed submit");
    wait_until(delayed_seen, &later, NULL, "a delayed task with a driver installed");
    CHECK_EQ(atomic_load(&later.early), 0, "the delayed task did not run early");
    CHECK(atomic_load(&d.timed_parks) > 0, "the driver's park got the deadline as its timeout");

    /* 4. busy workers poll at tick ends */
    {
        int before = atomic_load(&d.polls), parks_before = atomic_load(&d.parks);
        int n = 5000;
        atomic_store(&plain_done, 0);
        for (int i = 0; i < n; i++) {
            struct task *t = calloc(1, sizeof *t);
            t->callback = busy_run;
            if (pool_submit_to(pool, t) != POOL_OK)
                free(t);
        }
        wait_until(plain_seen, &n, NULL, "5,000 busy tasks");
        /* The driver was watched meanwhile: a busy worker polled it at a tick end, or the other
         * worker sat blocked in its park (then the busy ones' try-lock finds it taken; under
         * valgrind one worker can run all 5,000 tasks while the other never leaves the park). */
        CHECK(atomic_load(&d.polls) > before || atomic_load(&d.parks) > parks_before || atomic_load(&d.in_park) > 0,
              "busy workers polled the driver at tick ends, or a worker was blocked in it");
    }

    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown with a worker blocked in the driver");
    pool_destroy(pool);

    /* 5. a driver installed after shutdown is refused (nobody would ever poll it) */
    if (CHECK_STATUS(pool_create(&cfg, &pool), POOL_OK, "create another")) {
        CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown first");
        CHECK_STATUS(pool_set_driver(pool, &drv), POOL_ERR_SHUTDOWN, "a driver after shutdown");
        pool_destroy(pool);
    }
    printf("     (parks %d, timed parks %d, unparks %d, polls %d)\n", atomic_load(&d.parks),
           atomic_load(&d.timed_parks), atomic_load(&d.unparks), atomic_load(&d.polls));
    return test_finish();
}
