//! Checked histories of `redisson-lock run` under faults: the fifth tool of
//! RELIABILITY.md ("Checked histories"), for the command-line tool.
//!
//! Worker threads run jobs through `redisson-lock run` in a loop, on one
//! lock and on a semaphore of two permits. Each job (a few lines of
//! `python3`) records what it does in a shared history file (an `O_APPEND`
//! line per event, with the wall clock in ns): its start, its end, every
//! SIGCONT it gets (at once, from a signal handler), and, for half of them,
//! the beats of a background process that outlives the job's own process
//! by up to 800 ms. A chaos thread meanwhile stops jobs as Ctrl-Z
//! does (SIGTSTP to the job's group or to the wrapper; SIGCONT to the
//! wrapper, `fg`, after 1 to 4.5 s: often past the 2 s lease, which
//! nothing renews while stopped), SIGTERMs and SIGKILLs wrappers, and
//! pauses the server's writes for 3 s (`CLIENT PAUSE`), SIGTERMing the
//! wrappers whose release then waits on it.
//!
//! The checker then reads the history:
//! - **exclusion**: a job's events span an interval during which it ran;
//!   the intervals of one name never overlap more than its permits (1 for
//!   the lock, 2 for the semaphore);
//! - **liveness**: a run no fault touched (nor a pause) exits 0 (a healthy
//!   job is never killed as if its lock were lost), and a wrapper SIGTERMed
//!   while its release waits ends within 1.5 s;
//! - **continuation**: a job continued after a stop (it records the
//!   SIGCONT) is not found lost right after (exit 124), unless a pause
//!   touched it: the wrapper continues it only while the lease is
//!   certainly held.
//!
//! `CLI_HISTORY_SECS` sets the chaos's length (default 30 s, CI's;
//! `scripts/cli-history.sh SECONDS` runs it long: RELIABILITY.md's figures
//! are from 300 s).
#![allow(unsafe_code)] // kill(2) of the test's own processes

#[path = "../../tests/support/mod.rs"]
mod support;

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{Tmp, spawn_run, state, wait_exit};
use support::RedisServer;

/// A run in progress: its wrapper's pid and the job's id.
#[derive(Clone)]
struct Running {
    wrapper: i32,
    job: String,
}

#[derive(Default)]
struct Book {
    /// Per worker, its run in progress.
    running: HashMap<usize, Running>,
    /// Jobs a fault was aimed at (their exit code is not checked).
    faulted: HashSet<String>,
    /// Every run: job id, name, exit code (`None`: killed by a signal).
    exits: Vec<(String, String, Option<i32>)>,
    /// Every run's life: job id, spawned, ended.
    lives: HashMap<String, (Instant, Instant)>,
    /// The server's pauses (`CLIENT PAUSE ... WRITE`): from, to.
    pauses: Vec<(Instant, Instant)>,
    /// Wrappers SIGTERMed while releasing (their job gone) during a pause:
    /// when.
    termed: HashMap<String, Instant>,
    faults: BTreeMap<&'static str, usize>,
}

/// The names and how many may run at once.
const NAMES: [(&str, usize); 2] = [("hist-lock", 1), ("hist-pool", 2)];

/// The job: a small Python program (started in a few tens of ms) that
/// records its start, its end 100 to 300 ms later, the beats of a
/// background child when asked, and, at once, every SIGCONT it gets: a job
/// continued after its lock was lost records it before anyone can kill it.
const JOB: &str = r#"
import os, sys, time, signal
history, job, name, background = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
def event(kind):
    with open(history, "a") as f:
        f.write(f"{job} {name} {kind} {time.time_ns()}\n")
signal.signal(signal.SIGCONT, lambda *_: event("cont"))
with open(sys.argv[5], "w") as f:
    f.write(str(os.getpid()))
event("start")
if background and os.fork() == 0:
    for _ in range(8):
        time.sleep(0.1)
        event("beat")
    os._exit(0)
time.sleep(0.1 * (1 + os.getpid() % 3))
event("end")
"#;

fn job_args(tmp: &Tmp, id: &str, name: &str, background: bool) -> Vec<String> {
    vec![
        "python3".into(),
        "-c".into(),
        JOB.into(),
        tmp.path("history"),
        id.into(),
        name.into(),
        if background { "1" } else { "0" }.into(),
        tmp.path(&format!("{id}.pgid")),
    ]
}

fn worker(
    url: String,
    tmp: Arc<Tmp>,
    book: Arc<Mutex<Book>>,
    stop: Arc<AtomicBool>,
    w: usize,
    (name, permits): (&'static str, usize),
) {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let id = format!("w{w}-{i}");
        let job = job_args(&tmp, &id, name, i % 2 == 0);
        let permits_arg = permits.to_string();
        let mut args = vec!["run", "--watchdog-timeout", "2s", "-w", "60"];
        if permits > 1 {
            args.extend(["--permits", &permits_arg]);
        }
        args.extend([name, "--"]);
        args.extend(job.iter().map(String::as_str));
        let spawned = Instant::now();
        let child: Child = spawn_run(&url, &args);
        let wrapper = i32::try_from(child.id()).expect("pid");
        book.lock().expect("book").running.insert(
            w,
            Running {
                wrapper,
                job: id.clone(),
            },
        );
        let code = wait_exit(child, Duration::from_secs(90));
        let mut book = book.lock().expect("book");
        book.running.remove(&w);
        book.lives.insert(id.clone(), (spawned, Instant::now()));
        book.exits.push((id, name.to_owned(), code));
    }
}

/// Pauses the server's writes for [`PAUSE`] and, once releases wait on it,
/// SIGTERMs the wrappers whose job is gone (signals after the job: the
/// wrapper must end at once, not when Redis answers).
fn pause_and_term_releases(server: &RedisServer, tmp: &Tmp, book: &Mutex<Book>) {
    let from = Instant::now();
    let millis = PAUSE.as_millis().to_string();
    let _: () = server.cmd(&["CLIENT", "PAUSE", &millis, "WRITE"]);
    book.lock().expect("book").pauses.push((from, from + PAUSE));
    thread::sleep(Duration::from_millis(400));
    let mut book = book.lock().expect("book");
    let releasing: Vec<Running> = book
        .running
        .values()
        .filter(|r| job_pgid(tmp, &r.job).is_some_and(|pgid| !common::group_alive(pgid)))
        .cloned()
        .collect();
    for run in releasing {
        if book.faulted.insert(run.job.clone()) {
            kill_quietly(run.wrapper, libc::SIGTERM);
            book.termed.insert(run.job, Instant::now());
            *book.faults.entry("sigterm-in-release").or_default() += 1;
        }
    }
}

/// The process group of job `id`, once it started.
fn job_pgid(tmp: &Tmp, id: &str) -> Option<i32> {
    std::fs::read_to_string(tmp.path(&format!("{id}.pgid")))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Waits (at most `within`) until `pid` is stopped.
fn stopped_within(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match state(pid) {
            Some('T') => return true,
            None | Some('Z') => return false,
            _ => thread::sleep(Duration::from_millis(5)),
        }
    }
    false
}

/// How long the server is paused for writes: longer than the lease, so
/// that releases (and renewals) wait on it.
const PAUSE: Duration = Duration::from_secs(3);
/// How soon a wrapper SIGTERMed while its release waits must end.
const TERM_WITHIN: Duration = Duration::from_millis(1500);

fn chaos(server: &RedisServer, tmp: &Tmp, book: &Mutex<Book>, until: Instant, seed: u64) {
    let mut last_pause = Instant::now();
    let mut rng = seed;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut stops = Vec::new();
    while Instant::now() < until {
        thread::sleep(Duration::from_millis(150 + next() % 250));
        // A pause every 9 s (three in the 30 s of CI).
        if last_pause.elapsed() > Duration::from_secs(9) {
            last_pause = Instant::now();
            pause_and_term_releases(server, tmp, book);
            continue;
        }
        // A run whose job is running (it wrote its pgid and lives): a
        // wrapper still waiting for its lock has nothing to stop.
        let target = {
            let book = book.lock().expect("book");
            let running: Vec<Running> = book
                .running
                .values()
                .filter(|r| job_pgid(tmp, &r.job).is_some_and(common::group_alive))
                .cloned()
                .collect();
            if running.is_empty() {
                continue;
            }
            running[(next() % running.len() as u64) as usize].clone()
        };
        let fault = match next() % 10 {
            0..=6 => "ctrl-z",
            7 | 8 => "sigterm",
            _ => "sigkill",
        };
        {
            let mut book = book.lock().expect("book");
            // One fault a run: still running, and not hit already.
            if !book.running.values().any(|r| r.job == target.job)
                || book.faulted.contains(&target.job)
            {
                continue;
            }
            book.faulted.insert(target.job.clone());
            *book.faults.entry(fault).or_default() += 1;
        }
        match fault {
            "ctrl-z" => {
                // To the job's group (a terminal's Ctrl-Z) or to the wrapper.
                let to = match job_pgid(tmp, &target.job) {
                    Some(pgid) if next() % 2 == 0 => -pgid,
                    _ => target.wrapper,
                };
                let stop = Duration::from_millis(1000 + next() % 3500);
                // On a thread of its own: other faults go on meanwhile.
                stops.push(thread::spawn(move || {
                    kill_quietly(to, libc::SIGTSTP);
                    // `fg`: once the wrapper stopped itself (never before: a
                    // SIGCONT it gets first would leave it stopped for good).
                    if stopped_within(target.wrapper, Duration::from_secs(3)) {
                        thread::sleep(stop);
                        kill_quietly(target.wrapper, libc::SIGCONT);
                    }
                }));
            }
            "sigterm" => kill_quietly(target.wrapper, libc::SIGTERM),
            _ => kill_quietly(target.wrapper, libc::SIGKILL),
        }
    }
    for stop in stops {
        stop.join().expect("a stop");
    }
}

/// `kill(pid, signal)` (a negative `pid`: to that group), a process gone
/// meanwhile being no error; only ever to processes this test started.
fn kill_quietly(pid: i32, sig: i32) {
    // SAFETY: kill takes plain integers.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// One job's events: its name and the interval they span.
fn intervals(history: &str) -> BTreeMap<String, (String, u128, u128)> {
    let mut jobs: BTreeMap<String, (String, u128, u128)> = BTreeMap::new();
    for line in history.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [id, name, _kind, at] = fields[..] else {
            panic!("a malformed history line: {line:?}");
        };
        let at: u128 = at.parse().expect("a time");
        let job = jobs
            .entry(id.to_owned())
            .or_insert_with(|| (name.to_owned(), at, at));
        job.1 = job.1.min(at);
        job.2 = job.2.max(at);
    }
    jobs
}

/// The exclusion violations: for each name, sets of jobs whose intervals
/// overlap more than its permits allow.
fn exclusion_violations(jobs: &BTreeMap<String, (String, u128, u128)>) -> Vec<String> {
    let mut violations = Vec::new();
    for (name, permits) in NAMES {
        // Starts before ends at the same instant would be an overlap of
        // zero length: ends first.
        let mut points: Vec<(u128, i32, &str)> = Vec::new();
        for (id, (n, start, end)) in jobs {
            if n == name {
                points.push((*start, 1, id));
                points.push((*end, -1, id));
            }
        }
        points.sort_by_key(|&(at, delta, _)| (at, delta));
        let mut open: Vec<&str> = Vec::new();
        // A job with one event ends "before" it starts in that order.
        let mut ended_first: HashSet<&str> = HashSet::new();
        for (_, delta, id) in points {
            if delta > 0 {
                if ended_first.remove(id) {
                    continue;
                }
                open.push(id);
                if open.len() > permits {
                    violations.push(format!("{name}: {} at once", open.join(", ")));
                }
            } else if open.contains(&id) {
                open.retain(|o| *o != id);
            } else {
                ended_first.insert(id);
            }
        }
    }
    violations
}

#[test]
fn jobs_never_run_beyond_their_lock_under_ctrl_z_and_kills() {
    let server = RedisServer::start();
    let tmp = Arc::new(Tmp::new("history"));
    std::fs::write(tmp.path("history"), "").expect("history file");
    let secs: u64 = std::env::var("CLI_HISTORY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let book = Arc::new(Mutex::new(Book::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..7)
        .map(|w| {
            let (url, tmp, book, stop) = (
                server.url(),
                Arc::clone(&tmp),
                Arc::clone(&book),
                Arc::clone(&stop),
            );
            // 3 workers on the lock, 4 on the two permits.
            let name = if w < 3 { NAMES[0] } else { NAMES[1] };
            thread::spawn(move || worker(url, tmp, book, stop, w, name))
        })
        .collect();
    let seed = u64::from(std::process::id()) | 1;
    chaos(
        &server,
        &tmp,
        &book,
        Instant::now() + Duration::from_secs(secs),
        seed,
    );
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("worker");
    }
    // Background beats of the last jobs.
    thread::sleep(Duration::from_millis(1000));

    let history = std::fs::read_to_string(tmp.path("history")).expect("history");
    let jobs = intervals(&history);
    let book = book.lock().expect("book");
    // A run alive during a pause (or up to a lease after it) may have lost
    // its lease to it: its exit code is not checked.
    let paused = |id: &String| {
        book.lives.get(id).is_some_and(|(from, to)| {
            book.pauses
                .iter()
                .any(|(p, q)| *from <= *q + Duration::from_secs(2) && *to >= *p)
        })
    };
    let unfaulted_failures: Vec<_> = book
        .exits
        .iter()
        .filter(|(id, _, code)| !book.faulted.contains(id) && !paused(id) && *code != Some(0))
        .collect();
    // A job is continued after a stop only while its lease is certainly
    // held: it is not found lost right after (unless a pause took it).
    let continued: HashSet<&str> = history
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("cont"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let resumed_then_lost: Vec<_> = book
        .exits
        .iter()
        .filter(|(id, _, code)| {
            *code == Some(124) && continued.contains(id.as_str()) && !paused(id)
        })
        .map(|(id, _, _)| id.clone())
        .collect();
    let slow_terms: Vec<_> = book
        .termed
        .iter()
        .filter_map(|(id, at)| {
            let ended = book.lives.get(id)?.1;
            (ended.saturating_duration_since(*at) > TERM_WITHIN)
                .then(|| (id.clone(), ended.saturating_duration_since(*at)))
        })
        .collect();
    let violations = exclusion_violations(&jobs);
    if std::env::var("CLI_HISTORY_DEBUG").is_ok() {
        eprintln!("{history}");
        eprintln!("{:?}", book.exits);
    }
    eprintln!(
        "cli history (seed {seed}): {} runs, {} jobs started, {} events, faults {:?}, \
         exclusion violations {}, unfaulted runs not exiting 0: {}, continued then lost: {}, \
         wrappers slow to end on SIGTERM: {}",
        book.exits.len(),
        jobs.len(),
        history.lines().count(),
        book.faults,
        violations.len(),
        unfaulted_failures.len(),
        resumed_then_lost.len(),
        slow_terms.len()
    );
    if !violations.is_empty() {
        // The first offender's story, for the reader.
        let first = violations[0]
            .split([':', ',', ' '])
            .find(|w| w.starts_with('w'));
        if let Some(id) = first {
            let events: Vec<&str> = history
                .lines()
                .filter(|l| l.starts_with(&format!("{id} ")))
                .collect();
            let exit = book.exits.iter().find(|(j, _, _)| j == id);
            eprintln!(
                "{id}: events {events:?}, exit {exit:?}, faulted {}",
                book.faulted.contains(id)
            );
        }
    }
    assert!(violations.is_empty(), "jobs ran at once: {violations:#?}");
    assert!(
        unfaulted_failures.is_empty(),
        "runs no fault touched did not exit 0: {unfaulted_failures:?}"
    );
    assert!(
        resumed_then_lost.is_empty(),
        "jobs continued after a stop, then found lost (continued without the lease): \
         {resumed_then_lost:?}"
    );
    assert!(
        slow_terms.is_empty(),
        "SIGTERMed during a release waiting on a paused server, wrappers ended late: {slow_terms:?}"
    );
    assert!(jobs.len() >= 10, "too few jobs ran: {}", jobs.len());
}

#[test]
fn the_checker_finds_overlaps_and_allows_permits() {
    let history = "a hist-lock start 10\na hist-lock end 20\nb hist-lock start 20\n\
                   b hist-lock beat 25\nb hist-lock end 30\nc hist-lock start 29\nc hist-lock end 40\n\
                   p hist-pool start 0\nq hist-pool start 1\np hist-pool end 9\nq hist-pool end 9\n";
    let violations = exclusion_violations(&intervals(history));
    assert_eq!(violations, ["hist-lock: b, c at once"]);
    let three = "p hist-pool start 0\nq hist-pool start 1\nr hist-pool start 2\n\
                 p hist-pool end 9\nq hist-pool end 9\nr hist-pool end 9\n";
    assert_eq!(exclusion_violations(&intervals(three)).len(), 1);
    // A job with a single event (killed right after its start) closes.
    let single = "a hist-lock start 5\nb hist-lock start 6\nb hist-lock end 8\n";
    assert!(exclusion_violations(&intervals(single)).is_empty());
}
