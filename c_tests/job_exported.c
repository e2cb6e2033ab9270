/*
 * job_exported.c: job.c's sections against the library's exported pool_job_fork /
 * pool_job_join, the symbols a binding calls when it cannot use pool.h's static inline
 * functions (README, "ABI policy"). Defining POOL_H_INLINE before pool.h leaves the inline
 * definitions out; the two functions are then declared here and resolved from libpool. The
 * pair job.c calls "inline" is so the library's, and its mixed pairing checks that a job
 * forked through one name is joined through the other.
 */
#define POOL_H_INLINE
#include "common.h" /* includes pool.h, after the feature macros it sets */

int pool_job_fork(struct pool_worker *worker, struct pool_job *job);
int pool_job_join(struct pool_worker *worker, struct pool_job *job);

#define JOB_SECOND_PAIR_NAME "pool_job_fork / pool_job_join (the library's exported symbols)"
#include "job.c"
