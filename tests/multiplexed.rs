//! Multiplexed connections (`ClientBuilder::multiplexed`): every lock type
//! over shared sockets, many threads on few connections (every reply to its
//! own caller), and the faults of
//! a shared socket: killed with many commands in flight (no lost unlock, no
//! double acquire, every caller answered in time), and a reply delayed past
//! the response timeout (outcome unknown for what was in flight, nothing
//! sent again, later commands on a new socket).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, MultiLock};
use support::RedisServer;
use support::every_kind::every_kind;
use support::proxy::{Fault, Proxy};

fn multiplexed(url: &str, connections: u32, response_timeout: Duration) -> Client {
    Client::builder(url)
        .multiplexed(connections)
        .response_timeout(response_timeout)
        .unlock_retries(5, Duration::from_millis(50))
        .build()
        .expect("multiplexed client")
}

/// Command connections of `server` (`CLIENT LIST TYPE normal`), the
/// caller's own included.
fn normal_clients(server: &RedisServer) -> usize {
    let list: String = server.cmd(&["CLIENT", "LIST", "TYPE", "normal"]);
    list.lines().count()
}

#[test]
fn every_kind_works_multiplexed() {
    let server = RedisServer::start();
    let holder = multiplexed(&server.url(), 2, Duration::from_secs(3));
    let waiter = multiplexed(&server.url(), 1, Duration::from_secs(3));
    let handoffs = every_kind(&holder, &waiter, &|kind| format!("mux-{kind}"), &|_, _| {});
    assert_eq!(handoffs.len(), support::every_kind::KINDS.len());
}

#[test]
fn many_threads_share_the_sockets_and_exclude_each_other() {
    let server = RedisServer::start();
    let client = multiplexed(&server.url(), 2, Duration::from_secs(3));
    let names = 4;
    let held: Arc<Vec<AtomicBool>> = Arc::new((0..names).map(|_| AtomicBool::new(false)).collect());
    let threads: Vec<_> = (0..32)
        .map(|t| {
            let client = client.clone();
            let held = Arc::clone(&held);
            thread::spawn(move || {
                for i in 0..40 {
                    let n = (t + i) % names;
                    let lock = client.lock(format!("mux-shared-{n}"));
                    let guard = lock.lock().expect("lock");
                    assert!(!held[n].swap(true, Ordering::SeqCst), "double acquire");
                    assert_eq!(lock.hold_count().expect("count"), 1);
                    held[n].store(false, Ordering::SeqCst);
                    guard.unlock().expect("unlock");
                    // A distinct name too: pure pipelining.
                    let own = client.lock(format!("mux-own-{t}"));
                    own.lock().expect("own").unlock().expect("own unlock");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker");
    }
    // Two shared sockets, the watchdog's, the subscriber's (listed as a
    // normal client once it unsubscribed from everything) and this check's.
    let clients = normal_clients(&server);
    let list: String = server.cmd(&["CLIENT", "LIST", "TYPE", "normal"]);
    assert!(clients <= 5, "{clients} command connections: {list}");
    let keys: Vec<String> = server.cmd(&["KEYS", "mux-*"]);
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[test]
fn every_reply_reaches_its_own_caller() {
    // Many threads on one socket, each reading back a number only it
    // writes: a reply handed to the wrong caller (the replies of one read
    // go out together, and their callers' next commands in one write)
    // shows as another thread's number.
    let server = RedisServer::start();
    let client = multiplexed(&server.url(), 1, Duration::from_secs(3));
    let threads: Vec<_> = (0..48u32)
        .map(|t| {
            let client = client.clone();
            thread::spawn(move || {
                let semaphore = client.semaphore(format!("mux-route-{t}"));
                let base = i64::from(t) * 1000;
                assert!(semaphore.try_set_permits(t * 1000).expect("set"));
                for i in 1..=150 {
                    semaphore.add_permits(1).expect("add");
                    assert_eq!(semaphore.available_permits().expect("count"), base + i);
                    // A lock's hold count, reentered up to its thread's
                    // number, on the same socket.
                    let lock = client.lock(format!("mux-route-lock-{t}"));
                    let depth = 1 + (t + i as u32) % 3;
                    let guards: Vec<_> = (0..depth).map(|_| lock.lock().expect("lock")).collect();
                    assert_eq!(lock.hold_count().expect("count"), u64::from(depth));
                    for guard in guards.into_iter().rev() {
                        guard.unlock().expect("unlock");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker");
    }
    let locks: Vec<String> = server.cmd(&["KEYS", "mux-route-lock-*"]);
    assert!(locks.is_empty(), "left behind: {locks:?}");
}

#[test]
fn a_killed_socket_with_fifty_commands_in_flight_loses_no_unlock() {
    let server = RedisServer::start();
    let response = Duration::from_secs(1);
    let client = multiplexed(&server.url(), 2, response);
    let names = 5;
    let held: Arc<Vec<AtomicBool>> = Arc::new((0..names).map(|_| AtomicBool::new(false)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let (acquired, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // The longest any one call may take: a lock waits at most 300 ms for
    // the lock, plus a reply's response timeout (and its slack), plus a
    // resend; an unlock its retries.
    let bound = Duration::from_millis(300) + response * 3 + Duration::from_millis(500);
    let threads: Vec<_> = (0..50)
        .map(|t| {
            let client = client.clone();
            let held = Arc::clone(&held);
            let stop = Arc::clone(&stop);
            let (acquired, failures) = (Arc::clone(&acquired), Arc::clone(&failures));
            thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Acquire) {
                    i += 1;
                    let n = i % names;
                    let lock = client.lock(format!("mux-kill-{n}"));
                    let started = Instant::now();
                    let attempt = lock.try_lock_for(Duration::from_millis(300));
                    assert!(
                        started.elapsed() < bound,
                        "acquire took {:?}",
                        started.elapsed()
                    );
                    let guard = match attempt {
                        Ok(Some(guard)) => guard,
                        Ok(None) => continue,
                        Err(e) => {
                            assert!(e.is_transient(), "{e:?}");
                            failures.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    assert!(
                        !held[n].swap(true, Ordering::SeqCst),
                        "double acquire of {n}"
                    );
                    acquired.fetch_add(1, Ordering::Relaxed);
                    thread::sleep(Duration::from_micros(200));
                    held[n].store(false, Ordering::SeqCst);
                    let started = Instant::now();
                    let released = guard.unlock();
                    assert!(
                        started.elapsed() < bound,
                        "unlock took {:?}",
                        started.elapsed()
                    );
                    if let Err(e) = released {
                        assert!(e.is_transient(), "{e:?}");
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // Kill the command sockets over and over while the threads run.
    let mut kills = 0;
    for _ in 0..15 {
        thread::sleep(Duration::from_millis(100));
        let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        kills += killed;
    }
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().expect("worker");
    }
    assert!(kills > 0, "nothing killed");
    assert!(acquired.load(Ordering::Relaxed) > 100, "too little work");
    // No lost unlock: every lock is free (a release whose reply was lost is
    // sent again and sets the count it keeps).
    for n in 0..names {
        let lock = client.lock(format!("mux-kill-{n}"));
        assert!(!lock.is_locked().expect("is_locked"), "lock {n} left held");
    }
    // Later commands work on fresh sockets.
    client
        .lock("mux-kill-after")
        .lock()
        .expect("after")
        .unlock()
        .expect("after unlock");
    eprintln!(
        "killed {kills} connections; {} acquisitions, {} transient failures",
        acquired.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed)
    );
}

#[test]
fn a_reply_delayed_past_the_timeout_fails_what_is_in_flight_and_nothing_is_resent() {
    let (server, proxy) = Proxy::with_server();
    let client = multiplexed(&proxy.url(), 1, Duration::from_millis(300));
    let marker = "mux-delayed";
    // Others in flight behind the delayed reply on the one socket.
    let lock = client.lock(marker);
    let sent = proxy.requests_containing(marker);
    proxy.arm(marker, Fault::DelayReply(Duration::from_millis(1200)));
    let others: Vec<_> = (0..8)
        .map(|t| {
            let client = client.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(50));
                let name = format!("mux-behind-{t}");
                let started = Instant::now();
                let result = client.lock(&name).try_lock().map(|g| g.is_some());
                (name, result, started.elapsed())
            })
        })
        .collect();
    let started = Instant::now();
    let e = lock.try_lock().expect_err("a delayed reply");
    let took = started.elapsed();
    assert!(
        matches!(e, Error::Timeout { .. } | Error::OutcomeUnknown { .. }),
        "{e:?}"
    );
    assert!(
        took < Duration::from_millis(300 + 300),
        "answered after {took:?}"
    );
    for other in others {
        let (name, result, took) = other.join().expect("other");
        assert!(
            took < Duration::from_millis(700),
            "{name} answered after {took:?}"
        );
        if let Err(e) = result {
            assert!(e.is_transient(), "{name}: {e:?}");
        }
    }
    // The delayed reply lands; nothing was sent again.
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(proxy.requests_containing(marker), sent + 1, "resent");
    // Later commands work, on a new socket.
    let guard = client.lock("mux-later").lock().expect("later");
    guard.unlock().expect("later unlock");
    // The acquire ran once on the server: this client holds it (its own
    // count re-checked) or it is free after a forced unlock.
    let held: i64 = server.cmd(&["EXISTS", marker]);
    assert!(held <= 1);
}

#[test]
fn multiplexed_rejects_zero_connections() {
    let e = Client::builder("redis://127.0.0.1:1/")
        .multiplexed(0)
        .build()
        .expect_err("0");
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
}

#[test]
fn a_multilock_scatters_its_members_over_the_shared_socket() {
    // Every member's acquire is written before any reply is read: on one
    // shared socket, pipelined; each reply goes to its member.
    let server = RedisServer::start();
    let client = multiplexed(&server.url(), 1, Duration::from_secs(3));
    let other = multiplexed(&server.url(), 1, Duration::from_secs(3));
    let names = ["mux-m-a", "mux-m-b", "mux-m-c"];
    let multi = MultiLock::new(names.map(|name| client.lock(name)));
    let guard = multi
        .try_lock_for(Duration::from_secs(1))
        .expect("try_lock_for")
        .expect("free members");
    assert_eq!(guard.guards().len(), 3);
    for name in names {
        assert!(other.lock(name).is_locked().expect("is_locked"), "{name}");
        assert!(
            other.lock(name).try_lock().expect("try_lock").is_none(),
            "{name}"
        );
    }
    guard.unlock().expect("unlock");
    for name in names {
        assert!(!other.lock(name).is_locked().expect("is_locked"), "{name}");
    }
}
