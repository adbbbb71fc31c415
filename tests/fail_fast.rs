//! A refused connection or a wrong password is an answer, reported at once;
//! the client's threads and connections end with the client; the watchdog
//! does not depend on opening a connection after the client was built.

mod support;

use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error};
use support::{RedisServer, eventually, logs, threads_named};

/// Generous functional bound for "at once" (the old behaviour took the whole
/// 10 s connect timeout).
const PROMPT: Duration = Duration::from_secs(1);

/// A loopback port where nothing listens.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    port
}

#[test]
fn open_on_a_refused_port_fails_at_once() {
    logs::install();
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    let started = Instant::now();
    let result = Client::open(url.as_str());
    let took = started.elapsed();
    assert!(
        matches!(result, Err(Error::Unavailable { ref reason }) if reason.contains("refused")),
        "{result:?}"
    );
    assert!(result.as_ref().is_err_and(Error::is_transient));
    assert!(took < PROMPT, "took {took:?}");
    // The caller's error is the report: nothing is logged at ERROR.
    assert!(
        !logs::lines().iter().any(|line| line.starts_with("ERROR")),
        "{:?}",
        logs::lines()
    );
}

#[test]
fn a_wrong_password_is_permanent_and_prompt() {
    let server = RedisServer::start_with(&["--requirepass", "right"]);
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    let started = Instant::now();
    let result = Client::open(url.as_str());
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    match result {
        Err(e) => assert!(!e.is_transient(), "{e:?} is not something to retry"),
        Ok(_) => panic!("a wrong password was accepted"),
    }
}

#[test]
fn a_password_for_a_server_without_one_is_a_permanent_authentication_failure() {
    let server = RedisServer::start();
    let url = format!("redis://:secret@127.0.0.1:{}/", server.port());
    let started = Instant::now();
    match Client::open(url.as_str()) {
        Err(Error::Redis(e)) => {
            assert_eq!(
                e.kind(),
                redisson_lock::redis::ErrorKind::AuthenticationFailed,
                "{e}"
            );
            assert!(
                e.to_string().contains("without any password configured")
                    && e.to_string().contains("remove it from the URL"),
                "{e}"
            );
            assert!(!Error::Redis(e).is_transient());
        }
        Err(other) => panic!("not an authentication failure: {other:?}"),
        Ok(_) => panic!("a password the server has none for was accepted"),
    }
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
}

#[test]
fn guards_dropped_while_redis_refuses_connections_return_promptly() {
    let mut server = RedisServer::start();
    let client = server.watchdog_client(Duration::from_secs(30));
    let guards: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|name| client.lock(*name).lock().expect("lock"))
        .collect();
    server.stop();
    // Pooled connections are dead and new ones are refused.
    let started = Instant::now();
    for guard in guards {
        let result = guard.unlock();
        assert!(result.is_err(), "unlock without a server succeeded");
    }
    let took = started.elapsed();
    assert!(took < PROMPT * 3, "three unlocks took {took:?}");

    let started = Instant::now();
    let result = client.lock("d").try_lock();
    assert!(
        matches!(result, Err(Error::Unavailable { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
}

#[test]
fn the_watchdog_renews_when_the_server_refuses_new_clients() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let client = server.watchdog_client(lease);
    // From now on the server takes no new client: the watchdog must already
    // have its connection.
    let mut admin = server.con();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut admin)
        .expect("client list");
    let connected = list.lines().filter(|line| !line.trim().is_empty()).count();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(connected)
        .query(&mut admin)
        .expect("config set");
    let guard = client.lock("renewed-at-maxclients").lock().expect("lock");
    thread::sleep(lease * 4);
    assert!(!guard.is_lost(), "lost at maxclients");
    let exists: bool = redis::cmd("EXISTS")
        .arg("renewed-at-maxclients")
        .query(&mut admin)
        .expect("exists");
    assert!(exists);
    guard.unlock().expect("unlock");
}

#[test]
fn dropped_clients_leave_no_thread_behind() {
    let server = RedisServer::start();
    for _ in 0..300 {
        let client = server.client();
        // One wait, so that the subscriber thread starts too.
        let lock = client.lock("threads");
        let held = lock.lock().expect("lock");
        let other = client.clone();
        let waiter = thread::spawn(move || {
            other
                .lock("threads")
                .try_lock_for(Duration::from_millis(20))
                .map(|guard| guard.is_some())
        });
        assert!(!waiter.join().expect("waiter").expect("try_lock_for"));
        drop(held);
    }
    let gone = eventually(Duration::from_secs(5), || {
        ["rlock-watchdog", "rlock-pubsub", "rlock-pool"]
            .iter()
            .all(|name| threads_named(name) == 0)
    });
    assert!(
        gone,
        "left behind: {} watchdog, {} pubsub, {} pool threads",
        threads_named("rlock-watchdog"),
        threads_named("rlock-pubsub"),
        threads_named("rlock-pool")
    );
    let clients: usize = server.client_count("normal");
    assert!(clients <= 2, "{clients} connections left open");
}
