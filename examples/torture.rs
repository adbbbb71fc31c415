//! Torture test: many processes and threads fight over a few locks while a
//! chaos thread kills processes, kills connections and freezes Redis.
//!
//! Run it with `./scripts/torture.sh --quick` (about a minute) or
//! `./scripts/torture.sh --minutes 10`, each optionally with `--beyond-lease`;
//! the script starts a throwaway redis-server and passes `--url` and
//! `--redis-pid`.
//!
//! # Design
//!
//! The supervisor (this program without `worker`) spawns 3 worker processes
//! (this program with `worker`), each running 8 threads that loop over: take
//! one of 3 locks (mostly `lock()`, sometimes `try_lock_for`/`try_lock`,
//! sometimes with an explicit lease, sometimes re-entering), run a critical
//! section, unlock. Locks use a 1.5 s watchdog timeout so that chaos matters.
//!
//! A critical section is a non-atomic read-modify-write of a counter
//! (`GET`, tiny sleep, `SET v+1`), bracketed by an occupancy set: on entry a
//! script adds the holder's token to `torture:occ:<lock>` and returns who else
//! is in it (an *overlap* when anyone is), on exit the token is removed. A set
//! rather than a counter makes retries after a killed connection idempotent
//! and names both parties of an overlap. Tokens are `<instance>/<thread>/<seq>`
//! where the instance (`w<slot>g<generation>`) names one worker process.
//!
//! Workers report to the supervisor on stdout, one line per event:
//! `I <instance> <client id>`, `A <lock> <token> <ms>` (acquired),
//! `C <lock> <token> <count>` (a first hold counted more than 1),
//! `O <lock> <token> <other token> <ms>` (overlap seen on entry, with the time
//! just before the entry script was sent), `S <lock> <token> <value read>
//! <is_lost> <unlock outcome>` (section done), `E <what>` (an error),
//! `P <message>` (a panic). Times are wall-clock ms (one machine).
//!
//! The chaos thread, at random intervals, one action at a time:
//! SIGKILLs a worker and starts a new one, `CLIENT KILL TYPE normal` or
//! `TYPE pubsub` (never its own connection), `CLIENT PAUSE <ms> ALL`, or
//! SIGSTOPs redis-server. Pauses and stops last at most a third of the lease:
//! a holder renewed every third of the lease keeps two thirds in hand, and an
//! explicit lease is at least two thirds of the watchdog's. After a kill it
//! reads the lock hashes to see which locks the dead process held (by its
//! client id) and records the time; it then marks the instance dead in Redis,
//! which lets the entry script drop the dead process's stale occupancy tokens
//! (a dead holder cannot overlap anyone).
//!
//! With `--beyond-lease`, a third of the pauses and stops last longer than the
//! lease: Redis expires the holders' keys while they are in their sections,
//! the failover/GC-pause hazard that no lease-based lock can prevent (only a
//! fencing token checked by the resource can). What a lock owes its holder
//! then is to tell it: the earlier holder of every such overlap must have been
//! told (its guard lost by the end of its section). `is_lost()` goes by the
//! local clock from when the last renewal was sent, so it turns true no later
//! than Redis expires the key.
//!
//! # Summary columns
//!
//! Failures (the run exits non-zero if any is non-zero):
//! - `overlaps`: two live holders were in a section at the same time. (With
//!   `--beyond-lease`, overlaps are expected and only the next column is a
//!   failure.)
//! - `overlaps_without_lost_signal`: two live holders were in a section at the
//!   same time and the earlier one was *not* told: its guard's `is_lost()` was
//!   false at exit and its unlock returned `Ok` (or it never reported back).
//! - `slow_waits`: after a holder was SIGKILLed, nobody got its lock within
//!   lease + 1 s (not counting time Redis was paused or stopped meanwhile).
//! - `panics`: panic hook reports plus worker exits the supervisor did not cause.
//! - `stalls`: a lock nobody acquired for 10 s (pauses not counted).
//! - `undetected_overlaps`: two sections read the same counter value (a lost
//!   update) without either seeing the other in the occupancy set.
//! - `phantom_counts`: a first hold whose `hold_count()` was above 1: a count
//!   no guard owns, which keeps the lock held after the last unlock.
//! - `hangs`: workers that did not stop within 30 s when asked to.
//! - `leftover_locks`: lock keys still present a lease after every worker stopped.
//!
//! Information, honestly classified:
//! - `mode`: `within-lease` (the default) or `beyond-lease`.
//! - `overlaps_after_long_pause`: overlaps that followed a pause or stop longer
//!   than the lease by less than 5 s (only possible with `--beyond-lease`).
//! - `dead_holder_overlaps`: the earlier "holder" was a process already dead
//!   when the later one entered (stale occupancy, not an overlap).
//! - `lost_signals`: sections whose guard was lost or whose unlock said so.
//! - `errors`: failed lock operations (expected under chaos; see the worker logs).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Commands;
use redisson_lock::{Client, Error, LockGuard};

const NAMES: [&str; 3] = ["torture-a", "{torture}-b", "torture:c"];
const WORKERS: usize = 3;
const THREADS: usize = 8;
/// The watchdog timeout, and the longest explicit lease a section uses.
const LEASE_MS: u64 = 1500;
/// The shortest explicit lease a section uses: a section (a few ms) plus the
/// longest short pause fits in it.
const EXPLICIT_LEASE_MIN_MS: u64 = LEASE_MS * 2 / 3;
/// Pauses and stops within the lease last at most this long: the watchdog
/// renews every third of the lease, so a holder always has two thirds of it in
/// hand, and this leaves a third for the renewal to get through afterwards.
const SHORT_PAUSE_MAX_MS: u64 = LEASE_MS / 3;
/// A waiter may take this long beyond the lease to notice a dead holder's lock expired.
const SLOW_WAIT_MARGIN_MS: u64 = 1000;
const STALL_MS: u64 = 10_000;
const STOP_WAIT: Duration = Duration::from_secs(30);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// xorshift64*, seeded from the clock: chaos needs no cryptography.
struct Rng(u64);

impl Rng {
    fn seeded(salt: u64) -> Rng {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ salt.wrapping_mul(0x9e37_79b9);
        // splitmix64 finalizer, so that close seeds diverge at once.
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("worker") => worker_main(&args[1..]),
        Some("free-port") => {
            // For scripts/torture.sh: a free loopback port for redis-server.
            loop {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                let port = listener.local_addr().expect("addr").port();
                if port != 6379 {
                    println!("{port}");
                    return ExitCode::SUCCESS;
                }
            }
        }
        _ => supervisor_main(&args),
    }
}

fn arg_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn counter_key(name: &str) -> String {
    format!("torture:counter:{name}")
}

fn occupancy_key(name: &str) -> String {
    format!("torture:occ:{name}")
}

fn dead_key(instance: &str) -> String {
    format!("torture:dead:{instance}")
}

fn instance_of(token: &str) -> &str {
    token.split('/').next().unwrap_or(token)
}

// ---------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------

/// Enters the occupancy set and returns who else is in it, dropping tokens of
/// processes the supervisor has confirmed dead.
static ENTER: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
redis.call('sadd', KEYS[1], ARGV[1])
local others = {}
for _, member in ipairs(redis.call('smembers', KEYS[1])) do
  if member ~= ARGV[1] then
    local instance = string.match(member, '^([^/]+)/')
    if instance and redis.call('exists', ARGV[2] .. instance) == 1 then
      redis.call('srem', KEYS[1], member)
    else
      table.insert(others, member)
    end
  end
end
return others
",
    )
});

struct WorkerCtx {
    instance: String,
    url: String,
    client: Client,
    stop: AtomicBool,
}

/// Prints one event line; stdout is line-buffered, so each line is one write.
fn emit(line: std::fmt::Arguments<'_>) {
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

fn worker_main(args: &[String]) -> ExitCode {
    let (Some(instance), Some(url)) = (arg_value(args, "--instance"), arg_value(args, "--url"))
    else {
        eprintln!("usage: torture worker --instance <id> --url <redis url>");
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

    // The server may be paused or stopped right now: keep trying.
    let client = loop {
        match Client::builder(url)
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
    let ctx = Arc::new(WorkerCtx {
        instance,
        url: url.to_owned(),
        client,
        stop: AtomicBool::new(false),
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
struct Book {
    client: redis::Client,
    con: Option<redis::Connection>,
}

impl Book {
    fn new(url: &str) -> Book {
        Book {
            client: redis::Client::open(url).expect("a valid url"),
            con: None,
        }
    }

    /// Runs `op` until it succeeds; `None` only when the worker is stopping
    /// and Redis keeps failing.
    fn retry<T>(
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
        _ => "other",
    }
}

fn report_error(ctx: &WorkerCtx, what: &str, e: &Error) {
    let kind = error_kind(e);
    emit(format_args!("E {what}:{kind}"));
    eprintln!("{} {} {what}: {e}", now_ms(), ctx.instance);
}

fn worker_thread(ctx: &WorkerCtx, index: usize) {
    let mut rng = Rng::seeded(index as u64 + 1);
    let mut book = Book::new(&ctx.url);
    let mut seq = 0u64;
    while !ctx.stop.load(Ordering::Acquire) {
        let name = NAMES[rng.below(NAMES.len() as u64) as usize];
        let mut lock = ctx.client.lock(name);
        if rng.percent(10) {
            lock = lock.with_lease(ms(rng.range(EXPLICIT_LEASE_MIN_MS, LEASE_MS)));
        }
        let mode = rng.below(10);
        let attempt = match mode {
            0 => lock.try_lock(),
            1 | 2 => lock.try_lock_for(ms(rng.range(100, 3000))),
            _ => lock.lock().map(Some),
        };
        let guard = match attempt {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                if mode == 0 {
                    thread::sleep(ms(rng.range(1, 5)));
                }
                continue;
            }
            Err(e) => {
                report_error(ctx, "acquire", &e);
                thread::sleep(ms(rng.range(5, 50)));
                continue;
            }
        };
        seq += 1;
        let token = format!("{}/{index}/{seq}", ctx.instance);
        emit(format_args!("A {name} {token} {}", now_ms()));
        if rng.percent(20) {
            // A first hold counts 1. More means a count no guard owns (the
            // phantom left by an acquire whose reply was lost).
            match lock.hold_count() {
                Ok(count) if count > 1 => emit(format_args!("C {name} {token} {count}")),
                Ok(_) => {}
                Err(e) => report_error(ctx, "hold_count", &e),
            }
        }
        critical_section(ctx, &mut book, &mut rng, guard, name, &token);
    }
}

fn critical_section(
    ctx: &WorkerCtx,
    book: &mut Book,
    rng: &mut Rng,
    guard: LockGuard,
    name: &str,
    token: &str,
) {
    let stop = &ctx.stop;
    let occupancy = occupancy_key(name);
    let counter = counter_key(name);
    let dead_prefix = dead_key("");
    let entered = now_ms();
    let Some(others) = book.retry(stop, |con| {
        ENTER
            .key(&occupancy)
            .arg(token)
            .arg(&dead_prefix)
            .invoke::<Vec<String>>(con)
    }) else {
        return;
    };
    for other in others {
        emit(format_args!("O {name} {token} {other} {entered}"));
    }
    let Some(value) = book.retry(stop, |con| con.get::<_, Option<i64>>(&counter)) else {
        return;
    };
    let value = value.unwrap_or(0);
    thread::sleep(Duration::from_micros(rng.below(2000)));
    if book
        .retry(stop, |con| con.set::<_, _, ()>(&counter, value + 1))
        .is_none()
    {
        return;
    }
    if rng.percent(10) {
        // Re-entry: a second hold on the same lock, released at once.
        match guard.lock().try_lock() {
            Ok(Some(inner)) => {
                if let Err(e) = inner.unlock() {
                    report_error(ctx, "reentrant_unlock", &e);
                }
            }
            Ok(None) => emit(format_args!("E reentry:refused")),
            Err(e) => report_error(ctx, "reentry", &e),
        }
    }
    if book
        .retry(stop, |con| con.srem::<_, _, ()>(&occupancy, token))
        .is_none()
    {
        return;
    }
    let lost = guard.is_lost();
    let outcome = match guard.unlock() {
        Ok(()) => "ok",
        Err(Error::Lost { .. }) => "lost",
        Err(Error::NotHeld { .. }) => "not_held",
        Err(e) => {
            report_error(ctx, "unlock", &e);
            "error"
        }
    };
    emit(format_args!("S {name} {token} {value} {lost} {outcome}"));
}

// ---------------------------------------------------------------------------
// Supervisor
// ---------------------------------------------------------------------------

#[derive(Default)]
struct TokenInfo {
    acquired_ms: u64,
    /// `Some(lost signal)` once the section reported back.
    done: Option<bool>,
}

/// A (later, earlier) pair of tokens seen together in an occupancy set.
struct OverlapReport {
    name: String,
    later: String,
    earlier: String,
    entered_ms: u64,
}

#[derive(Default)]
struct Stats {
    client_ids: HashMap<String, String>,
    tokens: HashMap<String, TokenInfo>,
    acquires: HashMap<String, Vec<u64>>,
    sections: u64,
    lost_signals: u64,
    overlap_reports: Vec<OverlapReport>,
    /// (lock, value read) -> first token that read it.
    values: HashMap<(String, i64), String>,
    duplicate_values: Vec<(String, String, String)>,
    errors: BTreeMap<String, u64>,
    /// First holds whose count was above 1.
    phantom_counts: Vec<String>,
    panic_lines: Vec<String>,
    panicked_instances: HashSet<String>,
    garbled: u64,
}

impl Stats {
    fn record(&mut self, instance: &str, line: &str) {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["I", instance, client_id] => {
                self.client_ids
                    .insert((*instance).to_owned(), (*client_id).to_owned());
            }
            ["A", name, token, at] => {
                let Ok(at) = at.parse() else {
                    self.garbled += 1;
                    return;
                };
                self.tokens
                    .entry((*token).to_owned())
                    .or_default()
                    .acquired_ms = at;
                self.acquires
                    .entry((*name).to_owned())
                    .or_default()
                    .push(at);
            }
            ["O", name, later, earlier, at] => {
                self.overlap_reports.push(OverlapReport {
                    name: (*name).to_owned(),
                    later: (*later).to_owned(),
                    earlier: (*earlier).to_owned(),
                    entered_ms: at.parse().unwrap_or(0),
                });
            }
            ["S", name, token, value, lost, outcome] => {
                self.sections += 1;
                let signalled = *lost == "true" || matches!(*outcome, "lost" | "not_held");
                self.lost_signals += u64::from(signalled);
                self.tokens.entry((*token).to_owned()).or_default().done = Some(signalled);
                if let Ok(value) = value.parse::<i64>() {
                    let key = ((*name).to_owned(), value);
                    match self.values.get(&key) {
                        Some(first) => self.duplicate_values.push((
                            (*name).to_owned(),
                            first.clone(),
                            (*token).to_owned(),
                        )),
                        None => {
                            self.values.insert(key, (*token).to_owned());
                        }
                    }
                }
            }
            ["C", name, token, count] => {
                self.phantom_counts
                    .push(format!("{name} {token} count={count}"));
            }
            ["E", what] => *self.errors.entry((*what).to_owned()).or_default() += 1,
            ["P", ..] => {
                self.panic_lines.push(line.to_owned());
                self.panicked_instances.insert(instance.to_owned());
            }
            _ => self.garbled += 1,
        }
    }
}

type SharedStats = Arc<Mutex<Stats>>;

fn stats_of(shared: &SharedStats) -> std::sync::MutexGuard<'_, Stats> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

struct WorkerProc {
    slot: usize,
    generation: u32,
    instance: String,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<()>>,
}

struct Supervisor {
    exe: PathBuf,
    url: String,
    log_dir: PathBuf,
    stats: SharedStats,
    redis: Book,
    never: AtomicBool,
    workers: Vec<WorkerProc>,
    /// Instance -> when it was known dead (after `wait`).
    dead_at: HashMap<String, u64>,
    /// (lock, kill time): the killed process held that lock.
    killed_holds: Vec<(String, u64)>,
    /// Intervals (ms) during which Redis was paused or stopped, with whether
    /// the pause was longer than the lease.
    pauses: Vec<(u64, u64, bool)>,
    kills: u64,
    unexpected_exits: Vec<String>,
    conn_kills: u64,
    pubsub_kills: u64,
    client_pauses: u64,
    sigstops: u64,
    /// Some pauses and stops outlast the lease (`--beyond-lease`).
    beyond_lease: bool,
}

/// Thaws redis-server if the supervisor dies while it is stopped.
struct ContinueOnDrop(Option<u32>);

impl Drop for ContinueOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            signal(pid, "CONT");
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

impl Supervisor {
    fn spawn_worker(&mut self, slot: usize, generation: u32) -> std::io::Result<WorkerProc> {
        let instance = format!("w{slot}g{generation}");
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_dir.join(format!("worker-{slot}.log")))?;
        let mut child = Command::new(&self.exe)
            .args(["worker", "--instance", &instance, "--url", &self.url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let stats = Arc::clone(&self.stats);
        let reader_instance = instance.clone();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                stats_of(&stats).record(&reader_instance, &line);
            }
        });
        Ok(WorkerProc {
            slot,
            generation,
            instance,
            stdin: child.stdin.take(),
            child,
            reader: Some(reader),
        })
    }

    /// After a worker died: which locks it held (by its client id in the
    /// lock hashes), then mark it dead so its stale tokens get dropped.
    fn bury(&mut self, instance: &str, died_ms: u64, killed_at: u64) {
        self.dead_at.insert(instance.to_owned(), died_ms);
        let client_id = stats_of(&self.stats).client_ids.get(instance).cloned();
        let never = &self.never;
        let dead = dead_key(instance);
        self.redis.retry(never, |con| con.set::<_, _, ()>(&dead, 1));
        for name in NAMES {
            let fields: Vec<String> = self
                .redis
                .retry(never, |con| con.hkeys(name))
                .unwrap_or_default();
            let held = client_id.as_ref().is_some_and(|id| {
                fields.iter().any(|field| {
                    field
                        .strip_prefix(id.as_str())
                        .is_some_and(|rest| rest.starts_with(':'))
                })
            });
            if held {
                self.killed_holds.push((name.to_owned(), killed_at));
            }
            if std::env::var_os("TORTURE_DEBUG").is_some() {
                eprintln!(
                    "torture: buried {instance} ({client_id:?}): {name} fields {fields:?} held={held}"
                );
            }
            let occupancy = occupancy_key(name);
            let members: Vec<String> = self
                .redis
                .retry(never, |con| con.smembers(&occupancy))
                .unwrap_or_default();
            for member in members.iter().filter(|m| instance_of(m) == instance) {
                self.redis
                    .retry(never, |con| con.srem::<_, _, ()>(&occupancy, member));
            }
        }
    }

    fn kill_worker(&mut self, slot: usize) -> std::io::Result<()> {
        let worker = &mut self.workers[slot];
        let killed_at = now_ms();
        worker.child.kill()?;
        worker.child.wait()?;
        let died = now_ms();
        let instance = worker.instance.clone();
        let generation = worker.generation;
        self.kills += 1;
        self.bury(&instance, died, killed_at);
        self.workers[slot] = self.spawn_worker(slot, generation + 1)?;
        Ok(())
    }

    /// Restarts workers that exited without being asked to.
    fn check_workers(&mut self) -> std::io::Result<()> {
        for slot in 0..self.workers.len() {
            if let Some(status) = self.workers[slot].child.try_wait()? {
                let died = now_ms();
                let instance = self.workers[slot].instance.clone();
                eprintln!("torture: worker {instance} exited on its own: {status}");
                self.unexpected_exits.push(instance.clone());
                self.bury(&instance, died, died);
                let generation = self.workers[slot].generation;
                self.workers[slot] = self.spawn_worker(slot, generation + 1)?;
            }
        }
        Ok(())
    }

    /// Sleeps `duration`, looking after the workers meanwhile.
    fn idle(&mut self, duration: Duration) -> std::io::Result<()> {
        let until = Instant::now() + duration;
        loop {
            self.check_workers()?;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            thread::sleep(left.min(ms(50)));
        }
    }

    /// How long the next pause or stop lasts (ms), and whether that is
    /// longer than the lease.
    fn pause_length(&self, rng: &mut Rng) -> (u64, bool) {
        if self.beyond_lease && rng.percent(35) {
            (rng.range(LEASE_MS + 300, LEASE_MS + 1500), true)
        } else {
            (rng.range(100, SHORT_PAUSE_MAX_MS), false)
        }
    }

    fn chaos(&mut self, rng: &mut Rng, redis_pid: Option<u32>) -> std::io::Result<()> {
        let never = &self.never;
        match rng.below(100) {
            0..=24 => {
                let slot = rng.below(WORKERS as u64) as usize;
                self.kill_worker(slot)?;
            }
            25..=44 => {
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
                        .query::<i64>(con)
                });
                self.conn_kills += 1;
            }
            45..=59 => {
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "pubsub"])
                        .query::<i64>(con)
                });
                self.pubsub_kills += 1;
            }
            60..=79 => {
                let (pause, long) = self.pause_length(rng);
                let start = now_ms();
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg("PAUSE")
                        .arg(pause)
                        .arg("ALL")
                        .query::<()>(con)
                });
                self.pauses.push((start, start + pause, long));
                self.client_pauses += 1;
                self.idle(ms(pause))?;
            }
            _ => {
                let Some(pid) = redis_pid else {
                    return Ok(());
                };
                let (pause, long) = self.pause_length(rng);
                let start = now_ms();
                signal(pid, "STOP");
                thread::sleep(ms(pause));
                signal(pid, "CONT");
                self.pauses.push((start, now_ms(), long));
                self.sigstops += 1;
            }
        }
        Ok(())
    }

    /// Asks every worker to finish (closes its stdin) and waits for it.
    fn stop_workers(&mut self) -> u64 {
        let mut hangs = 0;
        for worker in &mut self.workers {
            worker.stdin.take();
        }
        let deadline = Instant::now() + STOP_WAIT;
        for worker in &mut self.workers {
            loop {
                match worker.child.try_wait() {
                    Ok(Some(status)) => {
                        if !status.success() {
                            eprintln!(
                                "torture: worker {} exited with {status} when asked to stop",
                                worker.instance
                            );
                            self.unexpected_exits.push(worker.instance.clone());
                        }
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => thread::sleep(ms(50)),
                    _ => {
                        eprintln!(
                            "torture: worker {} did not stop within {STOP_WAIT:?}",
                            worker.instance
                        );
                        hangs += 1;
                        let _ = worker.child.kill();
                        let _ = worker.child.wait();
                        break;
                    }
                }
            }
            if let Some(reader) = worker.reader.take() {
                let _ = reader.join();
            }
            let _ = worker.slot;
        }
        hangs
    }

    /// Milliseconds of `[from, to]` during which Redis was paused or stopped.
    fn paused_within(&self, from: u64, to: u64) -> u64 {
        self.pauses
            .iter()
            .map(|&(start, end, _)| to.min(end).saturating_sub(from.max(start)))
            .sum()
    }

    fn after_long_pause(&self, at: u64) -> bool {
        self.pauses
            .iter()
            .any(|&(start, end, long)| long && start <= at && at <= end + 5000)
    }
}

struct Summary {
    sections: u64,
    overlaps: u64,
    after_long_pause: u64,
    without_signal: u64,
    unresolved: u64,
    dead_holder: u64,
    undetected: u64,
    slow_waits: u64,
    max_kill_wait: u64,
    stalls: u64,
}

fn summarize(sup: &Supervisor, stats: &Stats, chaos_start: u64, chaos_end: u64) -> Summary {
    // Overlaps: one per unordered pair of tokens.
    let mut pairs: HashMap<(String, String), &OverlapReport> = HashMap::new();
    let mut dead_holder = 0;
    for report in &stats.overlap_reports {
        let earlier_dead = sup
            .dead_at
            .get(instance_of(&report.earlier))
            .is_some_and(|&died| died <= report.entered_ms);
        if earlier_dead {
            dead_holder += 1;
            continue;
        }
        let key = if report.later < report.earlier {
            (report.later.clone(), report.earlier.clone())
        } else {
            (report.earlier.clone(), report.later.clone())
        };
        pairs.entry(key).or_insert(report);
    }
    let mut summary = Summary {
        sections: stats.sections,
        overlaps: pairs.len() as u64,
        after_long_pause: 0,
        without_signal: 0,
        unresolved: 0,
        dead_holder,
        undetected: 0,
        slow_waits: 0,
        max_kill_wait: 0,
        stalls: 0,
    };
    for ((a, b), report) in &pairs {
        let acquired = |t: &str| stats.tokens.get(t).map_or(0, |info| info.acquired_ms);
        // The earlier holder is the one that acquired first; the one already in
        // the set when the reporter entered breaks ties.
        let earlier = match acquired(a).cmp(&acquired(b)) {
            std::cmp::Ordering::Less => a,
            std::cmp::Ordering::Greater => b,
            std::cmp::Ordering::Equal => &report.earlier,
        };
        let later = if earlier == a { b } else { a };
        let signal = stats.tokens.get(earlier).and_then(|info| info.done);
        if sup.after_long_pause(report.entered_ms) {
            summary.after_long_pause += 1;
        }
        match signal {
            Some(true) => {
                let pause = sup
                    .pauses
                    .iter()
                    .filter(|&&(start, _, _)| start <= report.entered_ms)
                    .max_by_key(|&&(start, _, _)| start)
                    .map_or_else(
                        || "no pause before it".to_owned(),
                        |&(start, end, _)| {
                            format!(
                                "the last pause lasted {} ms and ended {} ms before",
                                end.saturating_sub(start),
                                report.entered_ms.saturating_sub(end)
                            )
                        },
                    );
                eprintln!(
                    "torture: overlap on {} (earlier holder signalled lost): {earlier} (earlier) and {later}; {pause}",
                    report.name
                );
            }
            Some(false) => {
                summary.without_signal += 1;
                eprintln!(
                    "torture: OVERLAP WITHOUT LOST SIGNAL on {}: {earlier} (earlier) and {later}",
                    report.name
                );
            }
            None => {
                summary.without_signal += 1;
                summary.unresolved += 1;
                eprintln!(
                    "torture: overlap on {}: earlier holder {earlier} never reported back (counted as unsignalled), later {later}",
                    report.name
                );
            }
        }
    }
    for (name, first, second) in &stats.duplicate_values {
        let key = if first < second {
            (first.clone(), second.clone())
        } else {
            (second.clone(), first.clone())
        };
        if !pairs.contains_key(&key) {
            summary.undetected += 1;
            eprintln!("torture: LOST UPDATE WITHOUT OVERLAP on {name}: {first} and {second}");
        }
    }
    let mut acquires: HashMap<&str, Vec<u64>> = HashMap::new();
    for (name, times) in &stats.acquires {
        let mut times = times.clone();
        times.sort_unstable();
        acquires.insert(name.as_str(), times);
    }
    for (name, killed_at) in &sup.killed_holds {
        let times = acquires.get(name.as_str()).map_or(&[][..], Vec::as_slice);
        let next = times.iter().copied().find(|&t| t >= *killed_at);
        let until = next.unwrap_or(chaos_end.max(*killed_at));
        let waited = (until - killed_at).saturating_sub(sup.paused_within(*killed_at, until));
        if next.is_some() {
            summary.max_kill_wait = summary.max_kill_wait.max(waited);
        }
        if waited > LEASE_MS + SLOW_WAIT_MARGIN_MS {
            summary.slow_waits += 1;
            eprintln!(
                "torture: SLOW WAIT on {name}: holder killed at {killed_at}, next acquire {} ({waited} ms excluding pauses)",
                next.map_or("never".to_owned(), |t| t.to_string())
            );
        }
    }
    for name in NAMES {
        let times = acquires.get(name).map_or(&[][..], Vec::as_slice);
        let mut previous = chaos_start;
        for &t in times.iter().chain(std::iter::once(&chaos_end)) {
            let t = t.max(previous);
            let gap = (t - previous).saturating_sub(sup.paused_within(previous, t));
            if gap > STALL_MS {
                summary.stalls += 1;
                eprintln!(
                    "torture: STALL on {name}: nobody acquired it for {gap} ms after {previous}"
                );
            }
            previous = t;
        }
    }
    summary
}

fn supervisor_main(args: &[String]) -> ExitCode {
    let Some(url) = arg_value(args, "--url").map(str::to_owned) else {
        eprintln!(
            "usage: torture --url redis://127.0.0.1:<port>/ [--redis-pid <pid>] [--quick | --minutes <n>] [--beyond-lease]\n\
             (scripts/torture.sh starts a throwaway server and passes these)"
        );
        return ExitCode::from(2);
    };
    let redis_pid = arg_value(args, "--redis-pid").and_then(|p| p.parse::<u32>().ok());
    let chaos_for = if args.iter().any(|a| a == "--quick") {
        Duration::from_secs(60)
    } else {
        let minutes = arg_value(args, "--minutes")
            .and_then(|m| m.parse::<f64>().ok())
            .unwrap_or(10.0);
        Duration::from_secs_f64(minutes.max(0.05) * 60.0)
    };
    let log_dir = arg_value(args, "--log-dir").map_or_else(
        || std::env::temp_dir().join(format!("redisson-lock-torture-{}", std::process::id())),
        PathBuf::from,
    );
    let beyond_lease = args.iter().any(|a| a == "--beyond-lease");
    match run(url, redis_pid, chaos_for, beyond_lease, log_dir) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("torture: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(
    url: String,
    redis_pid: Option<u32>,
    chaos_for: Duration,
    beyond_lease: bool,
    log_dir: PathBuf,
) -> std::io::Result<bool> {
    let _thaw = ContinueOnDrop(redis_pid);
    std::fs::create_dir_all(&log_dir)?;
    let mut rng = Rng::seeded(0);
    let mut sup = Supervisor {
        exe: std::env::current_exe()?,
        url: url.clone(),
        log_dir: log_dir.clone(),
        stats: SharedStats::default(),
        redis: Book::new(&url),
        never: AtomicBool::new(false),
        workers: Vec::new(),
        dead_at: HashMap::new(),
        killed_holds: Vec::new(),
        pauses: Vec::new(),
        kills: 0,
        unexpected_exits: Vec::new(),
        conn_kills: 0,
        pubsub_kills: 0,
        client_pauses: 0,
        sigstops: 0,
        beyond_lease,
    };
    {
        let ready = Instant::now() + Duration::from_secs(10);
        loop {
            let ok = redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection_with_timeout(ms(500)))
                .and_then(|mut con| redis::cmd("FLUSHALL").query::<()>(&mut con));
            match ok {
                Ok(()) => break,
                Err(e) if Instant::now() > ready => {
                    return Err(std::io::Error::other(format!("no Redis at {url}: {e}")));
                }
                Err(_) => thread::sleep(ms(50)),
            }
        }
    }
    for slot in 0..WORKERS {
        let worker = sup.spawn_worker(slot, 0)?;
        sup.workers.push(worker);
    }
    // Let the workers get going before the chaos starts.
    sup.idle(ms(1000))?;
    let started = Instant::now();
    let chaos_start = now_ms();
    let mut next_progress = started + Duration::from_secs(15);
    while started.elapsed() < chaos_for {
        sup.idle(ms(rng.range(300, 2500)))?;
        if started.elapsed() >= chaos_for {
            break;
        }
        sup.chaos(&mut rng, redis_pid)?;
        if Instant::now() >= next_progress {
            next_progress += Duration::from_secs(15);
            let stats = stats_of(&sup.stats);
            eprintln!(
                "torture: {:>4}s sections={} overlap_reports={} lost_signals={} kills={} conn_kills={} pubsub_kills={} pauses={} stops={} errors={}",
                started.elapsed().as_secs(),
                stats.sections,
                stats.overlap_reports.len(),
                stats.lost_signals,
                sup.kills,
                sup.conn_kills,
                sup.pubsub_kills,
                sup.client_pauses,
                sup.sigstops,
                stats.errors.values().sum::<u64>()
            );
        }
    }
    let chaos_end = now_ms();
    // Calm down, then let every worker finish its section and exit.
    sup.idle(ms(500))?;
    let hangs = sup.stop_workers();
    let duration = started.elapsed();
    // A lock released by an unlock that failed expires within a lease.
    thread::sleep(ms(LEASE_MS + 500));
    let never = AtomicBool::new(false);
    let mut leftover_locks = 0;
    for name in NAMES {
        if sup.redis.retry(&never, |con| con.exists::<_, bool>(name)) == Some(true) {
            eprintln!("torture: LEFTOVER LOCK {name} a lease after every worker stopped");
            leftover_locks += 1;
        }
    }

    let stats = stats_of(&sup.stats);
    let summary = summarize(&sup, &stats, chaos_start, chaos_end);
    let unexplained_exits = sup
        .unexpected_exits
        .iter()
        .filter(|instance| !stats.panicked_instances.contains(*instance))
        .count() as u64;
    let panics = stats.panic_lines.len() as u64 + unexplained_exits;
    for line in &stats.phantom_counts {
        eprintln!("torture: PHANTOM COUNT {line}");
    }
    for line in &stats.panic_lines {
        eprintln!("torture: PANIC {line}");
    }
    let errors: u64 = stats.errors.values().sum();
    if errors > 0 {
        let detail: Vec<String> = stats
            .errors
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        eprintln!("torture: errors by kind: {}", detail.join(" "));
    }
    if stats.garbled > 0 {
        eprintln!(
            "torture: {} unparsable worker lines (cut by SIGKILL)",
            stats.garbled
        );
    }
    eprintln!(
        "torture: worker logs in {} (scripts/torture.sh keeps them only on failure or with TORTURE_KEEP=1)",
        log_dir.display()
    );
    // Beyond the lease, an overlap is the hazard every lease lock has; the
    // lock's duty is the lost signal, which `without_signal` checks.
    let overlap_failures = if beyond_lease { 0 } else { summary.overlaps };
    let failures = overlap_failures
        + summary.without_signal
        + summary.slow_waits
        + panics
        + summary.stalls
        + summary.undetected
        + hangs
        + leftover_locks
        + stats.phantom_counts.len() as u64;
    println!(
        "torture: sections={} overlaps={} overlaps_without_lost_signal={} slow_waits={} panics={} \
         stalls={} undetected_overlaps={} phantom_counts={} hangs={} leftover_locks={} \
         (mode={}, duration {}s, kills={}, conn_kills={}, pubsub_kills={}, pauses={}, stops={}, \
         overlaps_after_long_pause={}, unresolved_overlaps={}, dead_holder_overlaps={}, lost_signals={}, \
         max_wait_after_kill={}ms, errors={})",
        summary.sections,
        summary.overlaps,
        summary.without_signal,
        summary.slow_waits,
        panics,
        summary.stalls,
        summary.undetected,
        stats.phantom_counts.len(),
        hangs,
        leftover_locks,
        if beyond_lease {
            "beyond-lease"
        } else {
            "within-lease"
        },
        duration.as_secs(),
        sup.kills,
        sup.conn_kills,
        sup.pubsub_kills,
        sup.client_pauses,
        sup.sigstops,
        summary.after_long_pause,
        summary.unresolved,
        summary.dead_holder,
        stats.lost_signals,
        summary.max_kill_wait,
        errors,
    );
    Ok(failures == 0)
}
