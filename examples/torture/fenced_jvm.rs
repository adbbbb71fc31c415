//! A fenced run's JVM workers (`--kind fenced --java-jar <jar>...`): one
//! interop driver process (`interop/java`, real Redisson) per jar, each
//! with `FENCED_ACTORS` actors running `fenced.torture`
//! (`interop/java/.../FencedOps.java`) on the same fenced locks as the Rust
//! workers: `getFencedLock(name)`'s `lockAndGetToken()`,
//! `tryLockAndGetToken(...)` and `lockAndGetToken(lease)`, a short section,
//! `unlock()`, every step recorded in the history as the Rust workers do.
//! The chaos SIGSTOPs them (within a third of the lease: Redisson has no
//! lost signal to give a holder frozen past its lease) and SIGKILLs them (a
//! new JVM takes the slot, `j<slot>g<generation>`). With `--beyond-lease`
//! every Java acquisition takes an explicit lease (`lease-only`): Redisson's
//! watchdog says nothing when a renewal fails, so a Java holder knows when
//! its lock may be gone only from a lease it chose (its own clock). Asked to stop with
//! `ctl fenced.stop`, each actor finishes its iteration and answers.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::history::{History, sup_event};
use crate::summary::{SharedStats, stats_of};
use crate::{EXPLICIT_LEASE_MIN_MS, LEASE_MS, NAMES, STOP_WAIT, ms};

pub const FENCED_ACTORS: usize = 3;

pub struct FencedJvm {
    pub generation: u32,
    pub instance: String,
    child: Child,
    stdin: Option<ChildStdin>,
    reader: Option<JoinHandle<()>>,
    /// One message per actor whose `fenced.torture` answered (true: OK).
    answers: mpsc::Receiver<bool>,
}

/// `redisson-driver-<version>.jar` -> `<version>`.
fn version_of(jar: &Path) -> String {
    jar.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.strip_prefix("redisson-driver-"))
        .unwrap_or("unknown")
        .to_owned()
}

impl FencedJvm {
    /// Starts the driver (`target`: a `redis://` URL or `cluster:<seeds>`)
    /// and its actors; with `wait_ready`, first waits for it to be ready (a
    /// minute at most). The actors' commands wait in its stdin meanwhile.
    pub fn spawn(
        jar: &Path,
        target: &str,
        log_dir: &Path,
        stats: &SharedStats,
        history: Option<&History>,
        (slot, generation): (usize, u32),
        (wait_ready, lease_only): (bool, bool),
    ) -> std::io::Result<FencedJvm> {
        let instance = format!("j{slot}g{generation}");
        let version = version_of(jar);
        let log = File::options()
            .create(true)
            .append(true)
            .open(log_dir.join(format!("java-{slot}.log")))?;
        let target = target.trim_end_matches('/');
        let mut child = Command::new("java")
            .arg("-Xmx256m")
            .arg("-jar")
            .arg(jar)
            .arg(target)
            .arg(LEASE_MS.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()?;
        sup_event(
            history,
            format_args!(
                "process start target={instance} impl=java version={version} pid={}",
                child.id()
            ),
        );
        let stdout = child.stdout.take().expect("piped stdout");
        let (ready_tx, ready_rx) = mpsc::channel();
        let (answer_tx, answers) = mpsc::channel();
        let stats = std::sync::Arc::clone(stats);
        let history = history.cloned();
        let reader_instance = instance.clone();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let first = line.split(' ').next().unwrap_or("");
                match first {
                    "H" => {
                        if let Some(history) = &history {
                            history.line(&line[2..]);
                        }
                    }
                    "READY" => {
                        let mut words = line.split(' ').skip(1);
                        let (version, client) = (words.next(), words.next());
                        sup_event(
                            history.as_ref(),
                            format_args!(
                                "process ready target={reader_instance} version={} client={}",
                                version.unwrap_or("?"),
                                client.unwrap_or("?")
                            ),
                        );
                        let _ = ready_tx.send(());
                    }
                    "A" | "S" | "E" => stats_of(&stats).record(&reader_instance, &line),
                    _ if line.contains(" fenced.torture OK") => {
                        let _ = answer_tx.send(true);
                    }
                    _ if line.contains(" fenced.torture ERR") => {
                        let _ = answer_tx.send(false);
                        let mut stats = stats_of(&stats);
                        stats.panic_lines.push(format!("{reader_instance}: {line}"));
                        stats.panicked_instances.insert(reader_instance.clone());
                    }
                    _ if line == "BYE" || line.starts_with("ctl fenced.stop") => {}
                    _ => eprintln!("torture: {reader_instance}: {line}"),
                }
            }
        });
        let mut jvm = FencedJvm {
            generation,
            instance,
            stdin: child.stdin.take(),
            child,
            reader: Some(reader),
            answers,
        };
        if wait_ready && ready_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            jvm.kill();
            return Err(std::io::Error::other(format!(
                "the Java driver {} was not ready within 60 s (see java-{slot}.log)",
                jar.display()
            )));
        }
        let names = NAMES.join(",");
        let stdin = jvm.stdin.as_mut().expect("piped stdin");
        for actor in 0..FENCED_ACTORS {
            writeln!(
                stdin,
                "a{actor} fenced.torture {}/a{actor} {names} {LEASE_MS} {EXPLICIT_LEASE_MIN_MS}{}",
                jvm.instance,
                if lease_only { " lease-only" } else { "" }
            )?;
        }
        stdin.flush()?;
        Ok(jvm)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits for it and its reader.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stdin.take();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    /// Asks the actors to stop and waits for their answers, then for the
    /// driver to exit. Returns 1 if it hung.
    pub fn stop(&mut self, history: Option<&History>) -> u64 {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(b"ctl fenced.stop\n");
            let _ = stdin.flush();
        }
        let deadline = Instant::now() + STOP_WAIT;
        let mut answered = 0;
        while answered < FENCED_ACTORS {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(_) => answered += 1,
                Err(_) => break,
            }
        }
        let hung = answered < FENCED_ACTORS;
        if hung {
            eprintln!(
                "torture: only {answered} of {FENCED_ACTORS} actors of {} stopped within {STOP_WAIT:?}",
                self.instance
            );
        }
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"- quit\n");
        }
        let exit_by = Instant::now() + Duration::from_secs(10);
        while Instant::now() < exit_by {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(ms(50));
        }
        self.kill();
        sup_event(
            history,
            format_args!(
                "process exit target={} how={}",
                self.instance,
                if hung { "hung" } else { "stopped" }
            ),
        );
        u64::from(hung)
    }
}
