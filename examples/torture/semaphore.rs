//! `--kind semaphore`: the 3 names are semaphores of `PERMITS` permits
//! (Redisson's `RSemaphore`), hammered by the workers' threads, with a
//! ledger of every permit in the bookkeeping keys (see *Semaphore runs* in
//! `main.rs`).
//!
//! A permit's life in the ledger (sets on the bookkeeping server, per name):
//! `pending` while its acquire is in flight, `held` once the acquire said
//! yes, `releasing` while its release is in flight, then gone. An acquire or
//! release whose reply was lost (`Error::OutcomeUnknown`, never resent) moves
//! the token to `ambiguous` with what it was (`acq` or `rel`): it did or did
//! not change the count, nobody can tell. The supervisor does the same with
//! the `pending` and `releasing` tokens of a worker it killed, and releases
//! the `held` ones itself (a SIGKILLed holder's permits are leaked, Redisson's
//! permits having no owner and no lease).
//!
//! This module is the workers' side; `sem_supervisor.rs` the supervisor's.

use std::sync::LazyLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::Commands;
use redisson_lock::{Error, Semaphore};

use crate::worker::{Book, ThreadState, WorkerCtx, emit, report_error};
use crate::{NAMES, dead_key, ms, now_ms, occupancy_key};

/// The permits of each semaphore.
pub const PERMITS: u64 = 2;
/// After the chaos, every worker thread must complete one `acquire(1)` and
/// release within this long (measured by the thread; one that never
/// returns is missing from the final rounds).
pub const FINAL_ROUND_MS: u64 = 15_000;

/// Set while the supervisor takes a census; its value names the set of
/// parked threads (`parked_key`).
pub const BARRIER_KEY: &str = "torture:sem:barrier";
/// A census waits this long for every thread to park.
pub const CENSUS_WAIT_MS: u64 = 8000;

pub fn parked_key(id: &str) -> String {
    format!("torture:sem:parked:{id}")
}

pub fn ledger_key(set: &str, name: &str) -> String {
    format!("torture:sem:{set}:{name}")
}

/// Moves `ARGV[1]` from the set `KEYS[1]` to the set `KEYS[2]` as `ARGV[2]`
/// (idempotent: a retry after a lost reply finds it moved).
pub static MOVE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('srem', KEYS[1], ARGV[1]) == 1 then
  redis.call('sadd', KEYS[2], ARGV[2])
end
return 0
",
    )
});

/// Enters the occupancy set and returns the live holders in it (itself
/// included) when they are more than `ARGV[3]`, dropping tokens of processes
/// the supervisor has confirmed dead (their permits are still taken until
/// the supervisor returns them, after that).
static ENTER: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
redis.call('sadd', KEYS[1], ARGV[1])
local live = {}
for _, member in ipairs(redis.call('smembers', KEYS[1])) do
  local instance = string.match(member, '^([^/]+)/')
  if instance and redis.call('exists', ARGV[2] .. instance) == 1 then
    redis.call('srem', KEYS[1], member)
  else
    table.insert(live, member)
  end
end
if #live > tonumber(ARGV[3]) then
  return live
end
return {}
",
    )
});

fn move_token(book: &mut Book, ctx: &WorkerCtx, from: &str, to: &str, token: &str, as_: &str) {
    book.retry(&ctx.stop, |con| {
        MOVE.key(from)
            .key(to)
            .arg(token)
            .arg(as_)
            .invoke::<i64>(con)
    });
}

/// One iteration of a worker thread: acquire one permit
/// (`try_acquire_for(1, 0.1-3 s)` 9 times in 10, `try_acquire(1)` once), a
/// section, release. `final_round`: the one `acquire(1)` after the chaos,
/// reported as `F <name> <token> <ms waited> <ok|error>` (the supervisor
/// wants it done within `FINAL_ROUND_MS`).
pub fn once(ctx: &WorkerCtx, state: &mut ThreadState, name: &'static str, final_round: bool) {
    let sem = ctx.client.semaphore(name);
    let (pending, held) = (ledger_key("pending", name), ledger_key("held", name));
    let ambiguous = ledger_key("ambiguous", name);
    state.seq += 1;
    let token = format!("{}/{}/{}", ctx.instance, state.index, state.seq);
    let stop = &ctx.stop;
    if state
        .book
        .retry(stop, |con| con.sadd::<_, _, ()>(&pending, &token))
        .is_none()
    {
        return;
    }
    let mode = state.rng.below(10);
    let started = now_ms();
    // Waits are bounded during the chaos, so that every thread reaches a
    // census (permits an ambiguous acquire took would otherwise leave
    // `acquire()` waiting for good); the final round waits without one.
    let attempt = if final_round {
        sem.acquire(1).map(Some)
    } else if mode == 0 {
        sem.try_acquire(1)
    } else {
        sem.try_acquire_for(1, ms(state.rng.range(100, 3000)))
    };
    let ended = now_ms();
    let permits = match attempt {
        Ok(Some(permits)) => permits,
        Ok(None) => {
            state
                .book
                .retry(stop, |con| con.srem::<_, _, ()>(&pending, &token));
            if final_round {
                emit(format_args!("F {name} {token} {} timeout", ended - started));
            } else if mode == 0 {
                std::thread::sleep(ms(state.rng.range(1, 5)));
            }
            return;
        }
        Err(e) => {
            if matches!(e, Error::OutcomeUnknown { .. }) {
                let entry = format!("acq {token}");
                move_token(&mut state.book, ctx, &pending, &ambiguous, &token, &entry);
                emit(format_args!("U acquire {name} {token}"));
            } else {
                state
                    .book
                    .retry(stop, |con| con.srem::<_, _, ()>(&pending, &token));
            }
            report_error(ctx, "acquire", &e);
            if final_round {
                emit(format_args!("F {name} {token} {} error", ended - started));
            }
            std::thread::sleep(ms(state.rng.range(5, 50)));
            return;
        }
    };
    move_token(&mut state.book, ctx, &pending, &held, &token, &token);
    emit(format_args!("A {name} {token} {ended}"));
    section(ctx, state, name, &token);
    let released = release(ctx, &mut state.book, &sem, permits, &token);
    emit(format_args!(
        "S {name} {token} - false {released} {}",
        now_ms()
    ));
    if final_round {
        emit(format_args!("F {name} {token} {} ok", ended - started));
    }
}

/// The section: enter the occupancy set (more than `PERMITS` live holders
/// is reported as `X <name> <token> <holders> <ms>`), a short sleep, leave.
fn section(ctx: &WorkerCtx, state: &mut ThreadState, name: &str, token: &str) {
    let occupancy = occupancy_key(name);
    let dead_prefix = dead_key("");
    let entered = now_ms();
    let Some(live) = state.book.retry(&ctx.stop, |con| {
        ENTER
            .key(&occupancy)
            .arg(token)
            .arg(&dead_prefix)
            .arg(PERMITS)
            .invoke::<Vec<String>>(con)
    }) else {
        return;
    };
    if !live.is_empty() {
        emit(format_args!(
            "X {name} {token} {} {entered}",
            live.join(",")
        ));
    }
    std::thread::sleep(Duration::from_micros(state.rng.range(200, 3000)));
    state
        .book
        .retry(&ctx.stop, |con| con.srem::<_, _, ()>(&occupancy, token));
}

/// Parks the thread while the supervisor takes a census (`census`): it
/// holds nothing and has nothing in flight here.
pub fn park_if_census(ctx: &WorkerCtx, state: &mut ThreadState) {
    let stop = &ctx.stop;
    let Some(Some(id)) = state
        .book
        .retry(stop, |con| con.get::<_, Option<String>>(BARRIER_KEY))
    else {
        return;
    };
    let me = format!("{}/{}", ctx.instance, state.index);
    state
        .book
        .retry(stop, |con| con.sadd::<_, _, ()>(parked_key(&id), &me));
    while let Some(Some(_)) = state
        .book
        .retry(stop, |con| con.get::<_, Option<String>>(BARRIER_KEY))
    {
        std::thread::sleep(ms(10));
    }
}

/// Returns the permit: `held` -> `releasing` -> gone, or `ambiguous` when
/// the release's reply was lost. A release that failed for sure (never
/// applied) is tried again (with `Semaphore::release`, the guard being
/// spent), for up to 10 s; if it still fails, the token goes back to `held`
/// (the supervisor counts it at the end). Returns the outcome reported.
fn release(
    ctx: &WorkerCtx,
    book: &mut Book,
    sem: &Semaphore,
    permits: redisson_lock::SemaphorePermits,
    token: &str,
) -> &'static str {
    let name = sem.name();
    let (held, releasing) = (ledger_key("held", name), ledger_key("releasing", name));
    let ambiguous = ledger_key("ambiguous", name);
    move_token(book, ctx, &held, &releasing, token, token);
    let mut result = permits.release();
    let give_up = now_ms() + 10_000;
    loop {
        match result {
            Ok(()) => {
                book.retry(&ctx.stop, |con| con.srem::<_, _, ()>(&releasing, token));
                return "ok";
            }
            Err(e @ Error::OutcomeUnknown { .. }) => {
                report_error(ctx, "release", &e);
                let entry = format!("rel {token}");
                move_token(book, ctx, &releasing, &ambiguous, token, &entry);
                emit(format_args!("U release {name} {token}"));
                return "unknown";
            }
            Err(e) => {
                report_error(ctx, "release", &e);
                if now_ms() > give_up {
                    move_token(book, ctx, &releasing, &held, token, token);
                    return "error";
                }
                std::thread::sleep(ms(100));
                result = sem.release(1);
            }
        }
    }
}

/// The final round of a worker thread, once asked to stop: one `acquire(1)`
/// and release of a random semaphore, within `FINAL_ROUND_MS`.
pub fn final_round(ctx: &WorkerCtx, state: &mut ThreadState) {
    debug_assert!(ctx.stop.load(Ordering::Acquire));
    let name = NAMES[state.rng.below(NAMES.len() as u64) as usize];
    once(ctx, state, name, true);
}
