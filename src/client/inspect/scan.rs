//! [`LockScan`], the iterator of [`Client::scan_locks`](crate::Client::scan_locks): `SCAN` pages
//! from every master, one snapshot per key found.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use super::{LockKind, LockSummary, inspect};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::net::pool::Pool;

/// The iterator of [`Client::scan_locks`](crate::Client::scan_locks): one `SCAN` page per round trip,
/// plus one snapshot per hash found.
pub struct LockScan {
    engine: Arc<Engine>,
    pattern: String,
    page_size: u32,
    /// Every master's pool, read on the first `next`.
    pools: Option<Vec<Arc<Pool>>>,
    master: usize,
    cursor: u64,
    page: VecDeque<String>,
    done: bool,
    /// The `SCAN ... TYPE`s, each a pass over every master; `key_type`
    /// indexes the current one.
    key_types: &'static [&'static str],
    key_type: usize,
    /// The `TYPE` the keys in `page` were scanned with.
    page_type: &'static str,
}

impl LockScan {
    /// A scan of `pattern`, hashes only; no I/O.
    pub(super) fn new(engine: Arc<Engine>, pattern: String) -> LockScan {
        LockScan {
            engine,
            pattern,
            page_size: 100,
            pools: None,
            master: 0,
            cursor: 0,
            page: VecDeque::new(),
            done: false,
            key_types: &["hash"],
            key_type: 0,
            page_type: "hash",
        }
    }

    /// The `COUNT` hint of each `SCAN` (how many keys the server looks at
    /// per page; at least 1). No round trip.
    #[must_use = "this returns the changed scan"]
    pub fn page_size(mut self, count: u32) -> LockScan {
        self.page_size = count.max(1);
        self
    }

    /// Reports synchronizers too: after the hashes, each master is scanned
    /// again with `TYPE string`, and every string that is a Redisson
    /// counter is reported, free or not: an `RSemaphore`'s or
    /// `RCountDownLatch`'s ([`LockKind::Counter`]) or a permit-expirable
    /// semaphore's ([`LockKind::PermitExpirableSemaphore`]; its permits
    /// ZSET is not a string, so it is not reported twice). The keys do not
    /// tell a synchronizer from an application's integer string of a
    /// matching name: both are reported. Derived strings are skipped: keys
    /// under Redisson's `redisson_` prefixes (fencing tokens, unlock
    /// latches) and read-lock markers (`...:rwlock_timeout:<n>`). Costs one
    /// more `SCAN` pass and one snapshot per string found. No I/O.
    #[must_use = "this returns the changed scan"]
    pub fn with_synchronizers(mut self) -> LockScan {
        self.key_types = &["hash", "string"];
        self
    }

    /// The next page of hash keys from the current master; `false` when
    /// every master is scanned.
    fn next_page(&mut self) -> Result<bool> {
        if self.pools.is_none() {
            self.engine.check_process()?;
            self.pools = Some(self.engine.topology.master_pools()?);
        }
        let pools = self.pools.as_deref().unwrap_or_default();
        let Some(pool) = pools.get(self.master) else {
            return Ok(false);
        };
        let key_type = self.key_types.get(self.key_type).copied();
        let (cursor, keys) =
            self.engine
                .scan_page(pool, self.cursor, &self.pattern, self.page_size, key_type)?;
        self.page.extend(keys);
        self.page_type = key_type.unwrap_or("hash");
        if cursor == 0 {
            self.key_type += 1;
            if self.key_type >= self.key_types.len() {
                self.key_type = 0;
                self.master += 1;
            }
        }
        self.cursor = cursor;
        Ok(true)
    }
}

/// A string that is a lock's derived key, never a synchronizer: Redisson's
/// `redisson_`-prefixed keys (fencing tokens, unlock latches) and a
/// reader's markers.
fn derived_string(name: &str) -> bool {
    name.starts_with("redisson_") || name.contains(":rwlock_timeout:")
}

impl Iterator for LockScan {
    type Item = Result<LockSummary>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            if let Some(name) = self.page.pop_front() {
                if self.page_type == "string" && derived_string(&name) {
                    continue;
                }
                match inspect(&self.engine, &name) {
                    Ok(info) if info.locked => return Some(Ok(LockSummary::from(&info))),
                    Ok(info)
                        if matches!(
                            info.kind,
                            LockKind::Counter { .. } | LockKind::PermitExpirableSemaphore { .. }
                        ) && self.key_types.len() > 1 =>
                    {
                        return Some(Ok(LockSummary::from(&info)));
                    }
                    Ok(_) | Err(Error::NotALock { .. }) => continue,
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
            match self.next_page() {
                Ok(true) => {}
                Ok(false) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

impl fmt::Debug for LockScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockScan")
            .field("pattern", &self.pattern)
            .field("master", &self.master)
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}
