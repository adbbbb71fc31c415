//! Mutual exclusion under contention: many threads, and several clients (as
//! several processes would), never overlap in the critical section, and every
//! one of them gets through.

mod support;

use std::thread;
use std::time::Duration;

use redisson_lock::{Client, Lock};
use support::mutex::{Keys, critical_sections};
use support::state::exists;
use support::{RedisServer, eventually};

const KEYS: Keys<'static> = Keys {
    counter: "counter",
    occupancy: "occupancy",
};

/// Runs `sections` critical sections (see [`critical_sections`]) on each of
/// `locks` in a thread of its own, yielding between the read and the write
/// of the counter; returns the highest occupancy any thread saw.
fn max_occupancy(server: &RedisServer, locks: Vec<Lock>, sections: u64) -> i64 {
    let workers: Vec<_> = locks
        .into_iter()
        .map(|lock| {
            let url = server.url();
            thread::spawn(move || {
                critical_sections(&url, &lock, KEYS, sections, |_| Duration::ZERO)
            })
        })
        .collect();
    workers
        .into_iter()
        .map(|worker| worker.join().expect("worker"))
        .max()
        .expect("workers")
}

fn counter(server: &RedisServer) -> i64 {
    server.cmd(&["GET", "counter"])
}

#[test]
fn eight_threads_of_one_client_never_overlap_and_all_get_through() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "counter", "0"]);
    let client = server.client();
    let locks = (0..8).map(|_| client.lock("contended")).collect();
    assert_eq!(
        max_occupancy(&server, locks, 50),
        1,
        "two threads were inside at once"
    );
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
    let locks = clients
        .iter()
        .flat_map(|client| (0..4).map(move |_| client.lock("shared")))
        .collect();
    assert_eq!(
        max_occupancy(&server, locks, 25),
        1,
        "two holders were inside at once"
    );
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
    let locks = (0..6)
        .map(|i| {
            let lock = client.lock("mixed");
            if i % 2 == 0 {
                lock
            } else {
                lock.with_lease(Duration::from_secs(10))
            }
        })
        .collect();
    assert_eq!(max_occupancy(&server, locks, 20), 1);
    assert_eq!(counter(&server), 120);
}
