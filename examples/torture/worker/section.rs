//! A worker's critical section, once it holds a lock: the occupancy set
//! around it (`ENTER`), the counter's read-modify-write (fenced by the
//! token in a fenced run: `FENCED_SET`), a cluster run's long holds, a
//! reentry now and then, and the release (`release`), each recorded in the
//! history when the run keeps one.

use std::sync::LazyLock;
use std::thread;
use std::time::Duration;

use redis::Commands;
use redisson_lock::{Error, LockGuard};

use super::record::{Fencing, Rec, hist, lost_field};
use super::{ThreadState, WorkerCtx, emit, error_kind, report_error};
use crate::history::{now_ns, wall_ns};
use crate::{LockKind, counter_key, dead_key, ms, now_ms, occupancy_key};

/// Enters the occupancy set and returns who else is in it that this holder
/// conflicts with, dropping tokens of processes the supervisor has confirmed
/// dead. Tokens end in `/w` (exclusive: reentrant, fair and write holds) or
/// `/r` (read holds): two readers do not conflict, anything else does.
static ENTER: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
redis.call('sadd', KEYS[1], ARGV[1])
local reader = string.sub(ARGV[1], -2) == '/r'
local others = {}
for _, member in ipairs(redis.call('smembers', KEYS[1])) do
  if member ~= ARGV[1] then
    local instance = string.match(member, '^([^/]+)/')
    if instance and redis.call('exists', ARGV[2] .. instance) == 1 then
      redis.call('srem', KEYS[1], member)
    elseif not (reader and string.sub(member, -2) == '/r') then
      table.insert(others, member)
    end
  end
end
return others
",
    )
});

/// A fenced run's counter write: only with a token at least as high as
/// every token that wrote before (`KEYS[2]`), as a resource that checks
/// fencing tokens does; 1 if written, 0 if refused (a stale holder).
static FENCED_SET: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local highest = tonumber(redis.call('get', KEYS[2]) or '0')
if tonumber(ARGV[2]) >= highest then
  redis.call('set', KEYS[2], ARGV[2])
  redis.call('set', KEYS[1], ARGV[1])
  return 1
end
return 0
",
    )
});

/// In a cluster run, this many sections in 1000 (of those whose lock the
/// watchdog renews) hold the lock for `LONG_HOLD_MS` (ms) more: long enough for a coordinated
/// failover to happen under the hold, or for a master's kill and its
/// replica's promotion (about 4 s, longer than the lease: the hold is lost,
/// and must be reported lost).
pub(super) const LONG_HOLD_PER_MILLE: u64 = 4;
const LONG_HOLD_MS: (u64, u64) = (300, 5000);

/// Records the release's invocation, unlocks, records its outcome, and
/// returns it (`ok`, `lost`, `not_held` or `error`) with whether the guard
/// was lost just before.
fn release<K: Fencing>(
    ctx: &WorkerCtx,
    rec: &Rec<'_>,
    guard: LockGuard<K>,
) -> (bool, &'static str) {
    let lost = guard.lost_reason();
    if ctx.history {
        let vu = wall_ns(guard.valid_until());
        hist(
            now_ns(),
            format_args!(
                "{} release invoke {} vu={vu} lost={}",
                rec.who,
                rec.id(),
                lost_field(lost)
            ),
        );
    }
    let result = guard.unlock();
    let done = now_ns();
    let outcome = match &result {
        Ok(()) => "ok",
        Err(Error::Lost { .. }) => "lost",
        Err(Error::NotHeld { .. }) => "not_held",
        Err(e) => {
            report_error(ctx, "unlock", e);
            "error"
        }
    };
    if ctx.history {
        let (phase, err) = match &result {
            Ok(()) => ("ok", String::new()),
            Err(Error::Lost { .. } | Error::NotHeld { .. }) => ("fail", format!(" err={outcome}")),
            Err(e) => ("info", format!(" err={}", error_kind(e))),
        };
        hist(
            done,
            format_args!("{} release {phase} {}{err}", rec.who, rec.id()),
        );
    }
    (lost.is_some(), outcome)
}

/// Readers only read the counter; exclusive holders increment it (a
/// non-atomic read-modify-write, so that a lost update shows an overlap).
pub(super) fn critical_section<K: Fencing>(
    ctx: &WorkerCtx,
    state: &mut ThreadState,
    guard: LockGuard<K>,
    (rec, token): (&Rec<'_>, &str),
    exclusive: bool,
    (long, explicit_lease): (bool, bool),
) {
    let (book, rng) = (&mut state.book, &mut state.rng);
    let stop = &ctx.stop;
    let name = rec.name;
    let who = rec.who;
    let occupancy = occupancy_key(name);
    let counter = counter_key(name);
    let dead_prefix = dead_key("");
    let entered = now_ms();
    if ctx.history {
        hist(now_ns(), format_args!("{who} hold invoke {}", rec.id()));
    }
    let Some(others) = book.retry(stop, |con| {
        ENTER
            .key(&occupancy)
            .arg(token)
            .arg(&dead_prefix)
            .invoke::<Vec<String>>(con)
    }) else {
        release(ctx, rec, guard);
        return;
    };
    for other in others {
        emit(format_args!("O {name} {token} {other} {entered}"));
    }
    let Some(value) = book.retry(stop, |con| con.get::<_, Option<i64>>(&counter)) else {
        release(ctx, rec, guard);
        return;
    };
    let value = value.unwrap_or(0);
    thread::sleep(Duration::from_micros(rng.below(2000)));
    // A fenced run fences the write with the token: a holder past its
    // lease whose lock someone else took since is refused.
    let mut written = true;
    if exclusive {
        let outcome = match rec.token.filter(|_| ctx.kind == LockKind::Fenced) {
            Some(fencing) => {
                let fence = format!("torture:fence:{name}");
                book.retry(stop, |con| {
                    FENCED_SET
                        .key(&counter)
                        .key(&fence)
                        .arg(value + 1)
                        .arg(fencing)
                        .invoke::<i64>(con)
                })
                .map(|n| n == 1)
            }
            None => book
                .retry(stop, |con| con.set::<_, _, ()>(&counter, value + 1))
                .map(|()| true),
        };
        let Some(outcome) = outcome else {
            release(ctx, rec, guard);
            return;
        };
        written = outcome;
        if ctx.history && rec.token.is_some() {
            let phase = if written { "ok" } else { "refused" };
            hist(now_ns(), format_args!("{who} write {phase} {}", rec.id()));
        }
    }
    if long {
        // After the increment: a holder that lost its lock meanwhile must
        // not write back a stale value (that would turn every later section
        // into a lost update); the occupancy set still shows the overlap.
        // It reports when it learns that its lock was lost (`L`), should it
        // be killed before the end of its section.
        let until = now_ms() + rng.range(LONG_HOLD_MS.0, LONG_HOLD_MS.1);
        let mut told = false;
        let mut vu = guard.valid_until();
        while now_ms() < until {
            thread::sleep(ms(20));
            if !told && guard.is_lost() {
                told = true;
                emit(format_args!("L {name} {token} {}", now_ms()));
            }
            if ctx.history && guard.valid_until() != vu {
                vu = guard.valid_until();
                hist(
                    now_ns(),
                    format_args!("{who} valid update {} vu={}", rec.id(), wall_ns(vu)),
                );
            }
        }
    }
    if rng.percent(10) {
        // Re-entry: a second hold on the same lock, released at once. In a
        // fenced run beyond the lease, half of them take a short lease
        // (30-200 ms) and keep it 0-400 ms: the hold's deadline moves
        // earlier, the key may expire before the watchdog's next renewal,
        // and the lost signal must fire by the new deadline (issue 29
        // item 1).
        let short = ctx.short_reentries && rng.percent(50);
        let mut inner_rec = Rec {
            who,
            h: format!("{}r", rec.h),
            name,
            token: None,
        };
        if ctx.history {
            hist(
                now_ns(),
                format_args!(
                    "{who} acquire invoke {} mode={} call={} reentry=1",
                    inner_rec.id(),
                    if exclusive { 'w' } else { 'r' },
                    if short { "try-short-lease" } else { "try" }
                ),
            );
        }
        let attempt = if short {
            LockGuard::lock_of(&guard)
                .with_lease(ms(rng.range(30, 200)))
                .try_lock()
        } else {
            LockGuard::lock_of(&guard).try_lock()
        };
        let at = now_ns();
        match attempt {
            Ok(Some(inner)) => {
                inner_rec.token = K::token_of(&inner);
                if ctx.history {
                    hist(
                        at,
                        format_args!(
                            "{who} acquire ok {} vu={} reentry=1",
                            inner_rec.id(),
                            wall_ns(inner.valid_until())
                        ),
                    );
                }
                if short {
                    // Up to 1.5 s under an explicit lease (nothing renews
                    // the key then), 0.4 s under the watchdog's.
                    let most = if explicit_lease { 1500 } else { 400 };
                    thread::sleep(ms(rng.range(0, most)));
                }
                release(ctx, &inner_rec, inner);
            }
            Ok(None) => {
                if ctx.history {
                    hist(at, format_args!("{who} acquire fail {}", inner_rec.id()));
                }
                emit(format_args!("E reentry:refused"));
            }
            Err(e) => {
                if ctx.history {
                    hist(
                        at,
                        format_args!(
                            "{who} acquire info {} err={}",
                            inner_rec.id(),
                            error_kind(&e)
                        ),
                    );
                }
                report_error(ctx, "reentry", &e);
            }
        }
    }
    if ctx.history {
        hist(
            now_ns(),
            format_args!(
                "{who} hold ok {} vu={} lost={}",
                rec.id(),
                wall_ns(guard.valid_until()),
                lost_field(guard.lost_reason())
            ),
        );
    }
    if book
        .retry(stop, |con| con.srem::<_, _, ()>(&occupancy, token))
        .is_none()
    {
        release(ctx, rec, guard);
        return;
    }
    let (lost, outcome) = release(ctx, rec, guard);
    // Readers report no value: only writers' values must be distinct (and
    // a write the fence refused wrote nothing).
    let value = if exclusive && written {
        value.to_string()
    } else {
        "-".to_owned()
    };
    emit(format_args!(
        "S {name} {token} {value} {lost} {outcome} {}",
        now_ms()
    ));
}
