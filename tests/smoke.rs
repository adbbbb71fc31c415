mod support;

use std::collections::HashMap;
use std::time::Duration;

use redisson_lock::Client;
use support::RedisServer;

#[test]
fn acquire_reenter_release_leaves_redisson_state() {
    let server = RedisServer::start();
    let client = Client::open(server.url()).expect("client");
    let lock = client.lock("myLock");
    let field = client.owner_field();
    let g1 = lock.lock().expect("lock");
    let state: HashMap<String, String> = server.cmd(&["HGETALL", "myLock"]);
    assert_eq!(state, HashMap::from([(field.clone(), "1".to_string())]));
    let g2 = lock.try_lock().expect("try").expect("reentry");
    assert_eq!(lock.hold_count().expect("count"), 2);
    drop(g2);
    assert_eq!(lock.hold_count().expect("count"), 1);
    let ttl: i64 = server.cmd(&["PTTL", "myLock"]);
    assert!(ttl > 29_000 && ttl <= 30_000, "ttl {ttl}");
    g1.unlock().expect("unlock");
    let exists: bool = server.cmd(&["EXISTS", "myLock"]);
    assert!(!exists);
    let _ = Duration::ZERO;
}

#[test]
fn waiter_wakes_on_release() {
    let server = RedisServer::start();
    let client = Client::open(server.url()).expect("client");
    let lock = client.lock("w");
    let guard = lock.lock().expect("lock");
    let waiter = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let g = lock.try_lock_for(Duration::from_secs(20)).expect("wait").expect("acquired");
            let waited = start.elapsed();
            drop(g);
            waited
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(client.diagnostics().waiters, 1);
    let released = std::time::Instant::now();
    drop(guard);
    let waited = waiter.join().expect("join");
    eprintln!("waited {waited:?}, handoff {:?}", released.elapsed());
    assert!(waited < Duration::from_secs(2));
    assert!(support::eventually(Duration::from_secs(2), || client.diagnostics().subscribed_channels == 0));
}
