//! Interop of `MultiLock` with real Redisson's `RedissonMultiLock`
//! (PROTOCOL §8), on Redisson's newest release and 3.24.3: a Java multi-lock
//! over the same names excludes a Rust one and the reverse (the state is the
//! members' own), and each side gets in once the other releases.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, MultiLock};

use support::actor::RustThread;
use support::java::{Redisson, for_each_redisson_version, start_with_client};
use support::state::exists;

const NAMES: [&str; 3] = ["m-a", "m-b", "m-c"];

for_each_redisson_version!(
    java_multilock_excludes_rust_and_its_unlock_lets_rust_in,
    rust_multilock_excludes_java_and_its_unlock_lets_java_in,
);

fn rust_multi(client: &Client) -> MultiLock {
    MultiLock::new(NAMES.iter().map(|name| client.lock(*name)))
}

/// Java holds the multi-lock; a Rust multi-lock cannot take it (and leaves
/// none of its members behind), then gets it after Java's unlock.
fn java_multilock_excludes_rust_and_its_unlock_lets_rust_in(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    java.ok("j", &format!("multiLock {}", NAMES.join(",")));
    let multi = rust_multi(&client);
    assert!(multi.try_lock().expect("try_lock").is_none(), "Rust got in");
    for name in NAMES {
        let fields: Vec<String> = server.cmd(&["HKEYS", name]);
        assert_eq!(fields.len(), 1, "{name}: {fields:?}");
        assert!(
            !fields[0].starts_with(client.id()),
            "{name} kept a Rust member"
        );
    }
    let rust = RustThread::spawn("multi-waiter");
    let acquired = rust.start(move |held| {
        let guard = multi.lock().expect("lock");
        held.push(Box::new(guard));
        Instant::now()
    });
    thread::sleep(Duration::from_millis(300));
    assert!(
        acquired.try_recv().is_err(),
        "Rust got in while Java held it"
    );
    java.ok("j", &format!("multiUnlock {}", NAMES.join(",")));
    acquired
        .recv_timeout(Duration::from_secs(10))
        .expect("Rust never got the multi-lock");
    for name in NAMES {
        let fields: Vec<String> = server.cmd(&["HKEYS", name]);
        assert!(fields.iter().all(|f| f.starts_with(client.id())), "{name}");
    }
    rust.run(|held| held.clear());
}

/// Rust holds the multi-lock; Java's cannot take it within 300 ms, then
/// gets it after the Rust unlock.
fn rust_multilock_excludes_java_and_its_unlock_lets_java_in(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let rust = RustThread::spawn("multi-holder");
    rust.run({
        let multi = rust_multi(&client);
        move |held| held.push(Box::new(multi.lock().expect("lock")))
    });
    let refused = java.ok("j", &format!("multiTryLock {} 300", NAMES.join(",")));
    assert!(!refused.value::<bool>(0), "Java got in while Rust held it");
    java.send("j", &format!("multiTryLock {} 10000", NAMES.join(",")));
    thread::sleep(Duration::from_millis(200));
    rust.run(|held| held.clear());
    let reply = java.recv("j");
    assert!(reply.ok && reply.value::<bool>(0), "`{}`", reply.line);
    java.ok("j", &format!("multiUnlock {}", NAMES.join(",")));
    for name in NAMES {
        assert!(!exists(&server, name), "{name} left held");
    }
}
