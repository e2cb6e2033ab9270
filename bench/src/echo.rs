//! BENCH.md's `echo` workload, bounded: a loopback TCP echo server on our runtime
//! (`pool::net`) and on tokio's, each with `--threads` workers, driven by the same client: one
//! thread running a tokio current-thread runtime with 64 connections, each doing
//! [`ROUND_TRIPS`] round trips of a 64-byte message (write, then read the echo back). Per run:
//! microseconds per request over the whole run (the lower the better) and, as the extra
//! figure, requests per second. `ECHO_SPINS=n` sets our pool's `Config::idle_spins` (the
//! default otherwise), to see what the idle spin costs the client on a 2-core machine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::common::{Contender, Sample};
use crate::ours::OurPool;
use pool::Config;

const CONNECTIONS: usize = 64;
const ROUND_TRIPS: usize = 1_000;
const MESSAGE: usize = 64;

pub fn workloads() -> Vec<crate::Workload> {
    vec![crate::Workload {
        name: "echo",
        unit: "µs/request",
        what: "loopback TCP echo, 64 connections x 1,000 round trips of 64 bytes (same client)",
        warmup: true,
        extra: Some("requests/s"),
        baseline: None,
        interleave: false,
        contenders,
    }]
}

/// The client: 64 connections on a current-thread tokio runtime, on its own thread.
fn drive(addr: SocketAddr) -> Sample {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("client runtime");
        rt.block_on(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut streams = Vec::new();
            for _ in 0..CONNECTIONS {
                let s = tokio::net::TcpStream::connect(addr).await.expect("connect");
                s.set_nodelay(true).expect("nodelay");
                streams.push(s);
            }
            let start = Instant::now();
            let tasks: Vec<_> = streams
                .into_iter()
                .map(|mut s| {
                    tokio::spawn(async move {
                        let msg = [7u8; MESSAGE];
                        let mut back = [0u8; MESSAGE];
                        for _ in 0..ROUND_TRIPS {
                            s.write_all(&msg).await.expect("write");
                            s.read_exact(&mut back).await.expect("read");
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.expect("client task");
            }
            let elapsed = start.elapsed();
            let requests = (CONNECTIONS * ROUND_TRIPS) as f64;
            Sample { value: elapsed.as_secs_f64() * 1e6 / requests, extra: Some(requests / elapsed.as_secs_f64()) }
        })
    })
    .join()
    .expect("client thread")
}

fn contenders() -> Vec<Contender> {
    vec![
        Contender::new("pool", "pool::net on ThreadPool::spawn_future tasks (mio driver)", |threads| {
            let spins = std::env::var("ECHO_SPINS").ok().and_then(|v| v.parse().ok()).unwrap_or(pool::DEFAULT_IDLE_SPINS);
            let pool = Arc::new(OurPool::new(Config { max_threads: threads, idle_spins: spins, ..Config::default() }).expect("pool"));
            let net = pool::net::Net::install(&pool).expect("net");
            let listener = pool::net::TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).expect("bind");
            let addr = listener.local_addr().expect("addr");
            let p = pool.clone();
            pool.spawn_future(async move {
                while let Ok((s, _)) = listener.accept().await {
                    let _ = s.set_nodelay(true);
                    p.spawn_future(async move {
                        let mut buf = [0u8; 4096];
                        loop {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => {
                                    if s.write_all(&buf[..n]).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    })
                    .expect("spawn");
                }
            })
            .expect("spawn");
            Box::new(move || {
                let _keep = (&pool, &net);
                drive(addr)
            })
        }),
        Contender::new("tokio", "tokio::net on a multi-thread Runtime (enable_io)", |threads| {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_io().build().expect("tokio");
            let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
            let addr = listener.local_addr().expect("addr");
            rt.spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                while let Ok((mut s, _)) = listener.accept().await {
                    let _ = s.set_nodelay(true);
                    tokio::spawn(async move {
                        let mut buf = [0u8; 4096];
                        loop {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => {
                                    if s.write_all(&buf[..n]).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    });
                }
            });
            Box::new(move || {
                let _keep = &rt;
                drive(addr)
            })
        }),
    ]
}
