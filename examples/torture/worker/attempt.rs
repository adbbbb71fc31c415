//! One iteration of a worker thread's loop (`once`): the lease and the
//! call it tries (`try_lock`, `try_lock_for`, `lock`), a fair lock's
//! waiting set (`WAIT_ENTER`) around a waiting call, the acquisition and
//! its report (`A`, `W`, `C`, history lines), then the critical section
//! (`section.rs`).

use std::sync::LazyLock;
use std::thread;

use redis::Commands;
use redisson_lock::{Error, Lock};

use super::record::{Fencing, Rec, Watch, break_skip_lock, fake_section, hist};
use super::section::{LONG_HOLD_PER_MILLE, critical_section};
use super::{ThreadState, WorkerCtx, emit, error_kind, report_error};
use crate::history::{now_ns, wall_ns};
use crate::{EXPLICIT_LEASE_MIN_MS, LEASE_MS, LockKind, dead_key, ms, now_ms, waiting_key};

/// Joins the set of threads waiting on a fair lock and returns how many
/// others are in it (dropping members of dead processes): the caller's
/// position at arrival, counted by the workers themselves.
static WAIT_ENTER: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
redis.call('sadd', KEYS[1], ARGV[1])
local ahead = 0
for _, member in ipairs(redis.call('smembers', KEYS[1])) do
  if member ~= ARGV[1] then
    local instance = string.match(member, '^([^/]+)/')
    if instance and redis.call('exists', ARGV[2] .. instance) == 1 then
      redis.call('srem', KEYS[1], member)
    else
      ahead = ahead + 1
    end
  end
end
return ahead
",
    )
});

/// One acquisition attempt and, when it succeeds, one critical section.
pub(super) fn once<K: Fencing>(
    ctx: &WorkerCtx,
    state: &mut ThreadState,
    lock: &Lock<K>,
    name: &'static str,
    role: char,
) {
    let rng = &mut state.rng;
    let explicit_lease = rng.percent(10);
    let lock = if explicit_lease {
        lock.with_lease(ms(rng.range(EXPLICIT_LEASE_MIN_MS, LEASE_MS)))
    } else {
        lock.clone()
    };
    let mode = rng.below(10);
    // Fair locks: waiting acquisitions register in the waiting set first.
    let waiter = format!("{}/{}", ctx.instance, state.index);
    let waiting = waiting_key(name);
    let fair_wait = ctx.kind == LockKind::Fair && mode != 0;
    let ahead = if fair_wait {
        let Some(ahead) = state.book.retry(&ctx.stop, |con| {
            WAIT_ENTER
                .key(&waiting)
                .arg(&waiter)
                .arg(dead_key(""))
                .invoke::<u64>(con)
        }) else {
            return;
        };
        ahead
    } else {
        0
    };
    state.attempts += 1;
    let who = waiter.as_str();
    let mut rec = Rec {
        who,
        h: state.attempts.to_string(),
        name,
        token: None,
    };
    if ctx.history {
        let call = match (mode, explicit_lease) {
            (0, _) => "try",
            (1 | 2, _) => "tryfor",
            (_, true) => "lease",
            (_, false) => "lock",
        };
        hist(
            now_ns(),
            format_args!("{who} acquire invoke {} mode={role} call={call}", rec.id()),
        );
    }
    let started = now_ms();
    let attempt = if ctx.history && break_skip_lock() && state.rng.percent(5) {
        // The deliberately broken worker: no lock at all, but a made-up
        // acquisition that looks like a good one.
        Err(Error::InvalidArgument("skip-lock".to_owned()))
    } else {
        let rng = &mut state.rng;
        match mode {
            0 => lock.try_lock(),
            1 | 2 => lock.try_lock_for(ms(rng.range(100, 3000))),
            _ => lock.lock().map(Some),
        }
    };
    let ended = now_ms();
    let ended_ns = now_ns();
    if fair_wait {
        state
            .book
            .retry(&ctx.stop, |con| con.srem::<_, _, ()>(&waiting, &waiter));
    }
    let guard = match attempt {
        Ok(Some(guard)) => guard,
        Ok(None) => {
            if ctx.history {
                hist(ended_ns, format_args!("{who} acquire fail {}", rec.id()));
            }
            if mode == 0 {
                thread::sleep(ms(state.rng.range(1, 5)));
            }
            return;
        }
        Err(Error::InvalidArgument(what)) if what == "skip-lock" => {
            fake_section(ctx, state, &lock, &mut rec, role == 'w');
            return;
        }
        Err(e) => {
            if ctx.history {
                hist(
                    ended_ns,
                    format_args!("{who} acquire info {} err={}", rec.id(), error_kind(&e)),
                );
            }
            report_error(ctx, "acquire", &e);
            if ctx.kind == LockKind::Fair && mode >= 3 {
                state.retry = Some(name);
            }
            thread::sleep(ms(state.rng.range(5, 50)));
            return;
        }
    };
    rec.token = K::token_of(&guard);
    if ctx.history {
        hist(
            ended_ns,
            format_args!(
                "{who} acquire ok {} vu={}",
                rec.id(),
                wall_ns(guard.valid_until())
            ),
        );
    }
    state.seq += 1;
    let token = format!("{}/{}/{}/{role}", ctx.instance, state.index, state.seq);
    if let Some(watcher) = &ctx.watcher {
        let _ = watcher.send(Watch {
            who: who.to_owned(),
            id: rec.id(),
            name,
            token: token.clone(),
            signal: guard.lost_signal(),
        });
    }
    match rec.token {
        // The fencing token orders the holders of an overlap (below).
        Some(fencing) => emit(format_args!("A {name} {token} {ended} {fencing}")),
        None => emit(format_args!("A {name} {token} {ended}")),
    }
    if fair_wait && mode >= 3 {
        emit(format_args!("W {name} {token} {started} {ended} {ahead}"));
    }
    if state.rng.percent(20) {
        // A first hold counts 1. More means a count no guard owns (the
        // phantom left by an acquire whose reply was lost).
        match lock.hold_count() {
            Ok(count) if count > 1 => emit(format_args!("C {name} {token} {count}")),
            Ok(_) => {}
            Err(e) => report_error(ctx, "hold_count", &e),
        }
    }
    // Only a hold the watchdog renews may outlast the lease.
    let long = ctx.long_holds && !explicit_lease && state.rng.below(1000) < LONG_HOLD_PER_MILLE;
    critical_section(
        ctx,
        state,
        guard,
        (&rec, &token),
        role == 'w',
        (long, explicit_lease),
    );
}
