//! A worker's history recording (`history.rs` describes the lines): the
//! `H` lines of its holds (`hist`, `Rec`, `lost_field`), the fencing token
//! of each lock kind (`Fencing`), the lost-signal watcher thread that
//! records each hold's `LostSignal` when it fires (`lost_watcher`), and the
//! deliberately broken workers of `TORTURE_BREAK` that the checker must
//! catch (`fake_section`).

use std::sync::LazyLock;
use std::thread;
use std::time::Duration;

use redisson_lock::{
    Fair, Fenced, Kind, Lock, LockGuard, LostReason, LostSignal, Read, Reentrant,
    Write as WriteSide,
};

use super::{ThreadState, WorkerCtx, emit};
use crate::history::{now_ns, wall_ns};
use crate::{LEASE_MS, LockKind};

/// The fencing token of a guard, for the kinds that have one.
pub trait Fencing: Kind {
    fn token_of(_guard: &LockGuard<Self>) -> Option<u64> {
        None
    }
}

impl Fencing for Reentrant {}
impl Fencing for Fair {}
impl Fencing for Read {}
impl Fencing for WriteSide {}
impl Fencing for Fenced {
    fn token_of(guard: &LockGuard<Fenced>) -> Option<u64> {
        Some(guard.token())
    }
}

/// `TORTURE_BREAK=skip-lock` (the checker's own test, never in a real run):
/// one attempt in 20 skips the lock and records a made-up acquisition (the
/// lock's current token, a full lease), which the history checker must flag.
pub(super) fn break_skip_lock() -> bool {
    static SKIP: LazyLock<bool> =
        LazyLock::new(|| std::env::var("TORTURE_BREAK").is_ok_and(|v| v == "skip-lock"));
    *SKIP
}

/// `TORTURE_BREAK=hide-lost` (the checker's own test, never in a real
/// run): the history says no hold was ever lost (no `lost signal` line, `lost=0`).
fn break_hide_lost() -> bool {
    static HIDE: LazyLock<bool> =
        LazyLock::new(|| std::env::var("TORTURE_BREAK").is_ok_and(|v| v == "hide-lost"));
    *HIDE
}

/// A hold's `lost=` field: `0` or the reason, in snake case.
pub fn lost_field(reason: Option<LostReason>) -> &'static str {
    match reason.filter(|_| !break_hide_lost()) {
        None => "0",
        Some(LostReason::LeaseExpired) => "lease_expired",
        Some(LostReason::KeyGone) => "key_gone",
        Some(LostReason::Overwritten) => "overwritten",
        Some(LostReason::ForceUnlocked) => "force_unlocked",
        Some(LostReason::Replaced) => "replaced",
        Some(LostReason::Released) => "released",
        Some(LostReason::Shutdown) => "shutdown",
        Some(_) => "other",
    }
}

/// Prints one history line (`H <t> <rest>`; see `history.rs`).
pub fn hist(t: u64, rest: std::fmt::Arguments<'_>) {
    emit(format_args!("H {t} {rest}"));
}

/// One hold as its history lines name it.
pub(super) struct Rec<'a> {
    pub(super) who: &'a str,
    pub(super) h: String,
    pub(super) name: &'a str,
    pub(super) token: Option<u64>,
}

impl Rec<'_> {
    /// ` lock=<name> h=<h>[ tok=<token>]`
    pub(super) fn id(&self) -> String {
        match self.token {
            Some(token) => format!("lock={} h={} tok={token}", self.name, self.h),
            None => format!("lock={} h={}", self.name, self.h),
        }
    }
}

/// A hold's lost signal, for the worker's watcher thread.
pub struct Watch {
    pub(super) who: String,
    pub(super) id: String,
    /// The lock and the section's occupancy token, for the `L` line.
    pub(super) name: &'static str,
    pub(super) token: String,
    pub(super) signal: LostSignal,
}

/// Records every watched hold's lost signal when it fires (`lost signal`),
/// and forgets holds released without loss.
pub(super) fn lost_watcher(watches: crossbeam_channel::Receiver<Watch>) {
    let mut watched: Vec<(Watch, crossbeam_channel::Receiver<LostReason>)> = Vec::new();
    loop {
        let mut select = crossbeam_channel::Select::new();
        select.recv(&watches);
        for (_, receiver) in &watched {
            select.recv(receiver);
        }
        let oper = select.select();
        let index = oper.index();
        if index == 0 {
            match oper.recv(&watches) {
                Ok(watch) => {
                    let receiver = watch.signal.receiver();
                    watched.push((watch, receiver));
                }
                Err(_) => return,
            }
            continue;
        }
        let got = oper.recv(&watched[index - 1].1);
        let (watch, _) = watched.swap_remove(index - 1);
        if let Ok(reason) = got
            && !break_hide_lost()
        {
            let seen = now_ns();
            let since = if reason == LostReason::LeaseExpired {
                wall_ns(watch.signal.valid_until()).min(seen)
            } else {
                seen
            };
            hist(
                seen,
                format_args!(
                    "{} lost signal {} reason={} since={since}",
                    watch.who,
                    watch.id,
                    lost_field(Some(reason))
                ),
            );
            // The supervisor's summary: this holder was told, should it
            // die before its section reports back.
            emit(format_args!(
                "L {} {} {}",
                watch.name,
                watch.token,
                seen / 1_000_000
            ));
        }
    }
}

/// `TORTURE_BREAK=skip-lock`: records an acquisition that did not happen
/// (the lock's last token, valid for a lease from now), a short section and
/// its release, and touches nothing else (no occupancy set, no counter).
pub(super) fn fake_section<K: Fencing>(
    ctx: &WorkerCtx,
    state: &mut ThreadState,
    lock: &Lock<K>,
    rec: &mut Rec<'_>,
    exclusive: bool,
) {
    let who = rec.who;
    if ctx.kind == LockKind::Fenced {
        // The fenced lock's `token()` (GET of its counter), by the kind's
        // public handle.
        rec.token = ctx.client.fenced_lock(lock.name()).token().ok().flatten();
    }
    let vu = now_ns() + LEASE_MS * 1_000_000;
    hist(
        now_ns(),
        format_args!("{who} acquire ok {} vu={vu}", rec.id()),
    );
    hist(now_ns(), format_args!("{who} hold invoke {}", rec.id()));
    thread::sleep(Duration::from_micros(
        state.rng.range(200, if exclusive { 3000 } else { 1000 }),
    ));
    hist(
        now_ns(),
        format_args!("{who} hold ok {} vu={vu} lost=0", rec.id()),
    );
    hist(
        now_ns(),
        format_args!("{who} release invoke {} vu={vu} lost=0", rec.id()),
    );
    hist(now_ns(), format_args!("{who} release ok {}", rec.id()));
}
