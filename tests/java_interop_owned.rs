//! Owned guards against real Redisson (4.7.0 and 3.24.3): an owned hold,
//! taken on one Rust thread and released on another, keeps Java out for as
//! long as it is held (renewed past the watchdog timeout), and Java's wait
//! for it ends with the release; a hold detached by one process and adopted
//! by another does the same, and its token is refused once stale.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{HoldToken, OwnedLockGuard};
use support::java::{JavaDriver, Redisson, for_each_redisson_version, start};

for_each_redisson_version!(
    an_owned_hold_excludes_java_until_another_thread_releases_it,
    a_hold_detached_in_one_process_and_adopted_in_another_keeps_java_out,
);

fn an_owned_hold_excludes_java_until_another_thread_releases_it(redisson: Redisson) {
    let (server, java) = start(redisson);
    let watchdog = Duration::from_millis(900);
    let client = server.watchdog_client(watchdog);
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

    java_waits_for_a_release_on_another_thread(&java, "owned", guard);
    let java_field = java.owner_field("j");
    let holders: Vec<String> = server.cmd(&["HKEYS", "owned"]);
    assert_eq!(holders, vec![java_field]);
    java.ok("j", "unlock owned");
}

/// Issue 33, item 3: a supervisor process takes the lock and hands it to a
/// worker process; Java sees one holder throughout.
fn a_hold_detached_in_one_process_and_adopted_in_another_keeps_java_out(redisson: Redisson) {
    let (server, java) = start(redisson);
    let watchdog = Duration::from_millis(900);
    let supervisor = std::process::Command::new(support::example_binary("hold_lock"))
        .args([&server.url(), "handed", "900", "detach"])
        .output()
        .expect("the supervisor process");
    assert!(supervisor.status.success(), "{supervisor:?}");
    let printed = String::from_utf8(supervisor.stdout).expect("utf-8");
    let token: HoldToken = printed
        .trim()
        .strip_prefix("TOKEN ")
        .expect("TOKEN line")
        .parse()
        .expect("a hold token");
    // The supervisor is gone; its hold is not.
    let count: Option<i64> = server.cmd(&["HGET", "handed", token.owner_field()]);
    assert_eq!(count, Some(1));
    assert!(
        !java.flag("j", "tryLockNow handed"),
        "Java took a handed lock"
    );

    let worker = server.watchdog_client(watchdog);
    let lock = worker.lock("handed");
    let guard = lock.adopt(&token).expect("adopt");
    assert_eq!(guard.owner_field(), token.owner_field());
    // Renewed by the worker past twice the watchdog timeout.
    thread::sleep(watchdog * 2 + watchdog / 2);
    assert!(!guard.is_lost());
    let pttl: i64 = server.cmd(&["PTTL", "handed"]);
    assert!(pttl > 0, "not renewed: PTTL {pttl}");
    assert!(
        !java.flag("j", "tryLockNow handed"),
        "Java took an adopted lock"
    );

    java_waits_for_a_release_on_another_thread(&java, "handed", guard);
    // The token is stale now: Java holds the lock.
    match lock.adopt(&token) {
        Err(redisson_lock::Error::NotHeld { name, .. }) => assert_eq!(name, "handed"),
        other => panic!("a stale token was adopted: {other:?}"),
    }
    let other_lock = worker.fair_lock("handed").adopt(&token);
    assert!(matches!(
        other_lock,
        Err(redisson_lock::Error::InvalidArgument(_))
    ));
    java.ok("j", "unlock handed");
}

/// Java's actor `j` waits for the lock `name`, which `guard` holds; the
/// guard is released on another thread, and Java must have the lock within
/// 2 s of the release.
fn java_waits_for_a_release_on_another_thread(
    java: &JavaDriver,
    name: &str,
    guard: OwnedLockGuard,
) {
    java.send("j", &format!("lock {name}"));
    thread::sleep(Duration::from_millis(300));
    let released = Instant::now();
    thread::spawn(move || guard.unlock())
        .join()
        .expect("releasing thread")
        .expect("the release on another thread");
    let reply = java.recv("j");
    assert!(reply.exception().is_none(), "Java's lock: {reply:?}");
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "Java waited {:?} after the release",
        released.elapsed()
    );
}
