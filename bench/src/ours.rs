//! Our pool's column. Two variants per workload where both make sense:
//! * `pool`: the intrusive path (the product's design): every `Task` preallocated in a `Vec`
//!   before the timed region, submitted by pointer, no allocation while timed;
//! * `pool(boxed)`: the `ThreadPool::spawn` convenience, one `Box` per closure.

use std::ptr::{addr_of_mut, NonNull};

use pool::{container_of, Batch, Config, Task, ThreadPool, ThreadSpawner};

use crate::common::*;

pub type OurPool = ThreadPool<ThreadSpawner>;

pub const INTRUSIVE: &str = "pool";
pub const BOXED: &str = "pool(boxed)";
pub const LIFO: &str = "pool(lifo)";

/// A pool reachable as `&'static` from callbacks and closures; shut down and freed on drop
/// (after every run completed, so no task still refers to it).
pub struct PoolBox(&'static OurPool);

impl PoolBox {
    pub fn new(threads: usize) -> Self {
        let pool = OurPool::new(Config::default().with_max_threads(threads)).expect("pool::ThreadPool::new");
        PoolBox(Box::leak(Box::new(pool)))
    }
    pub fn get(&self) -> &'static OurPool {
        self.0
    }
}

impl Drop for PoolBox {
    fn drop(&mut self) {
        if std::env::var_os("POOL_BENCH_STATS").is_some() {
            eprint!(" [{:?}]", self.0.stats());
        }
        self.0.shutdown().expect("shutdown");
        // SAFETY: came from Box::leak in `new`; shut down, every thread joined, no task left
        // that refers to it, and no other reference is used after this.
        drop(unsafe { Box::from_raw(self.0 as *const OurPool as *mut OurPool) });
    }
}

// ---------------------------------------------------------------------------------------------
// Intrusive task types.

/// The tiny task: header first, then the shared counter.
#[repr(C)]
struct Tiny {
    task: Task,
    shared: *const Shared,
}

unsafe extern "C" fn tiny(task: *mut Task) {
    // SAFETY: every task with this callback is the `task` field of a live `Tiny`, whose
    // `shared` is leaked ('static).
    let shared = unsafe { &*(*container_of!(task, Tiny, task)).shared };
    shared.tick();
}

fn tiny_tasks(n: usize, shared: &'static Shared) -> Vec<Tiny> {
    (0..n).map(|_| Tiny { task: Task::new(tiny), shared }).collect()
}

/// Pointer to the `i`th task header of a `Tiny` array.
///
/// # Safety
/// `base` points to at least `i + 1` live `Tiny`s.
#[inline(always)]
unsafe fn header(base: *mut Tiny, i: usize) -> NonNull<Task> {
    // SAFETY: the caller's contract; a field pointer is never null.
    unsafe { NonNull::new_unchecked(addr_of_mut!((*base.add(i)).task)) }
}

/// spawn_local's root: from inside a worker, submits every task of the array.
#[repr(C)]
struct Root {
    task: Task,
    pool: *const OurPool,
    tasks: *mut Tiny,
    n: usize,
}

unsafe extern "C" fn root(task: *mut Task) {
    // SAFETY: the `task` field of a live `Root` whose pointers outlive the run.
    let root = unsafe { &*container_of!(task, Root, task) };
    // SAFETY: as above.
    let pool = unsafe { &*root.pool };
    for i in 0..root.n {
        // SAFETY: `tasks` holds `n` tasks, none queued (the previous run finished).
        unsafe { pool.submit(header(root.tasks, i)).expect("submit from worker") };
    }
}

/// chain's hop: ticks, then submits the next hop.
#[repr(C)]
struct Hop {
    task: Task,
    shared: *const Shared,
    pool: *const OurPool,
    next: *mut Hop,
    lifo: bool,
}

unsafe extern "C" fn hop(task: *mut Task) {
    // SAFETY: the `task` field of a live `Hop` in the chain array (outlives the run).
    let hop = unsafe { &*container_of!(task, Hop, task) };
    // SAFETY: leaked / outlives the run.
    let shared = unsafe { &*hop.shared };
    if !shared.tick() {
        // SAFETY: `next` is the following hop of the array (only the last hop has none, and it
        // is the one whose tick returns true); it is not queued.
        unsafe {
            let next = NonNull::new_unchecked(addr_of_mut!((*hop.next).task));
            if hop.lifo {
                (*hop.pool).submit_lifo(next).expect("submit_lifo next hop");
            } else {
                (*hop.pool).submit(next).expect("submit next hop");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads.

pub fn spawn_remote() -> Vec<Contender> {
    vec![
        Contender::new(INTRUSIVE, "intrusive submit; 1M-task array preallocated outside the timed region", |threads| {
            let pool = PoolBox::new(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            let mut tasks = tiny_tasks(SPAWN_TASKS, shared);
            Box::new(move || {
                let p = pool.get();
                let base = tasks.as_mut_ptr();
                shared.reset();
                let (elapsed, ()) = time(|| {
                    for i in 0..SPAWN_TASKS {
                        // SAFETY: the array outlives the run, which ends when every task ran.
                        unsafe { p.submit(header(base, i)).expect("submit") };
                    }
                    shared.wait();
                });
                shared.check();
                Sample::per_item(elapsed, SPAWN_TASKS)
            })
        }),
        Contender::new(BOXED, "ThreadPool::spawn, one Box per task", |threads| {
            let pool = PoolBox::new(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                let p = pool.get();
                shared.reset();
                let (elapsed, ()) = time(|| {
                    for _ in 0..SPAWN_TASKS {
                        p.spawn(move || {
                            shared.tick();
                        })
                        .expect("spawn");
                    }
                    shared.wait();
                });
                shared.check();
                Sample::per_item(elapsed, SPAWN_TASKS)
            })
        }),
    ]
}

pub fn spawn_local() -> Vec<Contender> {
    vec![
        Contender::new(INTRUSIVE, "root task submits the preallocated array from its worker", |threads| {
            let pool = PoolBox::new(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            let mut tasks = tiny_tasks(SPAWN_TASKS, shared);
            let mut root_task = Box::new(Root {
                task: Task::new(root),
                pool: pool.get(),
                tasks: tasks.as_mut_ptr(),
                n: SPAWN_TASKS,
            });
            Box::new(move || {
                let _keep = &tasks;
                let p = pool.get();
                shared.reset();
                let root_ptr = NonNull::from(&mut root_task.task);
                let (elapsed, ()) = time(|| {
                    // SAFETY: root and array outlive the run; root not queued.
                    unsafe { p.submit(root_ptr).expect("submit root") };
                    shared.wait();
                });
                shared.check();
                Sample::per_item(elapsed, SPAWN_TASKS)
            })
        }),
        Contender::new(BOXED, "root closure calls ThreadPool::spawn from its worker", |threads| {
            let pool = PoolBox::new(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                let p = pool.get();
                shared.reset();
                let (elapsed, ()) = time(|| {
                    p.spawn(move || {
                        for _ in 0..SPAWN_TASKS {
                            p.spawn(move || {
                                shared.tick();
                            })
                            .expect("spawn from worker");
                        }
                    })
                    .expect("spawn root");
                    shared.wait();
                });
                shared.check();
                Sample::per_item(elapsed, SPAWN_TASKS)
            })
        }),
    ]
}

pub fn spawn_batch() -> Vec<Contender> {
    vec![Contender::new(INTRUSIVE, "Batch of 256 + submit_batch; building the batches is timed", |threads| {
        let pool = PoolBox::new(threads);
        let shared = Shared::leak(SPAWN_TASKS);
        let mut tasks = tiny_tasks(SPAWN_TASKS, shared);
        Box::new(move || {
            let p = pool.get();
            let base = tasks.as_mut_ptr();
            shared.reset();
            let (elapsed, ()) = time(|| {
                let mut i = 0;
                while i < SPAWN_TASKS {
                    let end = (i + BATCH_SIZE).min(SPAWN_TASKS);
                    let mut batch = Batch::new();
                    for j in i..end {
                        // SAFETY: each task goes into exactly one batch per run.
                        unsafe { batch.push(header(base, j)) };
                    }
                    // SAFETY: the array outlives the run.
                    unsafe { p.submit_batch(batch).expect("submit_batch") };
                    i = end;
                }
                shared.wait();
            });
            shared.check();
            Sample::per_item(elapsed, SPAWN_TASKS)
        })
    })]
}

pub fn multi_producer() -> Vec<Contender> {
    vec![
        Contender::new(INTRUSIVE, "each producer submits its own slice of the preallocated array", |threads| {
            let pool = PoolBox::new(threads);
            let shared = Shared::leak(PRODUCERS * PER_PRODUCER);
            let mut tasks = tiny_tasks(PRODUCERS * PER_PRODUCER, shared);
            Box::new(move || {
                let p = pool.get();
                let base = SendPtr(tasks.as_mut_ptr());
                shared.reset();
                let elapsed = producers(shared, |k| {
                    let base = &base;
                    for i in k * PER_PRODUCER..(k + 1) * PER_PRODUCER {
                        // SAFETY: disjoint slices per producer; the array outlives the run.
                        unsafe { p.submit(header(base.0, i)).expect("submit") };
                    }
                });
                shared.check();
                Sample::per_item(elapsed, PRODUCERS * PER_PRODUCER)
            })
        }),
        Contender::new(BOXED, "ThreadPool::spawn from each producer", |threads| {
            let pool = PoolBox::new(threads);
            let shared = Shared::leak(PRODUCERS * PER_PRODUCER);
            Box::new(move || {
                let p = pool.get();
                shared.reset();
                let elapsed = producers(shared, |_| {
                    for _ in 0..PER_PRODUCER {
                        p.spawn(move || {
                            shared.tick();
                        })
                        .expect("spawn");
                    }
                });
                shared.check();
                Sample::per_item(elapsed, PRODUCERS * PER_PRODUCER)
            })
        }),
    ]
}

fn boxed_hop(p: &'static OurPool, shared: &'static Shared) {
    p.spawn(move || {
        if !shared.tick() {
            boxed_hop(p, shared);
        }
    })
    .expect("spawn hop");
}

fn intrusive_chain(threads: usize, lifo: bool) -> Runner {
    let pool = PoolBox::new(threads);
    let shared = Shared::leak(CHAIN_HOPS);
    let mut hops: Vec<Hop> = (0..CHAIN_HOPS)
        .map(|_| Hop { task: Task::new(hop), shared, pool: pool.get(), next: std::ptr::null_mut(), lifo })
        .collect();
    let base = hops.as_mut_ptr();
    for i in 0..CHAIN_HOPS - 1 {
        // SAFETY: in bounds.
        unsafe { (*base.add(i)).next = base.add(i + 1) };
    }
    Box::new(move || {
        let _keep = &hops;
        let p = pool.get();
        shared.reset();
        let (elapsed, ()) = time(|| {
            // SAFETY: the chain array outlives the run.
            unsafe { p.submit(NonNull::new_unchecked(addr_of_mut!((*base).task))).expect("submit") };
            shared.wait();
        });
        shared.check();
        Sample::per_item(elapsed, CHAIN_HOPS)
    })
}

pub fn chain() -> Vec<Contender> {
    vec![
        Contender::new(INTRUSIVE, "100k preallocated hops, each submits the next from its callback", |threads| {
            intrusive_chain(threads, false)
        }),
        Contender::new(LIFO, "as pool, but the next hop goes in with submit_lifo (LIFO slot)", |threads| {
            intrusive_chain(threads, true)
        }),
        Contender::new(BOXED, "each closure spawns the next", |threads| {
            let pool = PoolBox::new(threads);
            let shared = Shared::leak(CHAIN_HOPS);
            Box::new(move || {
                let p = pool.get();
                shared.reset();
                let (elapsed, ()) = time(|| {
                    boxed_hop(p, shared);
                    shared.wait();
                });
                shared.check();
                Sample::per_item(elapsed, CHAIN_HOPS)
            })
        }),
    ]
}

pub fn idle_cpu() -> Vec<Contender> {
    vec![Contender::new(INTRUSIVE, "fresh pool per run; one tiny task (ThreadPool::spawn)", |threads| {
        let shared = Shared::leak(1);
        Box::new(move || {
            let pool = PoolBox::new(threads);
            let p = pool.get();
            shared.reset();
            let sample = idle_sample(|| {
                p.spawn(move || {
                    shared.tick();
                })
                .expect("spawn");
                shared.wait();
            });
            drop(pool);
            sample
        })
    }),
    Contender::new("pool(timer 1h)", "as pool, plus one task asleep on a timer an hour away (pool::time::sleep)", |threads| {
        Box::new(move || {
            let pool = PoolBox::new(threads);
            let p = pool.get();
            let sleeper = p
                .spawn_future(async { pool::time::sleep(std::time::Duration::from_secs(3600)).await })
                .expect("spawn_future");
            let sample = idle_sample(|| {
                while p.pending_timers() == 0 {
                    std::thread::yield_now();
                }
            });
            drop(pool); // shutdown cancels the sleeper
            assert!(sleeper.join().expect_err("cancelled at shutdown").is_cancelled());
            sample
        })
    })]
}

pub fn blocking() -> Vec<Contender> {
    vec![Contender::new(BOXED, "plain ThreadPool::spawn (no blocking API yet): 2 threads sleep in turn", |threads| {
        let pool = PoolBox::new(threads);
        let shared = Shared::leak(BLOCKING_TASKS);
        Box::new(move || {
            let p = pool.get();
            blocking_sample(shared, || {
                for _ in 0..BLOCKING_TASKS {
                    p.spawn(move || {
                        std::thread::sleep(BLOCKING_SLEEP);
                        shared.tick();
                    })
                    .expect("spawn");
                }
            })
        })
    })]
}
