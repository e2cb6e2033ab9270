/* The versioned layout of the structs the caller allocates (README, "ABI policy").
 *
 * Built against this pool.h, it runs in two ways:
 *  - against the library built from the same sources (make test-c): the `*_init` functions
 *    and the stats calls leave every reserved word 0, nothing past the end of a struct is
 *    written, and a caller that sets a reserved word (as a program built against a newer
 *    pool.h would, with a field this library does not know) is refused with POOL_ERR_INVALID;
 *  - with POOL_ABI_GROWN=1 against a library whose structs have grown by a field (make
 *    test-abi, scripts/abi-grown.sh builds it): the new field takes the first reserved word,
 *    where the grown library writes POOL_ABI_GROWN_MARK; this program, built for the old
 *    layout, still creates pools, runs work and reads statistics, and nothing past the end
 *    of its structs is touched. */
#include "common.h"
#include "pool.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the grown library (scripts/abi-grown.sh) stores in its new field. */
#define POOL_ABI_GROWN_MARK 0x67726f77u

/* Each struct followed by a canary that must survive every library call. */
#define CANARY 0x5a5a5a5a5a5a5a5aull
struct guarded_config { struct pool_config s; uint64_t canary; };
struct guarded_bconfig { struct pool_blocking_config s; uint64_t canary; };
struct guarded_stats { struct pool_stats s; uint64_t canary; };
struct guarded_metrics { struct pool_blocking_metrics s; uint64_t canary; };
struct guarded_platform { struct pool_platform s; uint64_t canary; };
struct guarded_qstats { struct pool_queue_stats s; uint64_t canary; };

static size_t grown_word; /* what the first reserved word must hold after the library wrote it */

/* A struct's reserved words (`n` of them: POOL_RESERVED_WORDS, fewer where fields of later minor
 * versions took some): the first holds the grown library's mark, the rest 0. */
#define check_reserved(words, what) check_reserved_n(words, sizeof(words) / sizeof((words)[0]), what)
static void check_reserved_n(const size_t *words, size_t n, const char *what)
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s: reserved[0]", what);
    CHECK_EQ(words[0], grown_word, msg);
    for (size_t i = 1; i < n; i++) {
        snprintf(msg, sizeof msg, "%s: reserved[%zu]", what, i);
        CHECK_EQ(words[i], 0, msg);
    }
}

static atomic_int ran;
static void count(struct task *t) { (void)t; atomic_fetch_add(&ran, 1); }

int main(void)
{
    const char *grown = getenv("POOL_ABI_GROWN");
    grown_word = grown && strcmp(grown, "1") == 0 ? POOL_ABI_GROWN_MARK : 0;
    test_watchdog_start(60);

    /* The sizes of the first versioned layout: reserved words at the end of each struct. */
    CHECK_EQ(POOL_RESERVED_WORDS, 8, "POOL_RESERVED_WORDS");
    CHECK_EQ(sizeof(struct pool_stats), (11 + POOL_RESERVED_WORDS) * sizeof(size_t), "sizeof pool_stats");
    CHECK_EQ(sizeof(struct pool_blocking_metrics), (9 + POOL_RESERVED_WORDS) * sizeof(size_t),
             "sizeof pool_blocking_metrics");
    CHECK_EQ(offsetof(struct pool_config, min_threads) + sizeof(size_t), offsetof(struct pool_config, reserved),
             "pool_config.min_threads just before the reserved words");
    CHECK_EQ(POOL_CONFIG_RESERVED_WORDS, POOL_RESERVED_WORDS - 1, "POOL_CONFIG_RESERVED_WORDS");
    CHECK_EQ(sizeof(struct pool_queue_stats), (7 + POOL_RESERVED_WORDS) * sizeof(size_t), "sizeof pool_queue_stats");
    /* queued and tasks_refused took the first reserved word of 0.1's layouts: same sizes, same
     * offsets. */
    CHECK_EQ(offsetof(struct pool_stats, queued), 11 * sizeof(size_t), "offsetof pool_stats.queued");
    CHECK_EQ(offsetof(struct pool_stats, surplus_threads), 12 * sizeof(size_t), "offsetof pool_stats.surplus_threads");
    CHECK_EQ(POOL_STATS_RESERVED_WORDS, POOL_RESERVED_WORDS - 2, "POOL_STATS_RESERVED_WORDS");
    CHECK_EQ(offsetof(struct pool_blocking_metrics, tasks_refused), 9 * sizeof(size_t),
             "offsetof pool_blocking_metrics.tasks_refused");
    CHECK_EQ(POOL_BLOCKING_METRICS_RESERVED_WORDS, POOL_RESERVED_WORDS - 1,
             "POOL_BLOCKING_METRICS_RESERVED_WORDS");

    /* Init functions: reserved words as this library's layout has them, the canary intact. */
    struct guarded_config cfg;
    memset(&cfg, 0xff, sizeof cfg);
    cfg.canary = CANARY;
    pool_config_init(&cfg.s);
    check_reserved(cfg.s.reserved, "pool_config_init");
    CHECK(cfg.canary == CANARY, "pool_config_init wrote past struct pool_config");

    struct guarded_bconfig bcfg;
    memset(&bcfg, 0xff, sizeof bcfg);
    bcfg.canary = CANARY;
    pool_blocking_config_init(&bcfg.s);
    check_reserved(bcfg.s.reserved, "pool_blocking_config_init");
    CHECK(bcfg.canary == CANARY, "pool_blocking_config_init wrote past its struct");

    struct guarded_platform plat;
    memset(&plat, 0xff, sizeof plat);
    plat.canary = CANARY;
    pool_platform_init(&plat.s);
    check_reserved(plat.s.reserved, "pool_platform_init");
    CHECK(plat.s.spawn == NULL && plat.s.context == NULL, "pool_platform_init: fields NULL");
    CHECK(plat.canary == CANARY, "pool_platform_init wrote past struct pool_platform");

    /* A pool from the (possibly grown) config: work runs, stats come back in the old layout. */
    struct pool *pool = NULL;
    cfg.s.max_threads = 2;
    if (!CHECK_STATUS(pool_create(&cfg.s, &pool), POOL_OK, "pool_create")) return test_finish();
    static struct task tasks[100];
    for (int i = 0; i < 100; i++) {
        tasks[i] = (struct task){ .callback = count };
        CHECK_STATUS(pool_submit_to(pool, &tasks[i]), POOL_OK, "submit");
    }
    CHECK_STATUS(pool_shutdown(pool), POOL_OK, "shutdown");
    CHECK_EQ(atomic_load(&ran), 100, "tasks run");

    struct guarded_stats st;
    memset(&st, 0xff, sizeof st);
    st.canary = CANARY;
    CHECK_STATUS(pool_stats(pool, &st.s), POOL_OK, "pool_stats");
    CHECK_EQ(st.s.polled, 100, "stats.polled");
    CHECK_EQ(st.s.queued, 0, "stats.queued after shutdown");
    check_reserved(st.s.reserved, "pool_stats");
    CHECK(st.canary == CANARY, "pool_stats wrote past struct pool_stats");
    memset(&st.s, 0xff, sizeof st.s);
    CHECK_STATUS(pool_worker_stats(pool, 0, &st.s), POOL_OK, "pool_worker_stats");
    check_reserved(st.s.reserved, "pool_worker_stats");
    CHECK(st.canary == CANARY, "pool_worker_stats wrote past struct pool_stats");
    struct pool_queue q;
    if (CHECK_STATUS(pool_queue_init(&q, pool, 1, 0, NULL), POOL_OK, "pool_queue_init")) {
        struct guarded_qstats qs;
        memset(&qs, 0xff, sizeof qs);
        qs.canary = CANARY;
        CHECK_STATUS(pool_queue_stats(&q, &qs.s), POOL_OK, "pool_queue_stats");
        CHECK_EQ(qs.s.width, 1, "queue stats.width");
        check_reserved(qs.s.reserved, "pool_queue_stats");
        CHECK(qs.canary == CANARY, "pool_queue_stats wrote past its struct");
        CHECK_STATUS(pool_queue_destroy(&q), POOL_OK, "pool_queue_destroy");
    }
    pool_destroy(pool);

    struct pool_blocking *bp = NULL;
    bcfg.s.max_threads = 1;
    if (CHECK_STATUS(pool_blocking_create(&bcfg.s, &bp), POOL_OK, "pool_blocking_create")) {
        struct guarded_metrics m;
        memset(&m, 0xff, sizeof m);
        m.canary = CANARY;
        CHECK_STATUS(pool_blocking_metrics(bp, &m.s), POOL_OK, "pool_blocking_metrics");
        CHECK_EQ(m.s.tasks_run, 0, "metrics.tasks_run");
        CHECK_EQ(m.s.tasks_refused, 0, "metrics.tasks_refused");
        check_reserved(m.s.reserved, "pool_blocking_metrics");
        CHECK(m.canary == CANARY, "pool_blocking_metrics wrote past its struct");
        pool_blocking_destroy(bp);
    }

    /* A caller built against a newer pool.h sets a field this library does not know (a
     * reserved word here): refused, nothing created. */
    struct pool_config newer;
    pool_config_init(&newer);
    newer.reserved[POOL_CONFIG_RESERVED_WORDS - 1] = 1;
    struct pool *sentinel = (struct pool *)(uintptr_t)0x1234, *out = sentinel;
    CHECK_STATUS(pool_create(&newer, &out), POOL_ERR_INVALID, "pool_create with a reserved word set");
    CHECK(out == sentinel, "pool_create wrote *out on error");
    struct pool_blocking_config bnewer;
    pool_blocking_config_init(&bnewer);
    bnewer.reserved[POOL_RESERVED_WORDS - 1] = 1;
    struct pool_blocking *bout = NULL;
    CHECK_STATUS(pool_blocking_create(&bnewer, &bout), POOL_ERR_INVALID,
                 "pool_blocking_create with a reserved word set");
    CHECK(bout == NULL, "pool_blocking_create wrote *out on error");
    return test_finish();
}
