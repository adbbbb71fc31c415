//! Redisson's `FairLock` (`getFairLock`, docs/wire-format.md, "Fair locks"): RLock's hash and
//! renewal, plus a queue of waiting owner fields
//! `redisson_lock_queue:{<name>}` in arrival order and a zset
//! `redisson_lock_timeout:{<name>}` of their deadlines (client epoch ms). A
//! release wakes only the queue head, on its own channel
//! `redisson_lock__channel:{<name>}:<head field>`.
//!
//! The non-reentrant fair lock (docs/wire-format.md, "Non-reentrant lock") speaks the same
//! scripts with a
//! reentry error text; both types share [`FairCore`].

use std::sync::LazyLock;
use std::time::Duration;

use redis::ConnectionLike;

use crate::lua::Lua;

use super::epoch_millis;
use super::sealed::Protocol;
use super::{AcquireRequest, Acquired, UnlockScripts, Unlocking, Wake};
use crate::error::{Error, Result};
use crate::names::{self, UNLOCK_MESSAGE};

static ACQUIRE: LazyLock<Lua> = lua_script!("fair_acquire.lua");
static TRY_ONCE: LazyLock<Lua> = lua_script!("fair_try_acquire_once.lua");
static GIVE_UP: LazyLock<Lua> = lua_script!("fair_acquire_failed.lua");
static UNLOCKS: UnlockScripts = unlock_scripts!("fair");

/// What both fair lock types know of one lock: its derived keys, the wait
/// a try-once sends, and the reentry error text (empty: reentrant).
#[derive(Debug)]
pub(crate) struct FairCore {
    channel: String,
    queue: String,
    timeout: String,
    /// Redisson's `fairLockWaitTimeout` in ms: the wait a try-once sends.
    wait_timeout_ms: u64,
    /// Whether a caller's own wait is sent as the thread wait time
    /// (Redisson 3.13.3+), or always the wait timeout (before).
    caller_wait: bool,
    reentry_error: &'static str,
}

impl FairCore {
    pub(crate) fn new(name: &str, wait_timeout: Duration, reentry_error: &'static str) -> Self {
        FairCore {
            channel: names::lock_channel(name),
            queue: names::prefix_name(names::FAIR_QUEUE_PREFIX, name),
            timeout: names::prefix_name(names::FAIR_TIMEOUT_PREFIX, name),
            wait_timeout_ms: u64::try_from(wait_timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            caller_wait: true,
            reentry_error,
        }
    }

    /// As Redisson before 3.13.3 (`Config::fair_lock_caller_wait` off):
    /// every acquire sends the wait timeout, whatever the caller's wait.
    pub(crate) fn with_caller_wait(self, caller_wait: bool) -> Self {
        FairCore {
            caller_wait,
            ..self
        }
    }

    /// Redisson's "thread wait time" (docs/wire-format.md, "Fair locks"): the caller's wait in
    /// whole ms when above 0, the wait timeout otherwise (`lock()`, or a
    /// wait under 1 ms, or always before Redisson 3.13.3, docs/compat.md).
    fn thread_wait_ms(&self, wait_ms: u64) -> u64 {
        if wait_ms > 0 && self.caller_wait {
            wait_ms
        } else {
            self.wait_timeout_ms
        }
    }

    pub(crate) fn wake<'a>(&'a self, field: &'a str) -> Wake<'a> {
        Wake::Own(names::concat(&[&self.channel, ":", field]))
    }

    pub(crate) fn acquire(
        &self,
        con: &mut dyn ConnectionLike,
        request: &AcquireRequest<'_>,
    ) -> Result<Acquired> {
        let (script, third, fourth) = match request.queue {
            // The time of this request, as Redisson takes it per call.
            Some(queue) => (
                &*ACQUIRE,
                self.thread_wait_ms(queue.wait_ms),
                epoch_millis(),
            ),
            // Redisson's try-once sends `now` before the wait.
            None => (&*TRY_ONCE, epoch_millis(), self.wait_timeout_ms),
        };
        let mut invocation = script.key(request.name);
        invocation
            .key(&self.queue)
            .key(&self.timeout)
            .arg(request.lease_ms)
            .arg(request.field)
            .arg(third)
            .arg(fourth)
            .arg(request.known)
            .arg(self.reentry_error);
        request.add_marker(&mut invocation);
        let reply: Option<i64> = invocation.invoke(con).map_err(|e| {
            if !self.reentry_error.is_empty()
                && e.to_string().contains(names::NON_REENTRANT_REACQUIRE)
            {
                Error::NotReentrant {
                    name: request.name.to_owned(),
                }
            } else {
                Error::Redis(e)
            }
        })?;
        Ok(match (reply, request.queue) {
            (None, _) => Acquired::Yes {
                replaced: false,
                token: None,
            },
            (Some(-3), _) => Acquired::Yes {
                replaced: true,
                token: None,
            },
            // Try-once answers 1 for "not acquired", with no TTL.
            (Some(_), None) => Acquired::No { ttl: None },
            // Free, but another waiter's turn (the queue's head): how long
            // to wait before asking again is the waiting loop's.
            (Some(0), Some(_)) => Acquired::No {
                ttl: Some(Duration::ZERO),
            },
            (Some(ttl), Some(_)) => Acquired::No {
                ttl: u64::try_from(ttl).ok().map(Duration::from_millis),
            },
        })
    }

    pub(crate) fn unlocking(&self) -> Unlocking<'_> {
        Unlocking::new(&UNLOCKS)
            .queued(&self.queue, &self.timeout)
            .publishing(self.channel.as_str(), UNLOCK_MESSAGE)
    }

    pub(crate) fn give_up(
        &self,
        con: &mut dyn ConnectionLike,
        field: &str,
        wait_ms: u64,
    ) -> Result<()> {
        let _: () = GIVE_UP
            .key(&self.queue)
            .key(&self.timeout)
            .arg(field)
            .arg(self.thread_wait_ms(wait_ms))
            .invoke(con)?;
        Ok(())
    }
}

/// The fair lock, Redisson's `FairLock`: see [`crate::FairLock`].
#[derive(Debug)]
pub struct Fair {
    core: FairCore,
}

impl Fair {
    pub(crate) fn with_wait_timeout(name: &str, wait_timeout: Duration) -> Self {
        Fair {
            core: FairCore::new(name, wait_timeout, ""),
        }
    }
}

/// Implements the protocol of a fair type by handing every call to its
/// `core` ([`FairCore`]).
macro_rules! fair_protocol {
    ($type:ty, $redisson:literal, $reentrant:literal) => {
        impl Protocol for $type {
            const REDISSON: &'static str = $redisson;
            const GIVES_UP: bool = true;

            fn new(name: &str, config: &crate::config::Config) -> Self {
                let mut lock = Self::with_wait_timeout(name, config.fair_lock_wait_timeout);
                lock.core = lock.core.with_caller_wait(config.fair_lock_caller_wait);
                lock
            }

            fn wake<'a>(&'a self, _name: &'a str, field: &'a str) -> Wake<'a> {
                self.core.wake(field)
            }

            fn acquire(
                &self,
                con: &mut dyn ConnectionLike,
                request: &AcquireRequest<'_>,
            ) -> Result<Acquired> {
                self.core.acquire(con, request)
            }

            fn unlocking<'a>(&'a self, _name: &'a str) -> Unlocking<'a> {
                self.core.unlocking()
            }

            fn give_up(
                &self,
                con: &mut dyn ConnectionLike,
                field: &str,
                wait_ms: u64,
            ) -> Result<()> {
                self.core.give_up(con, field, wait_ms)
            }

            fn reentrant(&self) -> bool {
                $reentrant
            }
        }
    };
}
pub(crate) use fair_protocol;

fair_protocol!(Fair, "RedissonFairLock", true);
