//! Owned guards against real Redisson (4.7.0 and 3.24.3): an owned hold,
//! taken on one Rust thread and released on another, keeps Java out for as
//! long as it is held (renewed past the watchdog timeout), and Java's wait
//! for it ends with the release.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::java::{Redisson, for_each_redisson_version, start};

for_each_redisson_version!(an_owned_hold_excludes_java_until_another_thread_releases_it,);

fn an_owned_hold_excludes_java_until_another_thread_releases_it(redisson: Redisson) {
    let (server, java) = start(redisson);
    let watchdog = Duration::from_millis(900);
    let client = Client::builder(server.url())
        .watchdog_timeout(watchdog)
        .build()
        .expect("client");
    let guard = client.lock("owned").lock_owned().expect("lock_owned");
    let field = guard.owner_field().to_owned();
    assert!(!java.flag("j", "tryLockNow owned"), "Java took a held lock");
    // Past the watchdog timeout: renewed, still held, Java still out.
    thread::sleep(watchdog * 2);
    assert!(!guard.is_lost());
    let count: Option<i64> = server.cmd(&["HGET", "owned", &field]);
    assert_eq!(count, Some(1));
    assert!(
        !java.flag("j", "tryLockNow owned"),
        "Java took a renewed lock"
    );

    java.send("j", "lock owned");
    thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    thread::spawn(move || guard.unlock())
        .join()
        .expect("releasing thread")
        .expect("unlock from another thread");
    let reply = java.recv("j");
    assert!(reply.exception().is_none(), "Java's lock: {reply:?}");
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "Java waited {:?} after the release",
        released.elapsed()
    );
    let java_field = java.owner_field("j");
    let holders: Vec<String> = server.cmd(&["HKEYS", "owned"]);
    assert_eq!(holders, vec![java_field]);
    java.ok("j", "unlock owned");
}
