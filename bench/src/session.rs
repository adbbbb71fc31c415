//! The interface every Rust contender is measured through, a [`Session`]
//! (one thread's handle on one lock name), and what every scenario shares
//! on top of it: the lease, Redisson's braced key names, the true floor's
//! RLock scripts, the crate's session (one implementation for every lock
//! type), the warm-up and the timed loop of lock+unlock pairs.
//!
//! The lowest of the benchmark's modules besides `common`: it imports no
//! other module of the benchmark.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use redis::Script;

/// The lease every contender takes (Redisson's default watchdog timeout).
pub const LEASE: Duration = Duration::from_secs(30);

/// The true floor's scripts (PROTOCOL §2.1, §2.2 without the latch), hashed
/// once.
pub static FLOOR_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/floor_acquire.lua")));
pub static FLOOR_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/floor_unlock.lua")));

/// One thread's handle on one lock.
pub trait Session {
    fn lock(&mut self) -> Result<()>;
    fn unlock(&mut self) -> Result<()>;
}

/// Redisson's `prefixName` for names without braces.
pub fn braced(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

// ---------------------------------------------------------------- crate

/// redisson-lock's `lock`, of any lock type, taken and released as a user
/// does (`lock()`, then the guard's `unlock()`).
pub fn crate_session<K: redisson_lock::Kind + 'static>(
    lock: redisson_lock::Lock<K>,
) -> Box<dyn Session> {
    Box::new(CrateSession { lock, guard: None })
}

struct CrateSession<K: redisson_lock::Kind> {
    lock: redisson_lock::Lock<K>,
    guard: Option<redisson_lock::LockGuard<K>>,
}

impl<K: redisson_lock::Kind> Session for CrateSession<K> {
    fn lock(&mut self) -> Result<()> {
        self.guard = Some(self.lock.lock()?);
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        match self.guard.take() {
            Some(guard) => Ok(guard.unlock()?),
            None => bail!("crate: unlock without a guard"),
        }
    }
}

// ---------------------------------------------------------------- loops

/// `pairs` untimed lock+unlock pairs.
pub fn warm_up(session: &mut dyn Session, pairs: u64) -> Result<()> {
    for _ in 0..pairs {
        session.lock()?;
        session.unlock()?;
    }
    Ok(())
}

/// Lock+unlock pairs until `end`, each pair's latency (ns) pushed to
/// `latencies`.
pub fn timed_pairs(
    session: &mut dyn Session,
    end: Instant,
    latencies: &mut Vec<u64>,
) -> Result<()> {
    pairs_until(session, end, |t0| {
        latencies.push(t0.elapsed().as_nanos() as u64)
    })
}

/// Lock+unlock pairs until `end`, counted only.
pub fn counted_pairs(session: &mut dyn Session, end: Instant) -> Result<u64> {
    let mut pairs = 0;
    pairs_until(session, end, |_| pairs += 1)?;
    Ok(pairs)
}

/// The timed loop: a pair starts while the clock is before `end`; `done`
/// gets each finished pair's start.
fn pairs_until(
    session: &mut dyn Session,
    end: Instant,
    mut done: impl FnMut(Instant),
) -> Result<()> {
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            return Ok(());
        }
        session.lock()?;
        session.unlock()?;
        done(t0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its calls; fails the lock after `fail_after` pairs.
    struct Counting {
        locks: u64,
        unlocks: u64,
        fail_after: u64,
    }

    impl Session for Counting {
        fn lock(&mut self) -> Result<()> {
            if self.locks == self.fail_after {
                bail!("lock {} fails", self.locks);
            }
            self.locks += 1;
            Ok(())
        }

        fn unlock(&mut self) -> Result<()> {
            self.unlocks += 1;
            Ok(())
        }
    }

    fn counting(fail_after: u64) -> Counting {
        Counting {
            locks: 0,
            unlocks: 0,
            fail_after,
        }
    }

    #[test]
    fn the_timed_loop_runs_pairs_until_the_end_and_no_later() {
        let mut s = counting(u64::MAX);
        // An end already past: not one pair.
        assert_eq!(counted_pairs(&mut s, Instant::now()).expect("count"), 0);
        assert_eq!(s.locks, 0);
        let mut latencies = Vec::new();
        let end = Instant::now() + Duration::from_millis(5);
        timed_pairs(&mut s, end, &mut latencies).expect("timed");
        assert!(Instant::now() >= end);
        assert_eq!(latencies.len() as u64, s.locks);
        assert_eq!(s.locks, s.unlocks);
        let n = counted_pairs(&mut s, Instant::now() + Duration::from_millis(5)).expect("count");
        assert_eq!(n + latencies.len() as u64, s.locks);
    }

    #[test]
    fn warm_up_and_the_timed_loop_stop_at_the_first_error() {
        let mut s = counting(3);
        warm_up(&mut s, 2).expect("warm");
        assert_eq!((s.locks, s.unlocks), (2, 2));
        let far = Instant::now() + Duration::from_secs(60);
        assert!(counted_pairs(&mut s, far).is_err());
        assert_eq!((s.locks, s.unlocks), (3, 3));
    }

    #[test]
    fn braced_names_keep_their_own_braces() {
        assert_eq!(braced("p", "a"), "p:{a}");
        assert_eq!(braced("p", "{a}:b"), "p:{a}:b");
    }
}
