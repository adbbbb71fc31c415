//! Small shared pieces: the system-wide clock, resource usage, statistics,
//! argument parsing, threads started together and the cross-process start
//! barrier.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// `CLOCK_MONOTONIC` in nanoseconds. It is system-wide on Linux, and it is
/// also what Java's `System.nanoTime()` reads there, so timestamps from every
/// process of one run (Rust or Java) can be compared directly.
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// User + system CPU time of this process so far, in nanoseconds.
pub fn cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// User + system CPU time of the calling thread so far, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock_gettime(clock)` in nanoseconds.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Resident set size of this process (from `/proc/self/statm`), in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// The global allocator: the system's, counting the bytes Rust code holds
/// once [`count_live_bytes`] has switched counting on (the soak only, so
/// that no other scenario pays for the atomic).
pub struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to `System`; the counters are
// only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as ours.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

/// Starts counting live heap bytes from zero: what is allocated from now on
/// and not yet freed (frees of older allocations count negative).
pub fn count_live_bytes() {
    LIVE.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
}

/// Bytes allocated since [`count_live_bytes`] and not freed.
pub fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// Nearest-rank percentile of sorted samples (`q` in 0..=1).
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1_000_000.0
}

/// `--key value` pairs.
pub struct Args {
    map: HashMap<String, String>,
    pub positional: Vec<String>,
}

impl Args {
    pub fn parse(raw: &[String]) -> Result<Args> {
        let mut map = HashMap::new();
        let mut positional = Vec::new();
        let mut it = raw.iter();
        while let Some(word) = it.next() {
            if let Some(key) = word.strip_prefix("--") {
                let value = it
                    .next()
                    .with_context(|| format!("--{key} needs a value"))?;
                map.insert(key.to_owned(), value.clone());
            } else {
                positional.push(word.clone());
            }
        }
        Ok(Args { map, positional })
    }

    pub fn str(&self, key: &str) -> Result<&str> {
        self.map
            .get(key)
            .map(String::as_str)
            .with_context(|| format!("missing --{key}"))
    }

    pub fn str_or<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.map.get(key).map_or(default, String::as_str)
    }

    /// `--multiplexed N` (0: the pool), `None` when not given (the crate's
    /// default connections).
    pub fn multiplexed(&self) -> Result<Option<u32>> {
        match self.map.get("multiplexed") {
            Some(v) => Ok(Some(v.parse().with_context(|| {
                format!("--multiplexed must be a whole number, got {v}")
            })?)),
            None => Ok(None),
        }
    }

    pub fn num_or(&self, key: &str, default: u64) -> Result<u64> {
        match self.map.get(key) {
            Some(v) => v
                .parse()
                .with_context(|| format!("--{key} must be a whole number, got {v}")),
            None => Ok(default),
        }
    }
}

/// Waits until `n` processes have reached the barrier called `key` (an INCR'd
/// Redis counter), so that every process of a run starts together.
pub fn redis_barrier(con: &mut redis::Connection, key: &str, n: u64) -> Result<()> {
    let _: u64 = redis::cmd("INCR").arg(key).query(con)?;
    let _: () = redis::cmd("EXPIRE").arg(key).arg(600).query(con)?;
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let arrived: Option<u64> = redis::cmd("GET").arg(key).query(con)?;
        if arrived.unwrap_or(0) >= n {
            return Ok(());
        }
        if Instant::now() > give_up {
            bail!("barrier {key}: only {arrived:?} of {n} processes arrived");
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// `threads` threads started together: each runs `setup(thread index)`
/// (opening and warming up its sessions), waits at one barrier with the
/// others (a thread whose set-up failed as well, so that none waits
/// forever), then runs `run(what its set-up made, the barrier)`, unless its
/// set-up failed. The results in thread order.
pub fn together<S, T: Send>(
    threads: usize,
    setup: impl Fn(usize) -> Result<S> + Sync,
    run: impl Fn(S, &Barrier) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    let barrier = Barrier::new(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, setup, run) = (&barrier, &setup, &run);
                scope.spawn(move || -> Result<T> {
                    let ready = setup(t);
                    barrier.wait();
                    run(ready?, barrier)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    })
}

/// Sleeps for `d` (the critical section of the contended scenario).
pub fn critical_section(d: Duration) {
    if !d.is_zero() {
        std::thread::sleep(d);
    }
}

/// A free loopback port (never 6379).
pub fn free_port() -> Result<u16> {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        if port != 6379 {
            return Ok(port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&v, 0.0), 1);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn args_take_key_value_pairs_and_positionals() {
        let raw: Vec<String> = ["--a", "1", "file", "--b", "x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let args = Args::parse(&raw).expect("parse");
        assert_eq!(args.num_or("a", 0).expect("a"), 1);
        assert_eq!(args.str("b").expect("b"), "x");
        assert_eq!(args.positional, vec!["file".to_string()]);
        assert!(Args::parse(&["--dangling".to_string()]).is_err());
    }
}
