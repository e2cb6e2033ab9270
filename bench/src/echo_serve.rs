//! The echo workload's servers and client, shared by the harness's `echo` (`echo.rs`) and the
//! one-run-per-process `examples/echo.rs`: a loopback TCP echo server on our runtime
//! (`pool::net`) or on tokio's, and one client (a thread running a tokio current-thread
//! runtime, [`CONNECTIONS`] connections, each doing `round_trips` round trips of [`MESSAGE`]
//! bytes: write, then read the echo back).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Client connections.
pub const CONNECTIONS: usize = 64;
/// Bytes per message.
pub const MESSAGE: usize = 64;

/// Runs the client against `addr`; returns the seconds all the round trips took.
pub fn drive(addr: SocketAddr, round_trips: usize) -> f64 {
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
                        for _ in 0..round_trips {
                            s.write_all(&msg).await.expect("write");
                            s.read_exact(&mut back).await.expect("read");
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.expect("client task");
            }
            let secs = start.elapsed().as_secs_f64();
            if std::env::var_os("ECHO_THREADS").is_some() {
                eprintln!("client {}", thread_cpu_ms("/proc/thread-self/schedstat"));
            }
            secs
        })
    })
    .join()
    .expect("client thread")
}

/// The CPU time and the run-queue wait (ms) in a `/proc/.../schedstat` file (its first two
/// fields, in ns), and the times it was scheduled, as a string.
pub fn thread_cpu_ms(path: &str) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let f: Vec<f64> = s.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    if f.len() < 3 {
        return String::from("?");
    }
    format!("{:.0}/{:.0}/{}", f[0] / 1e6, f[1] / 1e6, f[2])
}

/// Our server: a pool of `threads` workers (`ECHO_SPINS=n` sets its `idle_spins`) with its I/O
/// driver, accepting and echoing on spawned futures. Keep the pool and the driver alive while
/// the server is used.
pub fn serve_ours(threads: usize) -> (Arc<pool::ThreadPool<pool::ThreadSpawner>>, pool::net::Net, SocketAddr) {
    let spins = std::env::var("ECHO_SPINS").ok().and_then(|v| v.parse().ok()).unwrap_or(pool::DEFAULT_IDLE_SPINS);
    let pool = Arc::new(pool::ThreadPool::new(pool::Config::default().with_max_threads(threads).with_idle_spins(spins)).expect("pool"));
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
    (pool, net, addr)
}

/// tokio's server: a multi-thread runtime of `threads` workers with I/O enabled, the same
/// accept-and-echo loop. Keep the runtime alive while the server is used.
pub fn serve_tokio(threads: usize) -> (tokio::runtime::Runtime, SocketAddr) {
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
    (rt, addr)
}
