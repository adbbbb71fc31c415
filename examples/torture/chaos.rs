//! The supervisor's side: its state (`Supervisor`, `WorkerProc`), and the
//! chaos actions of a run, one at a time (`chaos`): which fault comes next
//! and each kind (kills of workers, connection kills, pauses and stops of
//! Redis, a fenced run's stops and kills of the workers themselves), each
//! recorded as a fault in the history (`fault_begin`, `fault_end`), with
//! the intervals they may disturb (`paused_within`, `disrupted`).
//!
//! `chaos/processes.rs` starts, buries, restarts and stops the workers;
//! `failover.rs` holds the chaos of a cluster run.

mod processes;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command};
use std::sync::atomic::AtomicBool;
use std::thread::{self, JoinHandle};

use crate::failover::ClusterState;
use crate::fenced_jvm::FencedJvm;
use crate::history::{History, sup_event};
use crate::sem_supervisor;
use crate::summary::SharedStats;
use crate::worker::Book;
use crate::{LEASE_MS, LockKind, Rng, SHORT_PAUSE_MAX_MS, WORKERS, ms, now_ms};

/// How long after a chaos action a fair waiter may be held up by it (ms):
/// a dead holder's lease, a missed wake-up (a waiter polls at the holder's
/// TTL, at most a lease), a reconnection after a response timeout.
const KILL_EFFECT_MS: u64 = LEASE_MS + 1000;
const CONN_KILL_EFFECT_MS: u64 = 1500;
const PUBSUB_KILL_EFFECT_MS: u64 = LEASE_MS + 1000;
const PAUSE_EFFECT_MS: u64 = 1000;

pub struct WorkerProc {
    pub generation: u32,
    pub instance: String,
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub reader: Option<JoinHandle<()>>,
}

pub struct Supervisor {
    pub exe: PathBuf,
    pub url: String,
    pub kind: LockKind,
    pub log_dir: PathBuf,
    pub stats: SharedStats,
    pub redis: Book,
    pub never: AtomicBool,
    pub workers: Vec<WorkerProc>,
    /// Instance -> when it was known dead (after `wait`).
    pub dead_at: HashMap<String, u64>,
    /// (lock, kill time): the killed process held that lock.
    pub killed_holds: Vec<(String, u64)>,
    /// Intervals (ms) during which Redis was paused or stopped, with whether
    /// the pause was longer than the lease.
    pub pauses: Vec<(u64, u64, bool)>,
    /// Intervals (ms) during which a chaos action may hold up a fair waiter.
    pub disruptions: Vec<(u64, u64)>,
    pub kills: u64,
    pub unexpected_exits: Vec<String>,
    pub conn_kills: u64,
    pub pubsub_kills: u64,
    pub client_pauses: u64,
    pub sigstops: u64,
    /// Dead processes' entries removed from fair queues.
    pub reaped_waiters: u64,
    /// The supervisor's client in a semaphore run (`semaphore.rs`).
    pub sem: Option<redisson_lock::Client>,
    /// Dead workers' permits returned and in-flight operations made ambiguous.
    pub reclaims: sem_supervisor::Reclaims,
    /// The interop driver's jar for a JVM worker in a semaphore run, and
    /// that worker (`jvm.rs`).
    pub java_jar: Option<PathBuf>,
    pub java: Option<crate::jvm::JavaWorker>,
    /// A fenced run's JVM workers (`fenced_jvm.rs`): one per jar.
    pub fenced_jars: Vec<PathBuf>,
    pub fenced_javas: Vec<FencedJvm>,
    /// The run's history (`history.rs`), if it keeps one, and its file.
    pub history: Option<History>,
    pub history_path: Option<PathBuf>,
    /// Faults recorded in the history (their ids).
    pub faults: u64,
    /// SIGSTOPs of workers, SIGKILLs of JVM workers (fenced runs).
    pub worker_stops: u64,
    pub java_kills: u64,
    /// Some pauses and stops outlast the lease (`--beyond-lease`).
    pub beyond_lease: bool,
    /// The cluster of a `--cluster` run (`failover.rs`).
    pub cluster: Option<ClusterState>,
}

/// Thaws redis-server if the supervisor dies while it is stopped.
pub struct ContinueOnDrop(pub Option<u32>);

impl Drop for ContinueOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            signal(pid, "CONT");
        }
    }
}

pub fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

impl Supervisor {
    pub fn kill_worker(&mut self, slot: usize) -> std::io::Result<()> {
        let instance = self.workers[slot].instance.clone();
        let fault = self.fault_begin("kill-rust", &format!("target={instance}"));
        let worker = &mut self.workers[slot];
        let killed_at = now_ms();
        worker.child.kill()?;
        worker.child.wait()?;
        let died = now_ms();
        let generation = worker.generation;
        self.fault_end("kill-rust", fault);
        sup_event(
            self.history.as_ref(),
            format_args!("process exit target={instance} how=sigkill"),
        );
        self.kills += 1;
        self.bury(&instance, died, killed_at);
        self.disruptions
            .push((killed_at, now_ms() + KILL_EFFECT_MS));
        self.workers[slot] = self.spawn_worker(slot, generation + 1)?;
        Ok(())
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

    pub fn chaos(&mut self, rng: &mut Rng, redis_pid: Option<u32>) -> std::io::Result<()> {
        if self.kind == LockKind::Fenced && rng.percent(30) {
            return self.process_chaos(rng);
        }
        if self.cluster.is_some() {
            return self.cluster_chaos(rng);
        }
        let start = now_ms();
        match rng.below(100) {
            0..=24 => {
                let slot = rng.below(WORKERS as u64) as usize;
                self.kill_worker(slot)?;
            }
            25..=44 => {
                let fault = self.fault_begin("conn-kill", "");
                let never = &self.never;
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
                        .query::<i64>(con)
                });
                self.fault_end("conn-kill", fault);
                self.conn_kills += 1;
                self.disruptions
                    .push((start, now_ms() + CONN_KILL_EFFECT_MS));
            }
            45..=59 => {
                let fault = self.fault_begin("pubsub-kill", "");
                let never = &self.never;
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "pubsub"])
                        .query::<i64>(con)
                });
                self.fault_end("pubsub-kill", fault);
                self.pubsub_kills += 1;
                self.disruptions
                    .push((start, now_ms() + PUBSUB_KILL_EFFECT_MS));
            }
            60..=79 => {
                let (pause, long) = self.pause_length(rng);
                let kind = if long {
                    "redis-pause-long"
                } else {
                    "redis-pause"
                };
                let fault = self.fault_begin(kind, &format!("ms={pause}"));
                let never = &self.never;
                self.redis.retry(never, |con| {
                    redis::cmd("CLIENT")
                        .arg("PAUSE")
                        .arg(pause)
                        .arg("ALL")
                        .query::<()>(con)
                });
                self.pauses.push((start, start + pause, long));
                self.disruptions
                    .push((start, start + pause + PAUSE_EFFECT_MS));
                self.client_pauses += 1;
                self.idle(ms(pause))?;
                self.fault_end(kind, fault);
            }
            _ => {
                let Some(pid) = redis_pid else {
                    return Ok(());
                };
                let (pause, long) = self.pause_length(rng);
                let kind = if long {
                    "redis-stop-long"
                } else {
                    "redis-stop"
                };
                let fault = self.fault_begin(kind, &format!("ms={pause}"));
                signal(pid, "STOP");
                thread::sleep(ms(pause));
                signal(pid, "CONT");
                self.fault_end(kind, fault);
                let end = now_ms();
                self.pauses.push((start, end, long));
                self.disruptions.push((start, end + PAUSE_EFFECT_MS));
                self.sigstops += 1;
            }
        }
        Ok(())
    }

    /// Records the start of a fault in the history; returns its id.
    pub fn fault_begin(&mut self, kind: &str, detail: &str) -> u64 {
        self.faults += 1;
        sup_event(
            self.history.as_ref(),
            format_args!("fault invoke type={kind} id={} {detail}", self.faults),
        );
        self.faults
    }

    pub fn fault_end(&self, kind: &str, id: u64) {
        sup_event(
            self.history.as_ref(),
            format_args!("fault ok type={kind} id={id}"),
        );
    }

    /// A fenced run's chaos on the workers themselves: a SIGSTOP of a Rust
    /// or JVM worker (within a third of the lease; with `--beyond-lease`, a
    /// third of a Rust worker's stops last longer than the lease), or a
    /// SIGKILL of a JVM worker, started again at once.
    fn process_chaos(&mut self, rng: &mut Rng) -> std::io::Result<()> {
        let javas = self.fenced_javas.len() as u64;
        if javas > 0 && rng.percent(25) {
            let slot = rng.below(javas) as usize;
            return self.kill_java(slot);
        }
        let slot = rng.below(WORKERS as u64 + javas) as usize;
        let (pid, instance, java) = match slot.checked_sub(WORKERS) {
            None => {
                let worker = &self.workers[slot];
                (worker.child.id(), worker.instance.clone(), false)
            }
            Some(j) => {
                let jvm = &self.fenced_javas[j];
                (jvm.pid(), jvm.instance.clone(), true)
            }
        };
        let (pause, long) = if java {
            (rng.range(100, SHORT_PAUSE_MAX_MS), false)
        } else {
            self.pause_length(rng)
        };
        let kind = match (java, long) {
            (true, _) => "sigstop-java",
            (false, false) => "sigstop-rust",
            (false, true) => "sigstop-rust-long",
        };
        let fault = self.fault_begin(kind, &format!("target={instance} ms={pause}"));
        signal(pid, "STOP");
        thread::sleep(ms(pause));
        signal(pid, "CONT");
        self.fault_end(kind, fault);
        self.worker_stops += 1;
        let start = now_ms();
        self.disruptions
            .push((start - pause, start + PAUSE_EFFECT_MS));
        Ok(())
    }

    /// SIGKILLs a fenced run's JVM worker and starts a new one in its slot.
    pub fn kill_java(&mut self, slot: usize) -> std::io::Result<()> {
        let instance = self.fenced_javas[slot].instance.clone();
        let fault = self.fault_begin("kill-java", &format!("target={instance}"));
        let killed_at = now_ms();
        self.fenced_javas[slot].kill();
        self.fault_end("kill-java", fault);
        sup_event(
            self.history.as_ref(),
            format_args!("process exit target={instance} how=sigkill"),
        );
        self.java_kills += 1;
        self.disruptions
            .push((killed_at, now_ms() + KILL_EFFECT_MS));
        let next = self.fenced_javas[slot].generation + 1;
        let jvm = self.spawn_java(slot, next, false)?;
        self.fenced_javas[slot] = jvm;
        Ok(())
    }

    /// Milliseconds of `[from, to]` during which Redis was paused or
    /// stopped, or a cluster failover was in progress.
    pub fn paused_within(&self, from: u64, to: u64) -> u64 {
        let outages = self.cluster.iter().flat_map(|c| c.outages.iter().copied());
        self.pauses
            .iter()
            .map(|&(start, end, _)| (start, end))
            .chain(outages)
            .map(|(start, end)| to.min(end).saturating_sub(from.max(start)))
            .sum()
    }

    pub fn after_long_pause(&self, at: u64) -> bool {
        self.pauses
            .iter()
            .any(|&(start, end, long)| long && start <= at && at <= end + 5000)
    }

    /// Whether a chaos action may have held up anything during `[from, to]`.
    pub fn disrupted(&self, from: u64, to: u64) -> bool {
        self.disruptions
            .iter()
            .any(|&(start, end)| start <= to && from <= end)
    }
}
