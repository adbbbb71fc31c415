//! Mutual exclusion under contention: many threads, and several clients (as
//! several processes would), never overlap in the critical section, and every
//! one of them gets through.

mod support;

use std::thread;
use std::time::Duration;

use redis::Commands;
use redisson_lock::Client;
use support::state::exists;
use support::{RedisServer, eventually};

/// Runs `sections` critical sections on `lock`, each of which checks that it
/// is alone (INCR occupancy == 1) and does a non-atomic read-modify-write of
/// the counter; returns the highest occupancy seen.
fn critical_sections(server_url: String, lock: redisson_lock::Lock, sections: usize) -> i64 {
    let mut con = redis::Client::open(server_url)
        .expect("url")
        .get_connection()
        .expect("connect");
    let mut max_occupancy = 0;
    for _ in 0..sections {
        let guard = lock.lock().expect("lock");
        let occupancy: i64 = con.incr("occupancy", 1).expect("INCR");
        max_occupancy = max_occupancy.max(occupancy);
        let counter: i64 = con.get("counter").expect("GET");
        thread::yield_now();
        let _: () = con.set("counter", counter + 1).expect("SET");
        let _: i64 = con.decr("occupancy", 1).expect("DECR");
        assert!(!guard.is_lost());
        guard.unlock().expect("unlock");
    }
    max_occupancy
}

fn counter(server: &RedisServer) -> i64 {
    server.cmd(&["GET", "counter"])
}

#[test]
fn eight_threads_of_one_client_never_overlap_and_all_get_through() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "counter", "0"]);
    let client = server.client();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let lock = client.lock("contended");
            let url = server.url();
            thread::spawn(move || critical_sections(url, lock, 50))
        })
        .collect();
    let max_occupancy = workers
        .into_iter()
        .map(|worker| worker.join().expect("worker"))
        .max()
        .expect("workers");
    assert_eq!(max_occupancy, 1, "two threads were inside at once");
    assert_eq!(counter(&server), 400, "a lost update");
    assert!(!exists(&server, "contended"));
    let diagnostics = client.diagnostics();
    assert_eq!(diagnostics.registered_holds, 0);
    assert_eq!(diagnostics.waiters, 0);
    assert!(eventually(Duration::from_secs(2), || client
        .diagnostics()
        .subscribed_channels
        == 0));
}

#[test]
fn two_clients_contending_like_two_processes_never_overlap() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "counter", "0"]);
    let clients = [
        Client::open(server.url()).expect("client a"),
        Client::open(server.url()).expect("client b"),
    ];
    assert_ne!(clients[0].id(), clients[1].id());
    let workers: Vec<_> = clients
        .iter()
        .flat_map(|client| (0..4).map(move |_| client.lock("shared")))
        .map(|lock| {
            let url = server.url();
            thread::spawn(move || critical_sections(url, lock, 25))
        })
        .collect();
    let max_occupancy = workers
        .into_iter()
        .map(|worker| worker.join().expect("worker"))
        .max()
        .expect("workers");
    assert_eq!(max_occupancy, 1, "two holders were inside at once");
    assert_eq!(counter(&server), 200, "a lost update");
    for client in &clients {
        assert_eq!(client.diagnostics().registered_holds, 0);
    }
}

#[test]
fn threads_contending_with_a_short_watchdog_and_leases_never_overlap() {
    // Mixed modes: half the threads hold with the (short) watchdog, half with
    // an explicit lease far longer than a critical section.
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "counter", "0"]);
    let client = server.watchdog_client(Duration::from_millis(600));
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let lock = client.lock("mixed");
            let lock = if i % 2 == 0 {
                lock
            } else {
                lock.with_lease(Duration::from_secs(10))
            };
            let url = server.url();
            thread::spawn(move || critical_sections(url, lock, 20))
        })
        .collect();
    let max_occupancy = workers
        .into_iter()
        .map(|worker| worker.join().expect("worker"))
        .max()
        .expect("workers");
    assert_eq!(max_occupancy, 1);
    assert_eq!(counter(&server), 120);
}
