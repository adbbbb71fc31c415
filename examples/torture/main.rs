//! Torture test: many processes and threads fight over a few locks while a
//! chaos thread kills processes, kills connections and freezes Redis.
//!
//! Run it with `./scripts/torture.sh --quick` (30 s of chaos) or
//! `./scripts/torture.sh --minutes 10`, each optionally with `--beyond-lease`
//! and `--kind reentrant|rw|fair|semaphore|fenced` (the type under test, `reentrant`
//! by default; see *Semaphore runs* and *Fenced runs*); the script starts a throwaway redis-server and passes `--url`
//! and `--redis-pid`. With `--cluster` the locks live in a Redis Cluster
//! that this program starts under `--cluster-dir` (see *Cluster runs*).
//!
//! # Design
//!
//! The supervisor (this program without `worker`: `main.rs`, `args.rs`,
//! `run.rs`, `chaos.rs` and `chaos/`) spawns 3 worker processes (this program
//! with `worker`: `worker.rs` and `worker/`), each
//! running 8 threads that loop over: take one of 3 locks (mostly `lock()`,
//! sometimes `try_lock_for`/`try_lock`, sometimes with an explicit lease,
//! sometimes re-entering), run a critical section, unlock. Locks use a 1.5 s
//! watchdog timeout so that chaos matters. With `--kind rw` the 3 locks are
//! read/write locks: a thread takes the read lock 4 times in 5 and the write
//! lock otherwise; with `--kind fair` they are fair locks.
//!
//! A critical section is a non-atomic read-modify-write of a counter
//! (`GET`, tiny sleep, `SET v+1`; readers only `GET`), bracketed by an
//! occupancy set: on entry a script adds the holder's token to
//! `torture:occ:<lock>` and returns who else is in it that the holder
//! conflicts with (an *overlap* when anyone is: for a reader, any writer; for
//! anyone else, anyone), on exit the token is removed. A set rather than a
//! counter makes retries after a killed connection idempotent and names both
//! parties of an overlap. Tokens are `<instance>/<thread>/<seq>/<r|w>` where
//! the instance (`w<slot>g<generation>`) names one worker process and the
//! last letter says whether the hold was a read hold or an exclusive one.
//!
//! Fair waits: before a waiting acquisition of a fair lock, a thread adds
//! itself to `torture:waiting:<lock>` and counts who is already there (its
//! position at arrival, counted by the workers themselves: the lock's own
//! queue is not observable at the right moment from outside); it leaves the
//! set when the call returns. Each `lock()` reports its wait and position.
//!
//! Workers report to the supervisor on stdout, one line per event:
//! `I <instance> <client id>`, `A <lock> <token> <ms>` (acquired),
//! `W <lock> <token> <start ms> <end ms> <ahead>` (a fair `lock()`'s wait),
//! `C <lock> <token> <count>` (a first hold counted more than 1),
//! `O <lock> <token> <other token> <ms>` (overlap seen on entry, with the time
//! just before the entry script was sent), `S <lock> <token> <value read>
//! <is_lost> <unlock outcome> <ms>` (section done, released at `<ms>`; a
//! reader's value is `-`), `E <what>` (an error), `P <message>` (a panic).
//! `L <lock> <token> <ms>` (a long hold, in cluster runs, learnt that its
//! lock was lost). Times are wall-clock ms (one machine).
//!
//! The chaos thread (`chaos.rs`), at random intervals, one action at a time:
//! SIGKILLs a worker and starts a new one, `CLIENT KILL TYPE normal` or
//! `TYPE pubsub` (never its own connection), `CLIENT PAUSE <ms> ALL`, or
//! SIGSTOPs redis-server. Pauses and stops last at most a third of the lease:
//! a holder renewed every third of the lease keeps two thirds in hand, and an
//! explicit lease is at least two thirds of the watchdog's. After a kill it
//! reads the lock hashes to see which locks the dead process held (by its
//! client id) and records the time; it then marks the instance dead in Redis,
//! which lets the entry script drop the dead process's stale occupancy tokens
//! (a dead holder cannot overlap anyone). In a fair run it also removes the
//! dead process's entries from the fair queues (`reaped_waiters`): Redisson's
//! fair queue has no other way to drop a dead waiter than its deadline
//! (`fairLockWaitTimeout`, 300 s), until which it holds up everyone behind it.
//! For the same reason a thread whose fair `lock()` failed comes back to the
//! same lock (its queue entry is still there).
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
//! # Semaphore runs (`--kind semaphore`, `semaphore.rs`, `sem_supervisor.rs`)
//!
//! The 3 names are `Client::semaphore`s of 2 permits each (set once by the
//! supervisor with `try_set_permits`), on the single server (not with
//! `--cluster` nor `--beyond-lease`: permits have no lease). Threads take one
//! permit (`try_acquire_for(1, 0.1-3 s)` 9 times in 10, `try_acquire(1)`
//! once), run a section bracketed by the occupancy set, and return it with
//! the guard's `release()`. The entry script reports (`X`) a section that
//! finds more than 2 live holders in the set.
//!
//! Permits are not owned and have no lease: a SIGKILLed holder's permits are
//! leaked for good, and an acquire or release whose reply was lost
//! (`Error::OutcomeUnknown`; never resent) may or may not have changed the
//! count. So every permit goes through a ledger on the bookkeeping server
//! (the same server, which the chaos disturbs but never loses): `pending`
//! while the acquire is in flight, `held` once it succeeded, `releasing`
//! while the release is in flight; a lost reply moves the token to
//! `ambiguous` (`U` on stdout). A definite release failure is retried with
//! `Semaphore::release` for 10 s. After a SIGKILL the supervisor (after
//! 100 ms, for the dead worker's last ledger writes to land) moves the dead
//! worker's `pending` and `releasing` tokens to `ambiguous` and returns its
//! `held` permits itself (`returned_dead_permits`).
//!
//! The ledger cannot be atomic with the semaphore's scripts, so an ambiguous
//! operation is resolved by a census: every 8 s and after every connection
//! kill (instead of the next chaos action), and once after the chaos, the
//! supervisor sets a barrier key, every live thread parks at the top of its
//! loop (holding nothing, nothing in flight: the reason why waits are bounded
//! during the chaos), and then, per semaphore, `2 - available - held` is
//! exactly the permits the ambiguous operations since the last census took.
//! It must be within `0..=ambiguous` (each took 0 or 1; a dead worker's
//! thread waiting in `try_acquire_for` counts as one), and the census gives
//! them back, so that lost replies do not drain the semaphores (until then,
//! the permits lost replies took are missing: with 2 permits, a semaphore may
//! be empty for a while; a census's time is not counted in stall gaps). When
//! asked to stop, each thread finishes its iteration, then does a final
//! round: `acquire(1)` (no deadline), section, release (`F` on stdout), which
//! must be done within 15 s. The same check as a census closes the run, with
//! the permits held by threads whose release kept failing counted as held.
//!
//! Failure columns of a semaphore run: `over_n` (a section saw more than 2
//! live holders), `permits_unaccounted` (at a census or at the end, how far
//! `2 - available - held` lay outside `0..=ambiguous`: below, permits were
//! created, e.g. a release applied twice; above, permits were lost), `stuck`
//! (threads of the last workers whose final round did not succeed within
//! 15 s, plus censuses that gave up waiting 8 s for a thread to park),
//! besides `panics`, `stalls` and `hangs`; the lock columns stay 0.
//! Information: `returned_dead_permits`, `dead_in_flight`,
//! `unknown_acquires`/`unknown_releases` (lost replies), `censuses`,
//! `ambiguous` (operations resolved) and `ambiguous_taken` (permits they
//! had taken), `final_rounds`, `worst_final_round`.
//!
//! With `--java-jar <interop driver jar>` (`scripts/torture.sh` builds it
//! with Maven when `java` and `mvn` are there) a JVM worker (`jvm.rs`) takes
//! part too: the interop driver (real Redisson) with 4 actors running
//! `sem.torture` (`interop/java/.../SemTorture.java`), which hammer the same
//! semaphores the same way, keep the same ledger and occupancy sets and
//! print the same event lines. Redisson does not say whether a failed
//! acquire or release was applied, so every exception from one is
//! ambiguous. The chaos kills its connections and pauses or stops Redis
//! under it, but does not SIGKILL it (a JVM takes seconds to start); it
//! stops when the supervisor sets `torture:stop`, after its final rounds.
//! `java=<actors>actors/<sections>sections` in the summary (`java=none`
//! without it).
//!
//! # Fenced runs and histories (`--kind fenced`, `--history <file>`)
//!
//! With `--kind fenced` the 3 locks are fenced locks (`Client::fenced_lock`,
//! Redisson's `getFencedLock`): the same sections, plus a token per
//! acquisition. Every run with `--history <file>` (any lock kind but the
//! semaphore), and every fenced run (in the log directory without it),
//! records a history (`history.rs`): each worker thread prints every
//! acquire, hold and release as invoke/complete events with the realtime
//! clock in ns, the fencing token, the guard's valid-until and its lost
//! reason; a watcher thread per worker records each hold's `LostSignal`
//! when it fires; the supervisor records processes and faults. After the
//! run, the checker (`checker.rs` and `checker/`; also `torture check-history <file>`)
//! reads it: no two holds within their lease at once, tokens strictly
//! increasing in acquisition order, every overlap beyond a lease preceded
//! by the lost signal of the holder past its lease. Its violations are the
//! failure column `history_violations`.
//!
//! With `--java-jar <driver jar>` (any number; `scripts/torture.sh` passes
//! Redisson 4.7.0's and 3.24.3's) a fenced run also has one JVM worker per
//! jar (`fenced_jvm.rs`): `FENCED_ACTORS` actors of the interop driver
//! (`FencedOps.java`) taking the same fenced locks with
//! `lockAndGetToken`/`tryLockAndGetToken`, recording the same history. The
//! chaos of a fenced run also SIGSTOPs workers (Rust or JVM, within a third
//! of the lease; with `--beyond-lease`, a third of the Rust workers' stops
//! last longer than the lease: Redisson has no lost signal for a JVM frozen
//! past its lease) and SIGKILLs JVM workers (a new JVM takes the slot):
//! `worker_stops`, `java_kills`, `java=<versions>/<sections>sections`.
//! With `--beyond-lease`, half of a fenced run's Rust reentries also take
//! a short lease (30-200 ms) and keep it up to 400 ms, so that a hold's
//! deadline moves earlier and its key may expire before the next renewal:
//! its lost signal must fire by then (the checker's push check).
//!
//! `TORTURE_BREAK=skip-lock` (1 attempt in 20 records a made-up
//! acquisition without taking the lock) and `TORTURE_BREAK=hide-lost` (the
//! history never says a hold was lost) break the workers on purpose: the
//! checker must then report violations (RELIABILITY.md shows it does).
//!
//! # Cluster runs (`cluster.rs`, `failover.rs`)
//!
//! With `--cluster-dir` the supervisor starts 3 masters + 3 replicas there
//! and checks that the 3 lock names are served by 3 different masters. The
//! workers' clients are cluster clients (seeds: the masters); the `--url`
//! server keeps only the bookkeeping (occupancy and waiting sets, counters,
//! dead marks), out of the chaos. The chaos kills workers, kills normal and
//! pub/sub connections on every master, pauses or stops one master within a
//! third of the lease, and every few seconds fails the master of a random
//! lock over, alternately with `CLUSTER FAILOVER` on its replica
//! (coordinated: no overlap is allowed) and with `kill -9` (the cluster
//! promotes the replica after `cluster-node-timeout`, 2 s, and an election;
//! the node is then started again with its `nodes.conf` and rejoins as a
//! replica). A failover is followed until every node agrees and the former
//! master replicates, before the next one. The failover takes longer than the
//! lease, so the holds on a killed master run out and a write the replica
//! had not received is lost; holds on the other masters run out too, as the
//! cluster refuses every slot from the failure report to the promotion
//! (`cluster-require-full-coverage`, Redis's default). An overlap from the
//! kill to 5 s after the promotion is allowed if the earlier holder was told
//! (`overlaps_after_master_kill`); unsignalled, it is a failure like any
//! other. So that holds span failovers, 4 in 1000 sections whose lock the
//! watchdog renews hold it 0.3-5 s longer (after the increment, so that a
//! holder that lost its lock writes no stale value back), reporting `L` as
//! soon as their guard says lost. Failover time is not counted in stall and
//! slow-wait checks.
//!
//! # Summary columns (`summary.rs`)
//!
//! Failures (the run exits non-zero if any is non-zero):
//! - `overlaps`: two live holders that conflict were in a section at the same
//!   time. (With `--beyond-lease`, overlaps are expected and only the next
//!   column is a failure.)
//! - `overlaps_without_lost_signal`: such an overlap where the earlier holder
//!   was *not* told: its guard's `is_lost()` was false at exit and its unlock
//!   returned `Ok` (or it never reported back).
//! - `slow_waits`: after a holder was SIGKILLed, nobody got its lock within
//!   lease + 1 s (not counting time Redis was paused or stopped meanwhile).
//! - `panics`: panic hook reports plus worker exits the supervisor did not cause.
//! - `stalls`: a lock nobody acquired for 10 s (pauses not counted); in a
//!   read/write run also a lock no writer acquired for 10 s.
//! - `undetected_overlaps`: two exclusive sections read the same counter value
//!   (a lost update) without either seeing the other in the occupancy set.
//! - `phantom_counts`: a first hold whose `hold_count()` (on the side taken)
//!   was above 1: a count no guard owns, which keeps the lock held after the
//!   last unlock.
//! - `hangs`: workers that did not stop within 30 s when asked to.
//! - `leftover_locks`: lock keys (and read/write lock reader markers,
//!   `*:rwlock_timeout:*`) still present a lease after every worker stopped.
//! - `stuck_failovers` (cluster runs): a failover of the chaos that did not
//!   finish within 30 s.
//! - `history_violations` (runs with a history): what the checker found.
//! - `unfair_waits` (fair runs): a fair `lock()` not served within
//!   (threads waiting when it arrived + 1) × the longest hold of that lock
//!   during its wait + 20 ms per thread ahead + 250 ms. Waits that overlapped
//!   a chaos action's reach (a kill: the lease + 1 s after it; a connection
//!   kill: 1.5 s; a pub/sub kill: the lease + 1 s, a missed wake-up polls at
//!   the holder's TTL; a pause or stop: until 1 s after it) are not checked:
//!   `fair_waits_checked` and `fair_waits_skipped` say how many.
//!
//! Information, honestly classified:
//! - `kind`: the lock type; `mode`: `within-lease` (the default) or
//!   `beyond-lease`.
//! - `overlaps_after_long_pause`: overlaps that followed a pause or stop longer
//!   than the lease by less than 5 s (only possible with `--beyond-lease`).
//! - `dead_holder_overlaps`: the earlier "holder" was a process already dead
//!   when the later one entered (stale occupancy, not an overlap).
//! - `lost_signals`: sections whose guard was lost or whose unlock said so.
//! - `errors`: failed lock operations (expected under chaos; see the worker logs).
//! - cluster runs: `coordinated_failovers` and `master_kills` (failovers
//!   that happened), `overlaps_after_master_kill` (signalled; see above),
//!   `unplanned_failovers` (master changes the chaos did not cause).
//! - `read_sections` (rw), `worst_fair_wait` (fair: the largest wait as a
//!   percentage of its allowance), `stale_queue_entries` (fair: entries left
//!   in the fair queues after every worker stopped; they age out).
//!
//! # Files
//!
//! This file holds the shared constants, the lock kinds, the clock, and
//! the entry point (`worker`, `check-history`, `free-port`, or the
//! supervisor, started from its checked arguments); `args.rs` parses the
//! command line, `keys.rs` names the keys, `rng.rs` is the random number
//! generator, `run.rs` runs the supervisor. Each file's module docs say
//! what it holds.

mod args;
mod chaos;
mod checker;
mod cluster;
mod failover;
mod fenced_jvm;
mod history;
mod jvm;
mod keys;
mod rng;
mod sem_supervisor;
mod semaphore;
mod summary;
mod worker;

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use args::arg_value;
pub use keys::{
    counter_key, dead_key, fair_queue_key, fair_timeout_key, instance_of, occupancy_key,
    waiting_key,
};
pub use rng::Rng;

pub const NAMES: [&str; 3] = ["torture-a", "{torture}-b", "torture:c"];
pub const WORKERS: usize = 3;
pub const THREADS: usize = 8;
/// The watchdog timeout, and the longest explicit lease a section uses.
pub const LEASE_MS: u64 = 1500;
/// The shortest explicit lease a section uses: a section (a few ms) plus the
/// longest short pause fits in it.
pub const EXPLICIT_LEASE_MIN_MS: u64 = LEASE_MS * 2 / 3;
/// Pauses and stops within the lease last at most this long: the watchdog
/// renews every third of the lease, so a holder always has two thirds of it in
/// hand, and this leaves a third for the renewal to get through afterwards.
pub const SHORT_PAUSE_MAX_MS: u64 = LEASE_MS / 3;
/// A waiter may take this long beyond the lease to notice a dead holder's lock expired.
pub const SLOW_WAIT_MARGIN_MS: u64 = 1000;
pub const STALL_MS: u64 = 10_000;
pub const STOP_WAIT: Duration = Duration::from_secs(30);

/// The lock type a run tortures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Reentrant,
    Rw,
    Fair,
    /// Not a lock: `Client::semaphore` of `semaphore::PERMITS` permits.
    Semaphore,
    /// The fenced lock (`Client::fenced_lock`, Redisson's `getFencedLock`),
    /// with a history and JVM workers (see *Fenced runs*).
    Fenced,
}

impl LockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Reentrant => "reentrant",
            LockKind::Rw => "rw",
            LockKind::Fair => "fair",
            LockKind::Semaphore => "semaphore",
            LockKind::Fenced => "fenced",
        }
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("worker") => worker::worker_main(&args[1..]),
        Some("check-history") => checker::main(&args[1..]),
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

fn supervisor_main(args: &[String]) -> ExitCode {
    let args::Args {
        url,
        kind,
        redis_pid,
        cluster_dir,
        beyond_lease,
        java_jars,
        history: history_arg,
        chaos_for,
        log_dir,
    } = match args::Args::parse(args) {
        Ok(args) => args,
        Err(code) => return code,
    };
    // A fenced run always keeps a history (in the log directory unless
    // `--history` names a file).
    let history_path =
        history_arg.or_else(|| (kind == LockKind::Fenced).then(|| log_dir.join("history.txt")));
    let history = match history_path.as_deref().map(history::History::create) {
        None => None,
        Some(Ok(history)) => Some(history),
        Some(Err(e)) => {
            eprintln!("torture: the history file: {e}");
            return ExitCode::from(2);
        }
    };
    let cluster = match cluster_dir.map(|dir| {
        eprintln!(
            "torture: starting a 3 masters + 3 replicas cluster in {}",
            dir.display()
        );
        cluster::Nodes::start(&dir).and_then(failover::ClusterState::new)
    }) {
        None => None,
        Some(Ok(mut cluster)) => {
            cluster.history = history.clone();
            Some(cluster)
        }
        Some(Err(e)) => {
            eprintln!("torture: {e}");
            return ExitCode::from(2);
        }
    };
    let sup = chaos::Supervisor {
        exe: match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => {
                eprintln!("torture: {e}");
                return ExitCode::from(2);
            }
        },
        url: url.clone(),
        kind,
        log_dir,
        stats: summary::SharedStats::default(),
        redis: worker::Book::new(&url),
        never: AtomicBool::new(false),
        workers: Vec::new(),
        dead_at: Default::default(),
        killed_holds: Vec::new(),
        pauses: Vec::new(),
        disruptions: Vec::new(),
        kills: 0,
        unexpected_exits: Vec::new(),
        conn_kills: 0,
        pubsub_kills: 0,
        client_pauses: 0,
        sigstops: 0,
        reaped_waiters: 0,
        sem: None,
        reclaims: Default::default(),
        java_jar: java_jars
            .first()
            .cloned()
            .filter(|_| kind == LockKind::Semaphore),
        java: None,
        fenced_jars: if kind == LockKind::Fenced {
            java_jars
        } else {
            Vec::new()
        },
        fenced_javas: Vec::new(),
        history,
        history_path,
        faults: 0,
        worker_stops: 0,
        java_kills: 0,
        beyond_lease,
        cluster,
    };
    match run::run(sup, redis_pid, chaos_for) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("torture: {e}");
            ExitCode::from(2)
        }
    }
}

mod run;
