//! One cheap pass over Redisson's synchronizers for a topology's tests (the
//! TLS ones): the semaphore, the permit-expirable semaphore and the
//! count-down latch are set up by one client, a second client is refused
//! (or kept waiting), then its waiting thread must get through soon after
//! the first client's release (count-down): woken by the message through
//! its subscriber.
//!
//! A Rust waiter re-reads at least every 3 s by itself, so the release is
//! made just after the node saw one of the waiter's re-reads
//! ([`release_after_a_repoll`]): a wake-up within [`WAKE_BOUND`] then came
//! from the message.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, PermitId};

/// The longest a waiter may take after the release: far under its 3 s
/// re-read, generous for a loaded machine.
pub const WAKE_BOUND: Duration = Duration::from_secs(2);

/// The synchronizers, with the name suffix each pass gives them.
pub const KINDS: [&str; 3] = ["semaphore", "expirable", "latch"];

/// What a pass reports of one synchronizer: its kind, its name and the
/// time from the release to the waiter getting through.
#[derive(Debug)]
pub struct Handoff {
    pub kind: &'static str,
    pub name: String,
    pub took: Duration,
}

/// The sides of a pass: the clients, a connection to the node serving a
/// name (to see the waiter's re-reads), and the topology's checks, run
/// while the waiter waits (`while_waiting(kind, name, channel)`: the key
/// on the right node, the subscriber's connection).
pub struct Sides<'a> {
    pub holder: &'a Client,
    pub waiter: &'a Client,
    pub name_for: &'a dyn Fn(&str) -> String,
    pub con_for: &'a dyn Fn(&str) -> redis::Connection,
    pub while_waiting: &'a dyn Fn(&str, &str, &str),
}

/// Runs the three hand-offs of [`KINDS`].
pub fn every_synchronizer(sides: &Sides<'_>) -> Vec<Handoff> {
    KINDS
        .iter()
        .map(|&kind| {
            let name = (sides.name_for)(kind);
            let took = match kind {
                "semaphore" => semaphore(sides, &name),
                "expirable" => expirable(sides, &name),
                _ => latch(sides, &name),
            };
            eprintln!("{kind} `{name}`: woken {took:?} after the release");
            Handoff { kind, name, took }
        })
        .collect()
}

/// A semaphore of one permit: the holder's; the waiter's `acquire(1)` gets
/// it when the holder releases it.
fn semaphore(sides: &Sides<'_>, name: &str) -> Duration {
    let sem = sides.holder.semaphore(name);
    assert!(sem.try_set_permits(1).expect("try_set_permits"), "{name}");
    let permits = sem.acquire(1).expect("acquire");
    let theirs = sides.waiter.semaphore(name);
    assert!(
        theirs.try_acquire(1).expect("try_acquire").is_none(),
        "{name}: no permit left for the other client"
    );
    let woken = spawn_waiter(move || {
        theirs.acquire(1).expect("the waiter's acquire").forget();
    });
    let channel = format!("redisson_sc:{{{name}}}");
    (sides.while_waiting)("semaphore", name, &channel);
    let released = release_after_a_repoll(sides, name, || permits.release().expect("release"));
    let took = woken_within(&woken, released, name);
    assert_eq!(sem.available_permits().expect("available"), 0);
    sem.release(1).expect("release the waiter's permit");
    assert_eq!(sem.available_permits().expect("available"), 1);
    took
}

/// A permit-expirable semaphore of one permit: the holder's (permanent, so
/// the waiter has no expiry to wake at); the waiter's `acquire(lease)` gets
/// it on the release, and the holder then reads and releases the waiter's
/// permit by its id.
fn expirable(sides: &Sides<'_>, name: &str) -> Duration {
    let pes = sides.holder.permit_expirable_semaphore(name);
    assert!(pes.try_set_permits(1).expect("try_set_permits"), "{name}");
    let permit = pes.acquire(None).expect("acquire");
    let theirs = sides.waiter.permit_expirable_semaphore(name);
    assert!(
        theirs.try_acquire(None).expect("try_acquire").is_none(),
        "{name}: no permit left for the other client"
    );
    let (ids_tx, ids_rx) = mpsc::channel::<Vec<PermitId>>();
    let woken = spawn_waiter(move || {
        let lease = Some(Duration::from_secs(30));
        let ids = theirs
            .acquire(lease)
            .expect("the waiter's acquire")
            .forget();
        ids_tx.send(ids).expect("send the ids");
    });
    let channel = format!("redisson_sc:{{{name}}}");
    (sides.while_waiting)("expirable", name, &channel);
    let released = release_after_a_repoll(sides, name, || permit.release().expect("release"));
    let took = woken_within(&woken, released, name);
    let ids = ids_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the waiter's ids");
    let lease = pes
        .lease_time(ids[0])
        .expect("lease_time of the other's id");
    assert!(
        lease.is_some_and(|left| left <= Duration::from_secs(30)),
        "{lease:?}"
    );
    pes.release(ids[0]).expect("release the other's permit");
    assert_eq!(pes.available_permits().expect("available"), 1);
    took
}

/// A latch of 2: the waiter's `wait()` stays after the first count-down
/// and returns after the second.
fn latch(sides: &Sides<'_>, name: &str) -> Duration {
    let latch = sides.holder.count_down_latch(name);
    assert!(latch.try_set_count(2).expect("try_set_count"), "{name}");
    let theirs = sides.waiter.count_down_latch(name);
    assert!(
        !theirs.wait_for(Duration::ZERO).expect("wait_for"),
        "{name}"
    );
    let woken = spawn_waiter(move || theirs.wait().expect("the waiter's wait"));
    latch.count_down().expect("count_down");
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    (sides.while_waiting)("latch", name, &channel);
    assert!(woken.try_recv().is_err(), "{name}: through at a count of 1");
    assert_eq!(latch.count().expect("count"), 1);
    let released = release_after_a_repoll(sides, name, || latch.count_down().expect("count_down"));
    let took = woken_within(&woken, released, name);
    assert_eq!(latch.count().expect("count"), 0);
    took
}

/// Runs `wait` on a new thread, which reports when it returned.
fn spawn_waiter(wait: impl FnOnce() + Send + 'static) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        wait();
        let _ = tx.send(Instant::now());
    });
    rx
}

/// The script and `GET` calls of `INFO commandstats` on `con`: a
/// synchronizer waiter's attempts and re-reads.
fn reads(con: &mut redis::Connection) -> u64 {
    super::state::command_calls(con, &["evalsha", "eval", "get"])
}

/// Waits until the node serving `name` sees one more script or `GET` (the
/// waiting thread's re-read: nothing else sends them there meanwhile),
/// then runs `release` at once and returns when it began. The waiter's
/// next re-read is then about 3 s away.
fn release_after_a_repoll(sides: &Sides<'_>, name: &str, release: impl FnOnce()) -> Instant {
    release_after_a_reread(&mut (sides.con_for)(name), name, release)
}

/// [`release_after_a_repoll`] on a connection `con` to the node serving
/// `name` (for tests whose releasing side is not a Rust client, e.g. Java).
pub fn release_after_a_reread(
    con: &mut redis::Connection,
    name: &str,
    release: impl FnOnce(),
) -> Instant {
    let before = reads(con);
    assert!(
        super::eventually(Duration::from_secs(10), || reads(con) > before),
        "{name}: the waiter never re-read"
    );
    let at = Instant::now();
    release();
    at
}

/// Waits for the waiter reporting on `woken` and asserts it got through
/// within [`WAKE_BOUND`] of `since`; returns how long it took.
fn woken_within(woken: &mpsc::Receiver<Instant>, since: Instant, name: &str) -> Duration {
    super::sync::woken_within(woken, since, WAKE_BOUND, name)
}
