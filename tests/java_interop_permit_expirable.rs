//! Interop of the permit-expirable semaphore with real Redisson's
//! `getPermitExpirableSemaphore` (SYNCHRONIZERS §4), on Redisson's newest
//! release and 3.24.3: each side reads, renews and releases the other's
//! permit ids; an expired permit of one language comes back to the other's
//! waiting acquirer; a Rust release wakes a Java `acquire()`, which has no
//! timeout fallback of its own.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{PermitExpirableSemaphore, PermitId};
use support::RedisServer;
use support::java::{JavaDriver, Redisson, for_each_redisson_version, start_with_client};

for_each_redisson_version!(
    java_permit_is_read_renewed_and_released_from_rust,
    rust_permit_is_read_renewed_and_released_from_java,
    expired_permits_come_back_to_the_other_language,
    a_rust_release_wakes_a_java_acquire,
);

/// A fresh server, a warmed-up Redisson driver on it, and the permit expirable semaphore
/// `name` of a Rust client of the same server.
fn start_with_permit_expirable_semaphore(
    redisson: Redisson,
    name: &str,
) -> (RedisServer, JavaDriver, PermitExpirableSemaphore) {
    let (server, java, client) = start_with_client(redisson);
    (server, java, client.permit_expirable_semaphore(name))
}

fn java_permit_is_read_renewed_and_released_from_rust(redisson: Redisson) {
    let (_server, java, sem) = start_with_permit_expirable_semaphore(redisson, "jp1");
    assert!(java.flag("j", "pes.trySetPermits jp1 2"));
    let id: String = java.ok("j", "pes.acquire jp1 5000").value(0);
    assert_eq!(id.len(), 32);
    let id: PermitId = id.parse().expect("a Java id parses");
    assert_eq!(id.to_string().len(), 32);

    let left = sem.lease_time(id).expect("lease").expect("finite");
    assert!(
        left > Duration::from_secs(3) && left <= Duration::from_secs(5),
        "{left:?}"
    );
    assert!(sem.update_lease_time(id, None).expect("update"));
    assert_eq!(sem.lease_time(id).expect("lease"), None);
    assert_eq!(sem.available_permits().expect("available"), 1);
    sem.release(id).expect("Rust releases the Java id");
    assert!(!java.flag("j", &format!("pes.tryRelease jp1 {id}")));
    assert_eq!(java.ok("j", "pes.availablePermits jp1").value::<i64>(0), 2);
}

fn rust_permit_is_read_renewed_and_released_from_java(redisson: Redisson) {
    let (_server, java, sem) = start_with_permit_expirable_semaphore(redisson, "jp2");
    assert!(sem.try_set_permits(2).expect("set"));
    let id = sem
        .acquire(Some(Duration::from_secs(5)))
        .expect("acquire")
        .forget()[0];
    let reply = java.call("j", &format!("pes.getLeaseTime jp2 {id}"));
    if redisson == Redisson::Newest {
        let left: i64 = reply.value(0);
        assert!((3_000..=5_000).contains(&left), "{left}");
    } else {
        assert!(reply.na, "getLeaseTime is 3.41.0+: {}", reply.line);
    }
    assert!(java.flag("j", &format!("pes.updateLeaseTime jp2 {id} -1")));
    assert_eq!(sem.lease_time(id).expect("lease"), None);
    if redisson == Redisson::Newest {
        let left: i64 = java.ok("j", &format!("pes.getLeaseTime jp2 {id}")).value(0);
        assert_eq!(left, -1, "Java reads the sentinel as permanent");
    }
    // The uppercase form is the same permit for Java.
    java.ok(
        "j",
        &format!("pes.release jp2 {}", id.to_string().to_uppercase()),
    );
    assert!(!sem.try_release(id).expect("released by Java"));
    assert_eq!(sem.available_permits().expect("available"), 2);
}

fn expired_permits_come_back_to_the_other_language(redisson: Redisson) {
    let (_server, java, sem) = start_with_permit_expirable_semaphore(redisson, "jp3");
    assert!(sem.try_set_permits(1).expect("set"));

    // Java's permit expires; the Rust waiter's hint wakes it.
    java.ok("j", "pes.acquire jp3 600");
    let started = Instant::now();
    let got = sem
        .try_acquire_for(Duration::from_secs(10), Some(Duration::from_millis(600)))
        .expect("wait")
        .expect("Java's expired permit");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    let _rust_id = got.forget();

    // The Rust permit expires; Java's waiter (its nearest-expiry timer)
    // gets it.
    let reply = java.ok("j", "pes.tryAcquire jp3 10000 -1");
    let java_id: String = reply.value(0);
    assert_eq!(java_id.len(), 32, "{}", reply.line);
    assert_eq!(sem.available_permits().expect("available"), 0);
    java.ok("j", &format!("pes.release jp3 {java_id}"));
}

fn a_rust_release_wakes_a_java_acquire(redisson: Redisson) {
    let (_server, java, sem) = start_with_permit_expirable_semaphore(redisson, "jp4");
    assert!(sem.try_set_permits(1).expect("set"));
    let held = sem.acquire(None).expect("held");
    // Permanent: Java's acquire() has no timer, only the message.
    java.send("j", "pes.acquire jp4 -1");
    thread::sleep(Duration::from_millis(700));
    assert!(
        java.try_recv("j", Duration::ZERO).is_none(),
        "Java acquired while Rust held the only permit"
    );
    let released = Instant::now();
    held.release().expect("release");
    let reply = java.recv("j");
    assert!(reply.ok, "{}", reply.line);
    let waited = reply.at.saturating_duration_since(released);
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    let id: PermitId = reply.value::<String>(0).parse().expect("id");
    assert_eq!(sem.lease_time(id).expect("lease"), None);
    sem.release(id).expect("Rust releases Java's permit");
}
