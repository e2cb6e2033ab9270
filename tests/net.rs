//! `pool::net` (feature `net`): TCP echo with many connections, UDP round trips, and a server
//! that waits idle in the driver between clients. Every test under a watchdog: a lost
//! readiness event or a lost wake of the worker blocked in the poller hangs, and fails.
#![cfg(feature = "net")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{watchdog, watchdog_secs};
use pool::net::{Net, TcpListener, TcpStream, UdpSocket};
use pool::{Config, ThreadPool};

fn pool_and_net(threads: usize) -> (Arc<ThreadPool<pool::ThreadSpawner>>, Net) {
    let pool = Arc::new(ThreadPool::new(Config { max_threads: threads, ..Config::default() }).unwrap());
    let net = Net::install(&pool).unwrap();
    (pool, net)
}

#[test]
fn tcp_echo_many_connections() {
    watchdog("tcp_echo_many_connections", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let p = pool.clone();
        pool.spawn_future(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                p.spawn_future(async move {
                    let mut buf = [0u8; 64];
                    loop {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if stream.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                })
                .unwrap();
            }
        })
        .unwrap();
        let clients: Vec<_> = (0..16u8)
            .map(|c| {
                let net = net.clone();
                pool.spawn_future(async move {
                    let s = TcpStream::connect(&net, addr).await.unwrap();
                    s.set_nodelay(true).unwrap();
                    for i in 0..100u8 {
                        let msg = [c ^ i; 64];
                        s.write_all(&msg).await.unwrap();
                        let mut back = [0u8; 64];
                        s.read_exact(&mut back).await.unwrap();
                        assert_eq!(back, msg);
                    }
                })
                .unwrap()
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
    });
}

#[test]
fn udp_round_trips() {
    watchdog("udp_round_trips", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let server = UdpSocket::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        pool.spawn_future(async move {
            let mut buf = [0u8; 512];
            for _ in 0..50 {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], from).await.unwrap();
            }
        })
        .unwrap();
        let client = UdpSocket::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        pool.block_on(async {
            for i in 0..50u8 {
                client.send_to(&[i; 32], addr).await.unwrap();
                let mut buf = [0u8; 512];
                let (n, from) = client.recv_from(&mut buf).await.unwrap();
                assert_eq!((n, from, buf[0]), (32, addr, i));
            }
        });
    });
}

/// The server's worker blocks in the poller between clients that come from outside the pool
/// (std blocking sockets): each accept must wake it.
#[test]
fn idle_server_wakes_for_each_client() {
    watchdog("idle_server_wakes_for_each_client", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(1);
        let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        pool.spawn_future(async move {
            for _ in 0..10 {
                let (s, _) = listener.accept().await.unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                s.write_all(&b).await.unwrap();
            }
        })
        .unwrap();
        for i in 0..10u8 {
            std::thread::sleep(Duration::from_millis(5)); // the worker goes idle in the poller
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            std::io::Write::write_all(&mut s, &[i]).unwrap();
            let mut b = [0u8; 1];
            std::io::Read::read_exact(&mut s, &mut b).unwrap();
            assert_eq!(b[0], i);
        }
    });
}

/// A worker blocked in a join (help-until-complete, it cannot wait in the poller) while the
/// joined task waits for a connection: the other, idle worker must watch the poller. With a
/// timer pending too, so the joining worker would be tempted to take the timer-parker role.
#[test]
fn io_is_watched_while_a_worker_waits_in_a_join() {
    watchdog("io_is_watched_while_a_worker_waits_in_a_join", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let p = pool.clone();
        let outer = pool
            .spawn_future(async move {
                let far = p.spawn_future(pool::time::sleep(Duration::from_secs(3600))).unwrap();
                let inner = p
                    .spawn_future(async move {
                        let (s, _) = listener.accept().await.unwrap();
                        let mut b = [0u8; 1];
                        s.read_exact(&mut b).await.unwrap();
                        b[0]
                    })
                    .unwrap();
                // A blocking join on a worker: help-until-complete.
                let got = inner.join().unwrap();
                far.abort();
                drop(p);
                got
            })
            .unwrap();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut s, &[42]).unwrap();
        assert_eq!(outer.join().unwrap(), 42);
    });
}

/// A read shorter than its buffer clears readiness at once (no `WouldBlock` read to learn
/// it). The peer's data and its close arrive together, before the read: the close has no later
/// event, so the next read must still see it and return 0, not wait for ever. And a short
/// write (a full send buffer) clears writability: the rest goes out once the peer reads.
#[test]
fn short_transfers_clear_readiness_but_not_a_close() {
    watchdog("short_transfers_clear_readiness_but_not_a_close", watchdog_secs(60), |_| {
        let (pool, net) = pool_and_net(2);
        let listener = TcpListener::bind(&net, "127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = pool.spawn_future(async move { listener.accept().await.unwrap().0 }).unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        let server = accepted.join().unwrap();
        std::io::Write::write_all(&mut client, b"hello").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(20)); // data and FIN both queued first
        let (got, eof) = pool
            .block_on(async {
                let mut buf = [0u8; 64];
                let n = server.read(&mut buf).await.unwrap();
                (buf[..n].to_vec(), server.read(&mut buf).await.unwrap())
            });
        assert_eq!(got, b"hello");
        assert_eq!(eof, 0, "the close seen after a short read");

        // Short writes: more than the socket buffers hold, while the peer reads slowly.
        const TOTAL: usize = 8 << 20;
        let reader = std::thread::spawn(move || {
            let mut seen = 0;
            let mut buf = vec![0u8; 1 << 16];
            while seen < TOTAL {
                std::thread::sleep(Duration::from_micros(200));
                let n = std::io::Read::read(&mut client, &mut buf).unwrap();
                assert!(n > 0, "closed early");
                seen += n;
            }
            seen
        });
        let data = vec![7u8; TOTAL];
        pool.block_on(server.write_all(&data)).unwrap();
        assert_eq!(reader.join().unwrap(), TOTAL);
    });
}
