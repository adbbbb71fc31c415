//! A signal never breaks a connection. On Linux a socket read with a
//! timeout (`SO_RCVTIMEO`) fails with `EINTR` on any handled signal,
//! `SA_RESTART` or not: the multiplexed leader took it for a dropped
//! connection (the socket closed, every request in flight sent again: the
//! lock script reached Redis twice), and a pooled connection returned it as
//! an error ("Interrupted system call").
//!
//! Here SIGUSR1 (a handler installed without `SA_RESTART`) is sent to every
//! thread of the process about every millisecond, while threads take and
//! release locks through the default multiplexed client and a pooled one,
//! and another connection keeps the server asleep (`DEBUG SLEEP 0.3`) so
//! that reads block. No call may fail, the lock scripts must have run once
//! per call (no resend), and no client may have reconnected. Meanwhile, on
//! a second server, two threads contend for one lock, so that waiters
//! subscribe and the subscriber's connection reads under the signals too:
//! no call may fail there, and no connection may be opened again.
#![allow(unsafe_code)] // sigaction(2) and tgkill(2), in this test only

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use redisson_lock::Client;
use support::RedisServer;

static SIGNALS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// Handles SIGUSR1 by counting it, without `SA_RESTART`.
fn install_handler() {
    // SAFETY: a zeroed `sigaction` is valid; the handler only increments an
    // atomic (async-signal-safe); `sa_flags` 0 leaves `SA_RESTART` out.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = 0;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0,
            "sigaction"
        );
    }
}

/// Sends SIGUSR1 to every other thread of the process about every
/// millisecond until `stop`.
fn signal_storm(stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        // SAFETY: plain system calls with no memory handed over.
        let pid = unsafe { libc::getpid() };
        let own = unsafe { libc::syscall(libc::SYS_gettid) };
        while !stop.load(Ordering::Relaxed) {
            for task in std::fs::read_dir("/proc/self/task")
                .expect("tasks")
                .flatten()
            {
                let Some(tid) = task
                    .file_name()
                    .to_str()
                    .and_then(|t| t.parse::<i64>().ok())
                else {
                    continue;
                };
                if tid != own {
                    // SAFETY: tgkill to a thread of this process (one that
                    // ended meanwhile just fails with ESRCH).
                    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1) };
                }
            }
            thread::sleep(Duration::from_millis(1));
        }
    })
}

/// `INFO <section>`'s `field` as a number.
fn info_number(con: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().parse().expect("a number"))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// Successful `EVALSHA` calls so far.
fn evalsha_calls(con: &mut redis::Connection) -> u64 {
    support::state::command_calls(con, &["evalsha"])
}

/// Puts the server to sleep for 0.3 s (`DEBUG SLEEP`), meets `barrier`
/// once the command is sent, and reads the reply.
fn debug_sleep(sleeper: &mut TcpStream, barrier: Option<&Barrier>) {
    sleeper
        .write_all(b"*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$3\r\n0.3\r\n")
        .expect("DEBUG SLEEP");
    if let Some(barrier) = barrier {
        barrier.wait();
    }
    let mut ok = [0u8; 5];
    // `read_exact` reads again after EINTR.
    sleeper.read_exact(&mut ok).expect("DEBUG SLEEP reply");
    assert_eq!(&ok, b"+OK\r\n");
}

/// How many connections the server has named for the client `id`.
fn named_connections(con: &mut redis::Connection, id: &str) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(con)
        .expect("CLIENT LIST");
    let name = format!(" name=redisson-lock/{id}/");
    list.lines().filter(|line| line.contains(&name)).count()
}

/// `threads` threads of `client` each take and release its own lock
/// (`label-<n>`) until `stop`; returns the lock + unlock pairs done.
fn workers(
    client: &Client,
    label: &'static str,
    threads: usize,
    stop: &Arc<AtomicBool>,
    errors: &Arc<Mutex<Vec<String>>>,
) -> Vec<thread::JoinHandle<usize>> {
    (0..threads)
        .map(|n| {
            let client = client.clone();
            let stop = Arc::clone(stop);
            let errors = Arc::clone(errors);
            thread::spawn(move || {
                let lock = client.lock(format!("signals-{label}-{n}"));
                let mut done = 0;
                while !stop.load(Ordering::Relaxed) {
                    let result = lock.lock().and_then(|guard| guard.unlock());
                    match result {
                        Ok(()) => done += 1,
                        Err(e) => {
                            errors.lock().expect("errors").push(format!("{label}: {e}"));
                            return done;
                        }
                    }
                }
                done
            })
        })
        .collect()
}

#[test]
fn signals_neither_fail_nor_resend_nor_reconnect() {
    support::logs::install();
    let server = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let response = Duration::from_secs(5);
    let threads: usize = 3;
    // As many connections as the warm-up opens, and never more: one shared
    // socket (the default would open up to 4 as load comes and goes, which
    // a busy machine's timing decides), one pooled connection per thread.
    let multiplexed = Client::builder(server.url())
        .multiplexed(1)
        .response_timeout(response)
        .build()
        .expect("multiplexed client");
    let pooled = Client::builder(server.url())
        .pool_size(threads as u32)
        .response_timeout(response)
        .build()
        .expect("pooled client");
    // Warm-up: scripts loaded, and every connection the run needs open.
    // A guard holds no connection, so the pooled client opens its third
    // only when three commands overlap: the threads' commands are sent
    // while the server sleeps, so each waits on a connection of its own,
    // round after round until the pooled client has all of them (one per
    // thread, and the watchdog's own).
    let mut sleeper = TcpStream::connect(("127.0.0.1", server.port())).expect("sleeper");
    let mut checker = server.con();
    for round in 0.. {
        assert!(
            round < 20,
            "the warm-up never had {threads} commands in flight at once"
        );
        for client in [&multiplexed, &pooled] {
            let barrier = Arc::new(Barrier::new(threads + 1));
            let handles: Vec<_> = (0..threads)
                .map(|n| {
                    let client = client.clone();
                    let barrier = Arc::clone(&barrier);
                    thread::spawn(move || {
                        let lock = client.lock(format!("signals-warm-{n}"));
                        barrier.wait();
                        lock.lock().expect("warm").unlock().expect("warm unlock");
                    })
                })
                .collect();
            debug_sleep(&mut sleeper, Some(&barrier));
            for handle in handles {
                handle.join().expect("warm-up");
            }
        }
        if named_connections(&mut checker, pooled.id()) == threads + 1 {
            break;
        }
    }
    // The second server: contention, so the subscriber is connected.
    let contended_server = RedisServer::start();
    let contended = Client::builder(contended_server.url())
        .response_timeout(response)
        .build()
        .expect("contended client");
    {
        let lock = contended.lock("signals-shared");
        let guard = lock.lock().expect("held");
        let waiter = {
            let lock = lock.clone();
            thread::spawn(move || lock.lock().expect("waited").unlock().expect("unlock"))
        };
        thread::sleep(Duration::from_millis(100));
        guard.unlock().expect("unlock");
        waiter.join().expect("waiter");
    }
    let mut contended_checker = contended_server.con();
    let contended_before = info_number(
        &mut contended_checker,
        "stats",
        "total_connections_received",
    );
    let connections_before = info_number(&mut checker, "stats", "total_connections_received");
    let scripts_before = evalsha_calls(&mut checker);

    install_handler();
    let stop_signals = Arc::new(AtomicBool::new(false));
    let storm = signal_storm(Arc::clone(&stop_signals));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut handles = workers(&multiplexed, "mux", threads, &stop, &errors);
    handles.extend(workers(&pooled, "pooled", threads, &stop, &errors));
    let contenders: Vec<_> = (0..2)
        .map(|_| {
            let lock = contended.lock("signals-shared");
            let stop = Arc::clone(&stop);
            let errors = Arc::clone(&errors);
            thread::spawn(move || {
                let mut done = 0;
                while !stop.load(Ordering::Relaxed) {
                    let result = lock.lock().and_then(|guard| {
                        thread::sleep(Duration::from_millis(2));
                        guard.unlock()
                    });
                    match result {
                        Ok(()) => done += 1,
                        Err(e) => {
                            errors
                                .lock()
                                .expect("errors")
                                .push(format!("contended: {e}"));
                            return done;
                        }
                    }
                }
                done
            })
        })
        .collect();
    // The server asleep for 0.3 s, four times: reads block meanwhile, and
    // the signals interrupt them.
    for _ in 0..4 {
        debug_sleep(&mut sleeper, None);
        thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let pairs: usize = handles.into_iter().map(|h| h.join().expect("worker")).sum();
    let contended_pairs: usize = contenders
        .into_iter()
        .map(|h| h.join().expect("contender"))
        .sum();
    stop_signals.store(true, Ordering::Relaxed);
    storm.join().expect("storm");

    let signals = SIGNALS.load(Ordering::Relaxed);
    let errors = errors.lock().expect("errors").clone();
    assert!(
        errors.is_empty(),
        "{} calls failed: {errors:?}",
        errors.len()
    );
    assert!(signals > 500, "only {signals} signals were handled");
    assert!(pairs > 0, "no lock was taken");
    let scripts = evalsha_calls(&mut checker) - scripts_before;
    assert_eq!(
        scripts,
        2 * pairs as u64,
        "{pairs} lock + unlock pairs ran {scripts} scripts: some were sent twice"
    );
    let connections = info_number(&mut checker, "stats", "total_connections_received");
    assert_eq!(
        connections - connections_before,
        0,
        "the clients reconnected during the signals: {:?}",
        support::logs::lines()
    );
    assert!(contended_pairs > 0, "no contended lock was taken");
    let contended_connections = info_number(
        &mut contended_checker,
        "stats",
        "total_connections_received",
    );
    assert_eq!(
        contended_connections - contended_before,
        0,
        "the contended client (or its subscriber) reconnected during the signals"
    );
    eprintln!("{pairs} lock + unlock pairs, {contended_pairs} contended, under {signals} signals");
}
