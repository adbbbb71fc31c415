//! The JVM worker of a semaphore run (`--java-jar <driver jar>`): one
//! interop driver process (`interop/java`, real Redisson) whose
//! `JAVA_ACTORS` actors run `sem.torture` (`SemTorture.java`) on the same
//! semaphores, ledger and occupancy sets as the Rust workers, printing the
//! same event lines. The chaos kills its connections and pauses or stops
//! Redis under it, but does not SIGKILL it (a JVM takes seconds to start).
//! It is asked to stop by the key `STOP_KEY`; its actors then do their final
//! round and answer.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis::Commands;

use crate::semaphore::PERMITS;
use crate::summary::{SharedStats, stats_of};
use crate::worker::Book;
use crate::{LEASE_MS, NAMES, STOP_WAIT, dead_key, ms};

pub const JAVA_ACTORS: usize = 4;
pub const JAVA_INSTANCE: &str = "j0";
pub const STOP_KEY: &str = "torture:stop";

pub struct JavaWorker {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<()>>,
    /// One message per actor whose `sem.torture` answered (true: OK).
    answers: mpsc::Receiver<bool>,
}

/// Starts the driver, waits for it to be ready (a minute at most: a JVM on a
/// busy machine) and starts its actors.
pub fn spawn(
    jar: &Path,
    url: &str,
    log_dir: &Path,
    stats: &SharedStats,
) -> std::io::Result<JavaWorker> {
    let log = File::create(log_dir.join("java.log"))?;
    let mut child = Command::new("java")
        .arg("-jar")
        .arg(jar)
        .arg(url.trim_end_matches('/'))
        .arg(LEASE_MS.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready_tx, ready_rx) = mpsc::channel();
    let (answer_tx, answers) = mpsc::channel();
    let stats = std::sync::Arc::clone(stats);
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let first = line.split(' ').next().unwrap_or("");
            if first == "READY" {
                let _ = ready_tx.send(());
            } else if matches!(first, "A" | "X" | "U" | "S" | "F" | "E") {
                stats_of(&stats).record(JAVA_INSTANCE, &line);
            } else if line.contains(" sem.torture OK") {
                let _ = answer_tx.send(true);
            } else if line.contains(" sem.torture ERR") {
                let _ = answer_tx.send(false);
                let mut stats = stats_of(&stats);
                stats.panic_lines.push(format!("java: {line}"));
                stats.panicked_instances.insert(JAVA_INSTANCE.to_owned());
            } else if line != "BYE" {
                eprintln!("torture: java: {line}");
            }
        }
    });
    let mut worker = JavaWorker {
        child,
        stdin: None,
        reader: Some(reader),
        answers,
    };
    worker.stdin = worker.child.stdin.take();
    if ready_rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = worker.child.kill();
        let _ = worker.child.wait();
        return Err(std::io::Error::other(
            "the Java driver was not ready within 60 s (see java.log)",
        ));
    }
    let names = NAMES.join(",");
    let dead = dead_key("");
    let stdin = worker.stdin.as_mut().expect("piped stdin");
    for actor in 0..JAVA_ACTORS {
        writeln!(
            stdin,
            "a{actor} sem.torture {JAVA_INSTANCE}/a{actor} {names} {PERMITS} {STOP_KEY} {dead}"
        )?;
    }
    stdin.flush()?;
    Ok(worker)
}

/// Asks the actors to stop and waits for their answers (each after its
/// final round), then for the driver to exit. Returns 1 if it hung.
pub fn stop(worker: &mut JavaWorker, book: &mut Book) -> u64 {
    let never = std::sync::atomic::AtomicBool::new(false);
    book.retry(&never, |con| con.set::<_, _, ()>(STOP_KEY, 1));
    let deadline = Instant::now() + STOP_WAIT;
    let mut answered = 0;
    while answered < JAVA_ACTORS {
        let left = deadline.saturating_duration_since(Instant::now());
        match worker.answers.recv_timeout(left) {
            Ok(_) => answered += 1,
            Err(_) => break,
        }
    }
    let hung = answered < JAVA_ACTORS;
    if hung {
        eprintln!(
            "torture: only {answered} of {JAVA_ACTORS} Java actors stopped within {STOP_WAIT:?}"
        );
    }
    if let Some(mut stdin) = worker.stdin.take() {
        let _ = stdin.write_all(b"- quit\n");
    }
    let exit_by = Instant::now() + Duration::from_secs(10);
    while Instant::now() < exit_by {
        if let Ok(Some(_)) = worker.child.try_wait() {
            break;
        }
        thread::sleep(ms(50));
    }
    let _ = worker.child.kill();
    let _ = worker.child.wait();
    if let Some(reader) = worker.reader.take() {
        let _ = reader.join();
    }
    u64::from(hung)
}
