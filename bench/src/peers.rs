//! The peers' columns: tokio (multi-thread runtime), rayon, threadpool, chili. Every one runs
//! the same tiny task (`Shared::tick`) with the same completion signal as our pool.

use crate::common::*;

// ---------------------------------------------------------------------------------------------
// tokio

fn tokio_rt(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .build()
        .expect("tokio runtime")
}

/// Drops the runtime without waiting forever on anything left.
struct Rt(Option<tokio::runtime::Runtime>);
impl Drop for Rt {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
        }
    }
}

fn tokio_hop(shared: &'static Shared) {
    tokio::spawn(async move {
        if !shared.tick() {
            tokio_hop(shared);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// rayon

fn rayon_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool")
}

fn rayon_hop(shared: &'static Shared) {
    if !shared.tick() {
        rayon::spawn(move || rayon_hop(shared));
    }
}

// ---------------------------------------------------------------------------------------------
// threadpool

fn tp_hop(tp: threadpool::ThreadPool, shared: &'static Shared) {
    if !shared.tick() {
        let next = tp.clone();
        tp.execute(move || tp_hop(next, shared));
    }
}

/// One timed run of `n` tasks: `submit_all` then wait.
fn run_n(shared: &'static Shared, n: usize, submit_all: impl FnOnce()) -> Sample {
    shared.reset();
    let (elapsed, ()) = time(|| {
        submit_all();
        shared.wait();
    });
    shared.check();
    Sample::per_item(elapsed, n)
}

// ---------------------------------------------------------------------------------------------
// Workloads.

pub fn spawn_remote(batch: bool) -> Vec<Contender> {
    // spawn_batch: no peer has a batch API, so their figure is the same 1M spawns in a loop.
    let (n_tokio, n_rayon, n_tp) = if batch {
        ("no batch API: 1M Runtime::spawn in a loop", "no batch API: 1M ThreadPool::spawn in a loop", "no batch API: 1M execute in a loop")
    } else {
        ("Runtime::spawn from main, JoinHandle dropped", "ThreadPool::spawn from main", "execute from main")
    };
    vec![
        Contender::new("tokio", n_tokio, |threads| {
            let rt = Rt(Some(tokio_rt(threads)));
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                let rt = rt.0.as_ref().unwrap();
                run_n(shared, SPAWN_TASKS, || {
                    for _ in 0..SPAWN_TASKS {
                        rt.spawn(async move {
                            shared.tick();
                        });
                    }
                })
            })
        }),
        Contender::new("rayon", n_rayon, |threads| {
            let pool = rayon_pool(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                run_n(shared, SPAWN_TASKS, || {
                    for _ in 0..SPAWN_TASKS {
                        pool.spawn(move || {
                            shared.tick();
                        });
                    }
                })
            })
        }),
        Contender::new("threadpool", n_tp, |threads| {
            let tp = threadpool::ThreadPool::new(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                run_n(shared, SPAWN_TASKS, || {
                    for _ in 0..SPAWN_TASKS {
                        tp.execute(move || {
                            shared.tick();
                        });
                    }
                })
            })
        }),
    ]
}

pub fn spawn_local() -> Vec<Contender> {
    vec![
        Contender::new("tokio", "task calls tokio::spawn from its worker", |threads| {
            let rt = Rt(Some(tokio_rt(threads)));
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                let rt = rt.0.as_ref().unwrap();
                run_n(shared, SPAWN_TASKS, || {
                    rt.spawn(async move {
                        for _ in 0..SPAWN_TASKS {
                            tokio::spawn(async move {
                                shared.tick();
                            });
                        }
                    });
                })
            })
        }),
        Contender::new("rayon", "job calls rayon::spawn from its worker", |threads| {
            let pool = rayon_pool(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                run_n(shared, SPAWN_TASKS, || {
                    pool.spawn(move || {
                        for _ in 0..SPAWN_TASKS {
                            rayon::spawn(move || {
                                shared.tick();
                            });
                        }
                    });
                })
            })
        }),
        Contender::new("threadpool", "no worker-local queue: one job executes 1M via a cloned handle", |threads| {
            let tp = threadpool::ThreadPool::new(threads);
            let shared = Shared::leak(SPAWN_TASKS);
            Box::new(move || {
                run_n(shared, SPAWN_TASKS, || {
                    let inner = tp.clone();
                    tp.execute(move || {
                        for _ in 0..SPAWN_TASKS {
                            inner.execute(move || {
                                shared.tick();
                            });
                        }
                    });
                })
            })
        }),
    ]
}

pub fn multi_producer() -> Vec<Contender> {
    const N: usize = PRODUCERS * PER_PRODUCER;
    vec![
        Contender::new("tokio", "Handle::spawn from each producer", |threads| {
            let rt = Rt(Some(tokio_rt(threads)));
            let shared = Shared::leak(N);
            Box::new(move || {
                let handle = rt.0.as_ref().unwrap().handle().clone();
                shared.reset();
                let elapsed = producers(shared, |_| {
                    for _ in 0..PER_PRODUCER {
                        handle.spawn(async move {
                            shared.tick();
                        });
                    }
                });
                shared.check();
                Sample::per_item(elapsed, N)
            })
        }),
        Contender::new("rayon", "ThreadPool::spawn from each producer", |threads| {
            let pool = rayon_pool(threads);
            let shared = Shared::leak(N);
            Box::new(move || {
                shared.reset();
                let elapsed = producers(shared, |_| {
                    for _ in 0..PER_PRODUCER {
                        pool.spawn(move || {
                            shared.tick();
                        });
                    }
                });
                shared.check();
                Sample::per_item(elapsed, N)
            })
        }),
        Contender::new("threadpool", "execute from each producer (one cloned handle each)", |threads| {
            let tp = threadpool::ThreadPool::new(threads);
            let shared = Shared::leak(N);
            Box::new(move || {
                shared.reset();
                let handles: Vec<std::sync::Mutex<Option<threadpool::ThreadPool>>> =
                    (0..PRODUCERS).map(|_| std::sync::Mutex::new(Some(tp.clone()))).collect();
                let elapsed = producers(shared, |k| {
                    let tp = handles[k].lock().unwrap().take().unwrap();
                    for _ in 0..PER_PRODUCER {
                        tp.execute(move || {
                            shared.tick();
                        });
                    }
                });
                shared.check();
                Sample::per_item(elapsed, N)
            })
        }),
    ]
}

pub fn chain() -> Vec<Contender> {
    vec![
        Contender::new("tokio", "each task tokio::spawns the next", |threads| {
            let rt = Rt(Some(tokio_rt(threads)));
            let shared = Shared::leak(CHAIN_HOPS);
            Box::new(move || {
                let rt = rt.0.as_ref().unwrap();
                run_n(shared, CHAIN_HOPS, || {
                    rt.spawn(async move {
                        if !shared.tick() {
                            tokio_hop(shared);
                        }
                    });
                })
            })
        }),
        Contender::new("rayon", "each job rayon::spawns the next", |threads| {
            let pool = rayon_pool(threads);
            let shared = Shared::leak(CHAIN_HOPS);
            Box::new(move || run_n(shared, CHAIN_HOPS, || pool.spawn(move || rayon_hop(shared))))
        }),
        Contender::new("threadpool", "each job executes the next (handle cloned per hop)", |threads| {
            let tp = threadpool::ThreadPool::new(threads);
            let shared = Shared::leak(CHAIN_HOPS);
            Box::new(move || {
                run_n(shared, CHAIN_HOPS, || {
                    let next = tp.clone();
                    tp.execute(move || tp_hop(next, shared));
                })
            })
        }),
    ]
}

pub fn idle_cpu() -> Vec<Contender> {
    vec![
        Contender::new("no pool", "the floor: main thread sleeps, no pool exists", |_| {
            Box::new(move || idle_sample(|| ()))
        }),
        Contender::new("tokio", "fresh runtime per run; one Runtime::spawn", |threads| {
            let shared = Shared::leak(1);
            Box::new(move || {
                let rt = Rt(Some(tokio_rt(threads)));
                shared.reset();
                let sample = idle_sample(|| {
                    rt.0.as_ref().unwrap().spawn(async move {
                        shared.tick();
                    });
                    shared.wait();
                });
                drop(rt);
                sample
            })
        }),
        Contender::new("rayon", "fresh pool per run; one spawn", |threads| {
            let shared = Shared::leak(1);
            Box::new(move || {
                let pool = rayon_pool(threads);
                shared.reset();
                let sample = idle_sample(|| {
                    pool.spawn(move || {
                        shared.tick();
                    });
                    shared.wait();
                });
                drop(pool);
                sample
            })
        }),
        Contender::new("threadpool", "fresh pool per run; one execute", |threads| {
            let shared = Shared::leak(1);
            Box::new(move || {
                let tp = threadpool::ThreadPool::new(threads);
                shared.reset();
                let sample = idle_sample(|| {
                    tp.execute(move || {
                        shared.tick();
                    });
                    shared.wait();
                });
                tp.join();
                sample
            })
        }),
        Contender::new("chili", "fresh pool per run (thread_count = N: N-1 workers + heartbeat thread); one join, scope dropped", |threads| {
            let shared = Shared::leak(1);
            Box::new(move || {
                let pool = chili::ThreadPool::with_config(chili::Config {
                    thread_count: std::num::NonZero::new(threads),
                    ..Default::default()
                });
                shared.reset();
                let sample = idle_sample(|| {
                    let mut scope = pool.scope();
                    scope.join(|_| shared.tick(), |_| ());
                    drop(scope);
                    shared.wait();
                });
                drop(pool);
                sample
            })
        }),
    ]
}

pub fn blocking() -> Vec<Contender> {
    vec![
        Contender::new("tokio", "Handle::spawn_blocking (blocking pool, up to 512 threads; reused after warm-up)", |threads| {
            let rt = Rt(Some(tokio_rt(threads)));
            let shared = Shared::leak(BLOCKING_TASKS);
            Box::new(move || {
                let handle = rt.0.as_ref().unwrap().handle().clone();
                blocking_sample(shared, || {
                    for _ in 0..BLOCKING_TASKS {
                        handle.spawn_blocking(move || {
                            std::thread::sleep(BLOCKING_SLEEP);
                            shared.tick();
                        });
                    }
                })
            })
        }),
        Contender::new("rayon", "ThreadPool::spawn (fixed threads)", |threads| {
            let pool = rayon_pool(threads);
            let shared = Shared::leak(BLOCKING_TASKS);
            Box::new(move || {
                blocking_sample(shared, || {
                    for _ in 0..BLOCKING_TASKS {
                        pool.spawn(move || {
                            std::thread::sleep(BLOCKING_SLEEP);
                            shared.tick();
                        });
                    }
                })
            })
        }),
        Contender::new("threadpool", "execute (fixed threads)", |threads| {
            let tp = threadpool::ThreadPool::new(threads);
            let shared = Shared::leak(BLOCKING_TASKS);
            Box::new(move || {
                blocking_sample(shared, || {
                    for _ in 0..BLOCKING_TASKS {
                        tp.execute(move || {
                            std::thread::sleep(BLOCKING_SLEEP);
                            shared.tick();
                        });
                    }
                })
            })
        }),
    ]
}
