//! The workload the ACL recipe tests (tests/security/recipes.rs) run as the
//! recipe's user: every lock kind and every synchronizer, each with a
//! waiter on a second client woken by the first, reporting the first
//! failure (a waiter's own error included) as an `Err`, never a panic, so
//! that a run without one permission shows the error a caller gets.

use std::thread;
use std::time::Duration;

use redisson_lock::{Client, Kind, Lock, RequestId};

/// Every lock kind and every synchronizer, each with a waiter on `waiter`
/// woken by `holder`. `Err` with the first failure's message (a waiter's
/// own error included).
pub fn exercise(holder: &Client, waiter: &Client, tag: &str) -> Result<(), String> {
    let name_for = |kind: &str| format!("app:{tag}:{kind}");
    let pass = |name: &str| (holder, waiter, name_for(name));
    contend(|c, n| c.lock(n), |c, n| c.lock(n), pass("reentrant"))?;
    contend(
        |c, n| c.fenced_lock(n),
        |c, n| c.fenced_lock(n),
        pass("fenced"),
    )?;
    contend(|c, n| c.fair_lock(n), |c, n| c.fair_lock(n), pass("fair"))?;
    contend(
        |c, n| c.non_reentrant_lock(n),
        |c, n| c.non_reentrant_lock(n),
        pass("non-reentrant"),
    )?;
    contend(
        |c, n| c.non_reentrant_fair_lock(n),
        |c, n| c.non_reentrant_fair_lock(n),
        pass("non-reentrant-fair"),
    )?;
    contend(|c, n| c.spin_lock(n), |c, n| c.spin_lock(n), pass("spin"))?;
    contend(
        |c, n| c.read_write_lock(n).write_lock(),
        |c, n| c.read_write_lock(n).write_lock(),
        pass("write"),
    )?;
    contend(
        |c, n| c.read_write_lock(n).write_lock(),
        |c, n| c.read_write_lock(n).read_lock(),
        pass("read-behind-write"),
    )?;
    contend(
        |c, n| c.read_write_lock(n).read_lock(),
        |c, n| c.read_write_lock(n).write_lock(),
        pass("write-behind-read"),
    )?;
    synchronizers(holder, waiter, &name_for)
}

/// The holder's `hold` takes the lock, the waiter's `wait` is refused it
/// (`try_lock`), then waits for it in a thread and gets it after the
/// release; then the queries. The first error, the waiter's included.
pub fn contend<H: Kind, W: Kind>(
    hold: fn(&Client, &str) -> Lock<H>,
    wait: fn(&Client, &str) -> Lock<W>,
    (holder, waiter, name): (&Client, &Client, String),
) -> Result<(), String> {
    let fail = |what: &str, e: redisson_lock::Error| format!("{what} {name}: {e}");
    let held = hold(holder, &name);
    let guard = held.lock().map_err(|e| fail("lock", e))?;
    let lock = wait(waiter, &name);
    if lock.try_lock().map_err(|e| fail("try_lock", e))?.is_some() {
        return Err(format!("{name}: taken twice"));
    }
    let waiting = thread::spawn(move || {
        lock.try_lock_for(Duration::from_secs(5))
            .map(|guard| guard.map(|guard| guard.unlock()))
    });
    // The waiter waits (or has failed: its error is reported below).
    super::eventually(Duration::from_secs(2), || {
        waiter.diagnostics().waiters == 1 || waiting.is_finished()
    });
    held.is_locked().map_err(|e| fail("is_locked", e))?;
    held.hold_count().map_err(|e| fail("hold_count", e))?;
    held.remaining_ttl().map_err(|e| fail("remaining_ttl", e))?;
    guard.unlock().map_err(|e| fail("unlock", e))?;
    match waiting
        .join()
        .map_err(|_| format!("{name}: the waiter panicked"))?
    {
        Ok(Some(Ok(()))) => Ok(()),
        Ok(Some(Err(e))) => Err(fail("the waiter's unlock of", e)),
        Ok(None) => Err(format!("{name}: the waiter timed out")),
        Err(e) => Err(fail("the waiter's try_lock_for of", e)),
    }
}

pub fn synchronizers(
    holder: &Client,
    waiter: &Client,
    name_for: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    fn step(what: &'static str) -> impl Fn(redisson_lock::Error) -> String {
        move |e| format!("{what}: {e}")
    }
    let wait = Duration::from_secs(5);

    // Two readers: the first release leaves the other's hold (the scripts'
    // path that recomputes the lock's TTL from the remaining readers).
    let rw = name_for("readers");
    let first = holder
        .read_write_lock(&rw)
        .read_lock()
        .lock()
        .map_err(step("read lock"))?;
    let second = waiter.read_write_lock(&rw).read_lock();
    let second = thread::spawn(move || second.lock().map(|guard| (second, guard.unlock())));
    let (second, released) = second
        .join()
        .map_err(|_| "reader panicked")?
        .map_err(step("second read lock"))?;
    released.map_err(step("second read unlock"))?;
    first.unlock().map_err(step("read unlock"))?;
    if second.is_locked().map_err(step("read is_locked"))? {
        return Err(format!("{rw} still locked after both readers left"));
    }

    // Redisson's latched unlock, with the caller's request id (the
    // `*_unlock.lua` scripts), and a force unlock.
    let lock = holder.lock(name_for("latched"));
    let guard = lock.lock().map_err(step("lock"))?;
    lock.unlock_with_request_id(&RequestId::new())
        .map_err(step("unlock_with_request_id"))?;
    drop(guard); // already released: logged, not an error here
    let _guard = lock.lock().map_err(step("lock again"))?;
    if !lock.force_unlock().map_err(step("force_unlock"))? {
        return Err("force_unlock found nothing".into());
    }

    // Semaphore: one permit, a waiter woken by its release.
    let name = name_for("semaphore");
    let sem = holder.semaphore(&name);
    sem.try_set_permits(1).map_err(step("try_set_permits"))?;
    let permits = sem.acquire(1).map_err(step("semaphore acquire"))?;
    let other = waiter.semaphore(&name);
    let waiting = thread::spawn(move || {
        other
            .try_acquire_for(1, wait)
            .map(|p| p.map(|p| p.release()))
    });
    waits(waiter)?;
    permits.release().map_err(step("semaphore release"))?;
    match waiting.join().map_err(|_| "semaphore waiter panicked")? {
        Ok(Some(Ok(()))) => {}
        other => return Err(format!("semaphore waiter: {other:?}")),
    }
    sem.available_permits().map_err(step("available_permits"))?;
    sem.add_permits(1).map_err(step("add_permits"))?;
    sem.drain_permits().map_err(step("drain_permits"))?;
    sem.delete().map_err(step("semaphore delete"))?;

    // Permit-expirable semaphore: one permit, a waiter woken by its release.
    let name = name_for("expirable");
    let pes = holder.permit_expirable_semaphore(&name);
    pes.try_set_permits(1)
        .map_err(step("pes try_set_permits"))?;
    let permit = pes.acquire(None).map_err(step("pes acquire"))?;
    let other = waiter.permit_expirable_semaphore(&name);
    let waiting = thread::spawn(move || {
        other
            .try_acquire_for(wait, Some(Duration::from_secs(10)))
            .map(|p| p.map(|p| p.release()))
    });
    waits(waiter)?;
    permit.release().map_err(step("pes release"))?;
    match waiting.join().map_err(|_| "pes waiter panicked")? {
        Ok(Some(Ok(()))) => {}
        other => return Err(format!("pes waiter: {other:?}")),
    }
    pes.available_permits()
        .map_err(step("pes available_permits"))?;
    pes.acquired_permits()
        .map_err(step("pes acquired_permits"))?;
    pes.delete().map_err(step("pes delete"))?;

    // Count-down latch: a waiter woken by the count reaching zero.
    let name = name_for("latch");
    let latch = holder.count_down_latch(&name);
    latch.try_set_count(1).map_err(step("try_set_count"))?;
    let other = waiter.count_down_latch(&name);
    let waiting = thread::spawn(move || other.wait_for(wait));
    waits(waiter)?;
    latch.count_down().map_err(step("count_down"))?;
    match waiting.join().map_err(|_| "latch waiter panicked")? {
        Ok(true) => {}
        other => return Err(format!("latch waiter: {other:?}")),
    }
    latch.count().map_err(step("latch count"))?;
    latch.delete().map_err(step("latch delete"))?;
    Ok(())
}

/// Waits until `client` has a thread waiting through its subscriber; `Err`
/// when none does within 5 s (the waiter failed, e.g. refused its
/// subscription).
pub fn waits(client: &Client) -> Result<(), String> {
    if super::eventually(Duration::from_secs(5), || client.diagnostics().waiters == 1) {
        Ok(())
    } else {
        Err("the waiter never waited".into())
    }
}

/// The tuning every client of these tests gets: failures reported within
/// seconds, not after the defaults' waits.
pub fn tuned(builder: redisson_lock::ClientBuilder) -> Result<Client, String> {
    builder
        .connect_timeout(Duration::from_secs(2))
        .response_timeout(Duration::from_secs(2))
        .subscription_timeout(Duration::from_secs(1))
        .unlock_retries(0, Duration::from_millis(10))
        .build()
        .map_err(|e| format!("build: {e}"))
}
