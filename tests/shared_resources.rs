//! A client shares one subscriber connection among all its waiting threads
//! and all lock names, and gives channels back when nobody waits on them.

mod support;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use redisson_lock::Client;
use support::state::{channel, exists};
use support::{RedisServer, assert_diagnostics, eventually};

const NAMES: [&str; 5] = ["res-a", "res-b", "res-c", "res-d", "res-e"];

#[test]
fn twenty_waiters_on_five_names_share_one_subscriber_connection() {
    let (server, client) = RedisServer::start_with_client();
    let guards: Vec<_> = NAMES
        .iter()
        .map(|name| client.lock(*name).lock().expect("lock"))
        .collect();

    let start = Arc::new(Barrier::new(21));
    let waiters: Vec<_> = (0..20)
        .map(|i| {
            let lock = client.lock(NAMES[i % NAMES.len()]);
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let guard = lock.lock().expect("lock");
                thread::sleep(Duration::from_millis(2));
                guard.unlock().expect("unlock");
            })
        })
        .collect();
    start.wait();

    assert_diagnostics(&client, Duration::from_secs(10), |diagnostics| {
        diagnostics.waiters == 20 && diagnostics.subscribed_channels == 5
    });
    assert!(eventually(Duration::from_secs(5), || NAMES.iter().all(
        |name| {
            let (_, subscribers): (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", &channel(name)]);
            subscribers == 1
        }
    )));
    assert_eq!(
        server.client_count("pubsub"),
        1,
        "one subscriber connection for 20 waiters on 5 names"
    );

    drop(guards);
    for waiter in waiters {
        waiter.join().expect("waiter");
    }
    assert_diagnostics(&client, Duration::from_secs(2), |diagnostics| {
        diagnostics.subscribed_channels == 0 && diagnostics.waiters == 0
    });
    assert!(eventually(Duration::from_secs(2), || {
        let channels: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS"]);
        channels.is_empty()
    }));
    assert_eq!(client.diagnostics().registered_holds, 0);
    for name in NAMES {
        assert!(!exists(&server, name), "{name}");
    }
}

#[test]
fn later_waits_reuse_the_subscriber_connection() {
    let (server, client) = RedisServer::start_with_client();
    let other = Client::open(server.url()).expect("holder");
    let wait_once = |round: usize| {
        let name = format!("round-{round}");
        let held = other.lock(name.as_str()).lock().expect("lock");
        let got = client
            .lock(name.as_str())
            .try_lock_for(Duration::from_millis(100))
            .expect("try_lock_for");
        assert!(got.is_none());
        drop(held);
    };
    wait_once(0);
    let first = subscriber_connections(&server);
    assert_eq!(first.len(), 1, "{first:?}");
    for round in 1..4 {
        wait_once(round);
    }
    assert!(eventually(Duration::from_secs(2), || client
        .diagnostics()
        .subscribed_channels
        == 0));
    assert_eq!(
        subscriber_connections(&server),
        first,
        "every wait used the same subscriber connection"
    );
}

/// Ids of the connections whose last command was a (un)subscribe.
fn subscriber_connections(server: &RedisServer) -> Vec<String> {
    let list: String = server.cmd(&["CLIENT", "LIST"]);
    list.lines()
        .filter(|line| line.contains("cmd=subscribe") || line.contains("cmd=unsubscribe"))
        .map(|line| line.split(' ').next().expect("id=").to_string())
        .collect()
}

#[test]
fn the_command_pool_stays_as_small_as_the_concurrency() {
    let (server, client) = RedisServer::start_with_client();
    assert_eq!(
        client.diagnostics().pooled_connections,
        1,
        "one, checked at build"
    );
    let threads = 4;
    let start = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|i| {
            let lock = client.lock(format!("pool-{i}"));
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                for _ in 0..2000 {
                    lock.lock().expect("lock").unlock().expect("unlock");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    // A thread holds a connection only for one command at a time: the pool
    // needs about one connection per thread (r2d2 may open one more while a
    // checkout waits), not a spare for every checkout.
    let pooled = client.diagnostics().pooled_connections;
    eprintln!("{threads} threads x 2000 lock/unlock pairs: {pooled} pooled connections");
    assert!(
        pooled <= 2 * threads as u32,
        "{pooled} pooled connections for {threads} threads"
    );
    let normal = server.client_count("normal");
    assert!(
        normal <= 2 * threads + 2,
        "{normal} connections on the server"
    );
}
