//! `rlock-bench`: the benchmark driver behind `scripts/bench.sh`.
//!
//! ```text
//! rlock-bench run --contender floor|crate|rslock --scenario S --url U [--key value ...]
//!     (scenario 5: --scenario family|contended --lock-type fair|read|write|fenced|spin|nonreentrant;
//!      scenario 6: --scenario redlock --urls U1,U2,U3,U4,U5;
//!      paired: --scenario paired [--lock-type semaphore|pes|latch]; scenario 8: --scenario cluster_paired --urls NODE1,NODE2,...)
//! rlock-bench analyze --contender C [--rep N --scenario S --lock-type T ...] EVENT_FILES...
//! rlock-bench observe --url U --run-id ID --contender C [--rep N]
//! rlock-bench server-cost --url U --contender C [--rep N --run-id ID]   (INFO commandstats since the last reset)
//! rlock-bench report --raw RAW.jsonl --json OUT.json --md OUT.md --svg OUT.svg [--machine M.json]
//! rlock-bench cmd --url U [--wait-s N] WORDS...   (one command, e.g. PING or FLUSHALL)
//! rlock-bench proxy --upstream U [--delays-us 0,250 --spin-us 0]   (delay proxy; prints its ports; runs until killed)
//! rlock-bench proxy-ping --url U --via-ports P0,P1 [--delays-us 0,250 --samples N]   (the proxy's own cost)
//! rlock-bench free-port
//! ```
//!
//! `RLOCK_BENCH_FUTEX_HASH=global` in the environment: the process's
//! futexes in the kernel's global hash (Linux 6.16 and later; see
//! `futex_hash_from_env`), for scenario 11's 10,000 waiters.

mod analyze;
mod cluster;
mod common;
mod contenders;
mod family;
mod lock_types;
mod observe;
mod paired;
mod proxy;
mod redlock;
mod report;
mod scenarios;
mod session;
mod soak;
mod sync_types;
mod waiters;
#[cfg(feature = "wakeups")]
mod wakeups;

#[global_allocator]
static ALLOC: common::CountingAlloc = common::CountingAlloc;

fn main() {
    futex_hash_from_env();
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let result = common::Args::parse(raw.get(1..).unwrap_or(&[])).and_then(|args| {
        match raw.first().map(String::as_str) {
            Some("run") => scenarios::run(&args),
            Some("analyze") => analyze::run(&args),
            Some("observe") => observe::run(&args),
            Some("server-cost") => observe::server_cost(&args),
            Some("report") => report::run(&args),
            Some("cmd") => redis_cmd(&args),
            Some("proxy") => proxy::run(&args),
            Some("proxy-ping") => {
                let mut out = proxy::ping(&args)?;
                out["rep"] = serde_json::json!(args.num_or("rep", 0)?);
                println!("{out}");
                Ok(())
            }
            Some("free-port") => {
                println!("{}", common::free_port()?);
                Ok(())
            }
            _ => Err(anyhow::anyhow!(
                "usage: rlock-bench run|analyze|observe|server-cost|report|cmd|proxy|proxy-ping|free-port [--key value ...]"
            )),
        }
    });
    if let Err(e) = result {
        eprintln!("rlock-bench: {e:#}");
        std::process::exit(1);
    }
}

/// Sends one command, retrying for `--wait-s` while the server is not up yet.
fn redis_cmd(args: &common::Args) -> anyhow::Result<()> {
    let url = args.str("url")?;
    let give_up =
        std::time::Instant::now() + std::time::Duration::from_secs(args.num_or("wait-s", 0)?);
    let mut cmd = redis::cmd(args.positional.first().map_or("PING", String::as_str));
    for word in args.positional.iter().skip(1) {
        cmd.arg(word);
    }
    loop {
        let result = redis::Client::open(url)
            .and_then(|c| c.get_connection())
            .and_then(|mut con| cmd.query::<redis::Value>(&mut con));
        match result {
            Ok(value) => {
                println!("{value:?}");
                return Ok(());
            }
            Err(e) if std::time::Instant::now() >= give_up => return Err(e.into()),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}

/// Whether `futex_hash_from_env` moved the process to the global hash
/// (scenario 11's records say which hash they ran with).
pub static FUTEX_HASH_GLOBAL: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `RLOCK_BENCH_FUTEX_HASH=global`: the process's futexes in the kernel's
/// global hash table rather than its private one. Since Linux 6.16 a process
/// gets a private futex hash of 4 slots per CPU (at least 16) once it starts
/// threads, whatever their number: on 2 CPUs, 16 slots for scenario 11's
/// 10,000 parked waiters, each wake walking a bucket of ~600 of them
/// (`prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, 0)`; refused, and said,
/// by an older kernel). Before any thread starts.
fn futex_hash_from_env() {
    const PR_FUTEX_HASH: libc::c_int = 78;
    const PR_FUTEX_HASH_SET_SLOTS: libc::c_ulong = 1;
    if std::env::var("RLOCK_BENCH_FUTEX_HASH").as_deref() != Ok("global") {
        return;
    }
    // SAFETY: prctl with integer arguments only.
    let done = unsafe {
        libc::prctl(
            PR_FUTEX_HASH,
            PR_FUTEX_HASH_SET_SLOTS,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if done == 0 {
        FUTEX_HASH_GLOBAL.store(true, std::sync::atomic::Ordering::Relaxed);
    } else {
        eprintln!(
            "rlock-bench: RLOCK_BENCH_FUTEX_HASH=global refused: {}",
            std::io::Error::last_os_error()
        );
    }
}
