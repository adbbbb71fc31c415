//! Renewed permits (issue 33 item 4) seen from real Redisson's
//! `getPermitExpirableSemaphore`, on Redisson's newest release and 3.24.3:
//! Java counts them out and, past the initial lease, reads a lease that the
//! Rust watchdog keeps refreshing (`getLeaseTime`, 3.41.0+); a Java
//! `tryRelease(id)` of a renewed permit releases it, and the Rust holder
//! learns it at its next renewal.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::LostReason;
use support::java::{Redisson, for_each_redisson_version, start};

for_each_redisson_version!(java_sees_a_renewed_permit_and_releases_it);

const LEASE: Duration = Duration::from_millis(600);

fn java_sees_a_renewed_permit_and_releases_it(redisson: Redisson) {
    let (server, java) = start(redisson);
    let client = server.watchdog_client(LEASE);
    let sem = client.permit_expirable_semaphore("jr1");
    assert!(java.flag("j", "pes.trySetPermits jr1 2"));
    let acquired = Instant::now();
    let permits = sem.acquire_renewed(1).expect("acquire");
    let id = permits.ids()[0];
    let signal = permits.lost_signal().expect("signal");

    // Past three initial leases, Java still counts it out and reads a
    // lease that was refreshed (within one lease from now).
    thread::sleep(LEASE * 3 + LEASE / 2);
    assert_eq!(java.ok("j", "pes.availablePermits jr1").value::<i64>(0), 1);
    let reply = java.call("j", &format!("pes.getLeaseTime jr1 {id}"));
    if redisson == Redisson::Newest {
        let left: i64 = reply.value(0);
        // Java's script measures the lease from the time Java read before
        // sending it; a renewal whose own clock reading came later can run
        // first, so a few milliseconds over the lease are an honest answer
        // (seen: 601 ms). What must not be is a lease that was never renewed
        // (<= 0) or one beyond a renewal's.
        let slack = 50;
        assert!(
            left > 0 && left <= LEASE.as_millis() as i64 + slack,
            "Java reads {left} ms left {:?} after the acquire",
            acquired.elapsed()
        );
        eprintln!(
            "Java: {left} ms left, {:?} after the acquire",
            acquired.elapsed()
        );
    } else {
        assert!(reply.na, "getLeaseTime is 3.41.0+: {}", reply.line);
    }
    assert!(!permits.is_lost());

    // A Java release by id: the Rust holder learns it at its next renewal.
    assert!(java.flag("j", &format!("pes.tryRelease jr1 {id}")));
    assert_eq!(signal.wait_timeout(LEASE), Some(LostReason::KeyGone));
    assert_eq!(java.ok("j", "pes.availablePermits jr1").value::<i64>(0), 2);
    drop(permits);
    assert_eq!(sem.available_permits().expect("available"), 2);
}
