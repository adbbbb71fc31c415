//! The worker process: `THREADS` threads taking the locks of the run's kind
//! and reporting every event on stdout (see the module docs in `main.rs`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use redis::Commands;
use redisson_lock::{
    Client, Error, Fair, Fenced, Kind, Lock, LockGuard, LostReason, LostSignal, Read, Reentrant,
    Write as WriteSide,
};

use crate::history::{now_ns, wall_ns};
use crate::semaphore;
use crate::{
    EXPLICIT_LEASE_MIN_MS, LEASE_MS, LockKind, NAMES, Rng, THREADS, arg_value, counter_key,
    dead_key, ms, now_ms, occupancy_key, waiting_key,
};

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
fn break_skip_lock() -> bool {
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
struct Rec<'a> {
    who: &'a str,
    h: String,
    name: &'a str,
    token: Option<u64>,
}

impl Rec<'_> {
    /// ` lock=<name> h=<h>[ tok=<token>]`
    fn id(&self) -> String {
        match self.token {
            Some(token) => format!("lock={} h={} tok={token}", self.name, self.h),
            None => format!("lock={} h={}", self.name, self.h),
        }
    }
}

/// A hold's lost signal, for the worker's watcher thread.
pub struct Watch {
    who: String,
    id: String,
    /// The lock and the section's occupancy token, for the `L` line.
    name: &'static str,
    token: String,
    signal: LostSignal,
}

/// Records every watched hold's lost signal when it fires (`lost signal`),
/// and forgets holds released without loss.
fn lost_watcher(watches: crossbeam_channel::Receiver<Watch>) {
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

/// In a cluster run, this many sections in 1000 (of those whose lock the
/// watchdog renews) hold the lock for `LONG_HOLD_MS` (ms) more: long enough for a coordinated
/// failover to happen under the hold, or for a master's kill and its
/// replica's promotion (about 4 s, longer than the lease: the hold is lost,
/// and must be reported lost).
const LONG_HOLD_PER_MILLE: u64 = 4;
const LONG_HOLD_MS: (u64, u64) = (300, 5000);

pub struct WorkerCtx {
    pub instance: String,
    url: String,
    kind: LockKind,
    pub client: Client,
    pub stop: AtomicBool,
    /// A cluster run: some sections last long enough to span a failover.
    long_holds: bool,
    /// Record a history (`H` lines), and this process's lost-signal
    /// watcher.
    history: bool,
    watcher: Option<crossbeam_channel::Sender<Watch>>,
    /// Reentries with a short lease (`--short-reentries`: fenced runs
    /// beyond the lease).
    short_reentries: bool,
}

/// Prints one event line; stdout is line-buffered, so each line is one write.
pub fn emit(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(line);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

struct StderrLogger(String);

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Info
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "{} {} {} {}",
                now_ms(),
                self.0,
                record.level(),
                record.args()
            );
        }
    }
    fn flush(&self) {}
}

pub fn worker_main(args: &[String]) -> ExitCode {
    let (Some(instance), Some(url)) = (arg_value(args, "--instance"), arg_value(args, "--url"))
    else {
        eprintln!(
            "usage: torture worker --instance <id> --url <redis url> [--kind <kind>] [--cluster-seeds <url>,<url>,..]"
        );
        return ExitCode::from(2);
    };
    let Some(kind) = LockKind::from_args(args) else {
        eprintln!("torture worker: unknown --kind");
        return ExitCode::from(2);
    };
    let instance = instance.to_owned();
    {
        let instance = instance.clone();
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.to_string().replace('\n', " ");
            emit(format_args!("P {instance} {message}"));
            default_hook(info);
        }));
    }
    let _ = log::set_boxed_logger(Box::new(StderrLogger(instance.clone())));
    log::set_max_level(log::LevelFilter::Info);

    // In a cluster run the locks live in the cluster (`url` is then the
    // bookkeeping server only).
    let seeds = arg_value(args, "--cluster-seeds");
    // The server may be paused or stopped right now: keep trying.
    let client = loop {
        let builder = match seeds {
            Some(seeds) => Client::cluster_builder(seeds.split(',')),
            None => Client::builder(url),
        };
        // `scripts/torture.sh --multiplexed N`.
        let builder = match std::env::var("REDISSON_LOCK_TEST_MULTIPLEXED")
            .ok()
            .and_then(|n| n.parse().ok())
        {
            Some(n) => builder.multiplexed(n),
            None => builder,
        };
        match builder
            .watchdog_timeout(ms(LEASE_MS))
            .connect_timeout(ms(1000))
            .response_timeout(ms(1000))
            .subscription_timeout(ms(2000))
            .unlock_retries(3, ms(200))
            .build()
        {
            Ok(client) => break client,
            Err(e) => {
                eprintln!("{} {instance} client: {e}", now_ms());
                thread::sleep(ms(100));
            }
        }
    };
    emit(format_args!("I {instance} {}", client.id()));
    let history = args.iter().any(|a| a == "--history");
    let watcher = history.then(|| {
        let (sender, receiver) = crossbeam_channel::unbounded();
        thread::Builder::new()
            .name("lost-watcher".to_owned())
            .spawn(move || lost_watcher(receiver))
            .expect("spawn the lost watcher");
        sender
    });
    let ctx = Arc::new(WorkerCtx {
        instance,
        url: url.to_owned(),
        kind,
        client,
        stop: AtomicBool::new(false),
        long_holds: seeds.is_some(),
        history,
        watcher,
        short_reentries: args.iter().any(|a| a == "--short-reentries"),
    });
    {
        // The supervisor closes our stdin to say "finish up" (or by dying).
        let ctx = Arc::clone(&ctx);
        thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            ctx.stop.store(true, Ordering::Release);
        });
    }
    let threads: Vec<JoinHandle<()>> = (0..THREADS)
        .map(|index| {
            let ctx = Arc::clone(&ctx);
            thread::Builder::new()
                .name(format!("torture-{index}"))
                .spawn(move || worker_thread(&ctx, index))
                .expect("spawn a worker thread")
        })
        .collect();
    let mut failed = false;
    for handle in threads {
        failed |= handle.join().is_err();
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A plain connection for the bookkeeping around critical sections, with a
/// read timeout longer than any chaos pause, reconnecting after kills.
pub struct Book {
    client: redis::Client,
    con: Option<redis::Connection>,
}

impl Book {
    pub fn new(url: &str) -> Book {
        Book {
            client: redis::Client::open(url).expect("a valid url"),
            con: None,
        }
    }

    /// Runs `op` until it succeeds; `None` only when the worker is stopping
    /// and Redis keeps failing.
    pub fn retry<T>(
        &mut self,
        stop: &AtomicBool,
        mut op: impl FnMut(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        let mut failures = 0u32;
        loop {
            let result = match self.con.as_mut() {
                Some(con) => op(con),
                None => match self.client.get_connection_with_timeout(ms(2000)) {
                    Ok(con) => {
                        let _ = con.set_read_timeout(Some(Duration::from_secs(30)));
                        let _ = con.set_write_timeout(Some(Duration::from_secs(30)));
                        self.con = Some(con);
                        continue;
                    }
                    Err(e) => Err(e),
                },
            };
            match result {
                Ok(value) => return Some(value),
                Err(_) => {
                    self.con = None;
                    failures += 1;
                    if stop.load(Ordering::Acquire) && failures >= 20 {
                        return None;
                    }
                    thread::sleep(ms(u64::from(failures.min(10)) * 20));
                }
            }
        }
    }
}

fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::NotHeld { .. } => "not_held",
        Error::Lost { .. } => "lost",
        Error::Unavailable { .. } => "unavailable",
        Error::Timeout { .. } => "timeout",
        Error::Redis(e) if e.is_timeout() => "redis_timeout",
        Error::Redis(e) if e.is_io_error() || e.is_connection_dropped() => "redis_io",
        Error::Redis(_) => "redis_other",
        Error::UnexpectedReply(_) => "unexpected_reply",
        Error::InvalidArgument(_) => "invalid_argument",
        Error::OutcomeUnknown { .. } => "outcome_unknown",
        Error::NotReplicated { .. } => "not_replicated",
        _ => "other",
    }
}

pub fn report_error(ctx: &WorkerCtx, what: &str, e: &Error) {
    let kind = error_kind(e);
    emit(format_args!("E {what}:{kind}"));
    eprintln!("{} {} {what}: {e}", now_ms(), ctx.instance);
}

/// One thread's state across its iterations.
pub struct ThreadState {
    pub index: usize,
    pub rng: Rng,
    pub book: Book,
    pub seq: u64,
    /// Acquisition attempts (the history's `h`).
    attempts: u64,
    /// A fair lock whose `lock()` failed: this thread's queue entry is still
    /// there (Redisson's `lock()` never leaves the queue), so it comes back
    /// to the same lock, as a caller that retries would, rather than leave
    /// an entry that holds up everyone behind it until it ages out.
    retry: Option<&'static str>,
}

fn worker_thread(ctx: &WorkerCtx, index: usize) {
    let mut state = ThreadState {
        index,
        rng: Rng::seeded(index as u64 + 1),
        book: Book::new(&ctx.url),
        seq: 0,
        attempts: 0,
        retry: None,
    };
    while !ctx.stop.load(Ordering::Acquire) {
        let name = match state.retry.take() {
            Some(name) => name,
            None => NAMES[state.rng.below(NAMES.len() as u64) as usize],
        };
        match ctx.kind {
            LockKind::Reentrant => once(ctx, &mut state, &ctx.client.lock(name), name, 'w'),
            LockKind::Fair => once(ctx, &mut state, &ctx.client.fair_lock(name), name, 'w'),
            LockKind::Fenced => once(ctx, &mut state, &ctx.client.fenced_lock(name), name, 'w'),
            LockKind::Rw => {
                let rw = ctx.client.read_write_lock(name);
                if state.rng.percent(20) {
                    once(ctx, &mut state, &rw.write_lock(), name, 'w');
                } else {
                    once(ctx, &mut state, &rw.read_lock(), name, 'r');
                }
            }
            LockKind::Semaphore => {
                semaphore::park_if_census(ctx, &mut state);
                semaphore::once(ctx, &mut state, name, false);
            }
        }
    }
    if ctx.kind == LockKind::Semaphore {
        // Nothing stuck after the chaos: one more acquire and release.
        semaphore::final_round(ctx, &mut state);
    }
}

/// One acquisition attempt and, when it succeeds, one critical section.
fn once<K: Fencing>(
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

/// `TORTURE_BREAK=skip-lock`: records an acquisition that did not happen
/// (the lock's last token, valid for a lease from now), a short section and
/// its release, and touches nothing else (no occupancy set, no counter).
fn fake_section<K: Fencing>(
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
fn critical_section<K: Fencing>(
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
