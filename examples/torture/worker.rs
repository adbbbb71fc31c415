//! The worker process: `THREADS` threads taking the locks of the run's kind
//! and reporting every event on stdout (see the module docs in `main.rs`).
//!
//! This file holds the process (`worker_main`: its client, its stop on a
//! closed stdin, its threads), a thread's loop (`worker_thread`), the
//! event lines (`emit`) and error reports. The rest, by concern:
//! `worker/attempt.rs` (one acquisition attempt), `worker/section.rs` (the
//! critical section, its fenced write and the release), `worker/record.rs`
//! (history lines, the lost-signal watcher, the `TORTURE_BREAK` workers)
//! and `worker/book.rs` (the bookkeeping connection).

mod attempt;
mod book;
mod record;
mod section;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};

use redisson_lock::{Client, Error};

use self::attempt::once;
pub use self::book::Book;
use self::record::{Watch, lost_watcher};
use crate::semaphore;
use crate::{LEASE_MS, LockKind, NAMES, Rng, THREADS, arg_value, ms, now_ms};

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
