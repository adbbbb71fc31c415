//! Introspection of locks held by real Redisson, for every Redisson version
//! of the matrix (the newest release and 3.24.3): `Client::inspect` reports
//! the Java holders' `<uuid>:<threadId>` fields and counts (reentrant, fair
//! with a Java waiter queued, read/write), and the owner-guarded force
//! unlock of a Java-held fair lock wakes a Java waiter at once.

mod support;

use std::time::{Duration, Instant};

use redisson_lock::{HolderSide, LockKind, RwMode};
use support::RedisServer;
use support::eventually;
use support::java::{Redisson, for_each_redisson_version, start_with_client};
use support::state::WRITE_LOCKED;

for_each_redisson_version!(
    inspect_a_java_reentrant_lock_held_twice,
    inspect_a_java_fair_lock_with_a_java_waiter,
    inspect_java_readers_and_a_java_writer,
    guarded_force_unlock_of_a_java_fair_lock_wakes_the_java_waiter,
);

fn queued(server: &RedisServer, name: &str, n: i64) {
    let key = format!("redisson_lock_queue:{{{name}}}");
    assert!(
        eventually(Duration::from_secs(10), || server
            .cmd::<i64>(&["LLEN", &key])
            == n),
        "{n} waiter(s) queued on {name}"
    );
}

fn inspect_a_java_reentrant_lock_held_twice(redisson: Redisson) {
    let (_server, java, client) = start_with_client(redisson);
    let field = java.owner_field("j");
    java.ok("j", "lock r");
    java.ok("j", "lock r");
    let info = client.inspect("r").expect("inspect");
    assert!(info.locked);
    assert_eq!(info.kind, LockKind::Reentrant);
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].field(), field);
    assert_eq!(info.holders[0].count, 2);
    assert_eq!(info.holders[0].side, HolderSide::Exclusive);
    assert!(info.ttl.is_some());
    java.ok("j", "unlock r");
    java.ok("j", "unlock r");
    assert!(!client.inspect("r").expect("inspect").locked);
}

fn inspect_a_java_fair_lock_with_a_java_waiter(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let holder = java.owner_field("h");
    let waiter = java.owner_field("w");
    java.ok("h", "lock fair/f");
    java.send("w", "lock fair/f");
    queued(&server, "f", 1);
    let info = client.inspect("f").expect("inspect");
    assert_eq!(info.kind, LockKind::Fair);
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].field(), holder);
    assert_eq!(info.holders[0].count, 1);
    assert_eq!(info.queue.len(), 1);
    assert_eq!(info.queue[0].field(), waiter);
    assert!(info.queue[0].deadline_ms.is_some());
    let remaining = info.queue[0].remaining_ms.expect("remaining");
    assert!(
        remaining > 290_000 && remaining <= 340_000,
        "remaining {remaining}"
    );
    java.ok("h", "unlock fair/f");
    let reply = java.recv("w");
    assert!(reply.ok, "Java's lock failed: `{}`", reply.line);
    java.ok("w", "unlock fair/f");
}

fn inspect_java_readers_and_a_java_writer(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let (r1, r2) = (java.owner_field("r1"), java.owner_field("r2"));
    java.ok("r1", "lock read/rw");
    java.ok("r2", "lock read/rw");
    java.ok("r2", "lock read/rw");
    let info = client.inspect("rw").expect("inspect");
    assert_eq!(info.kind, LockKind::ReadWrite { mode: RwMode::Read });
    assert_eq!(info.holders.len(), 2);
    for (field, count) in [(&r1, 1), (&r2, 2)] {
        let holder = info
            .holders
            .iter()
            .find(|h| &h.field() == field)
            .expect("Java reader listed");
        assert_eq!(holder.side, HolderSide::Read);
        assert_eq!(holder.count, count);
        assert_eq!(holder.marker_ttls.len(), count as usize);
        assert!(holder.marker_ttls.iter().all(Option::is_some));
    }
    java.ok("r1", "unlock read/rw");
    java.ok("r2", "unlock read/rw");
    java.ok("r2", "unlock read/rw");

    let writer = java.owner_field("w");
    java.ok("w", "lock write/rw2");
    let info = client.inspect("rw2").expect("inspect");
    assert_eq!(info.kind, WRITE_LOCKED);
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].side, HolderSide::Write);
    assert_eq!(info.holders[0].field(), format!("{writer}:write"));
    java.ok("w", "unlock write/rw2");
    drop(server);
}

fn guarded_force_unlock_of_a_java_fair_lock_wakes_the_java_waiter(redisson: Redisson) {
    let (server, java, client) = start_with_client(redisson);
    let holder = java.owner_field("h");
    java.owner_field("w");
    java.ok("h", "lock fair/ff");
    java.send("w", "lock fair/ff");
    queued(&server, "ff", 1);
    let lock = client.fair_lock("ff");
    let stale = format!("{}:1", client.id());
    assert!(!lock.force_unlock_owned_by(&stale).expect("force"));
    assert!(java.try_recv("w", Duration::from_millis(300)).is_none());
    assert_eq!(
        client.inspect("ff").expect("inspect").holders[0].field(),
        holder
    );
    // The field the operator saw in the snapshot.
    let field = client.inspect("ff").expect("inspect").holders[0].field();
    let at = Instant::now();
    assert!(lock.force_unlock_owned_by(&field).expect("force"));
    let reply = java.recv("w");
    assert!(reply.ok, "Java's lock failed: `{}`", reply.line);
    let took = reply.at.saturating_duration_since(at);
    assert!(
        took < Duration::from_secs(1),
        "the Java waiter got it {took:?} after the force unlock"
    );
    java.ok("w", "unlock fair/ff");
}
