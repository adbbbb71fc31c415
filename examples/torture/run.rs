//! The supervisor's run: start the workers, chaos for the run's duration,
//! stop the workers, look for leftovers, print the summary line.

use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;

use crate::chaos::{ContinueOnDrop, Supervisor};
use crate::history::sup_event;
use crate::summary::{Summary, stats_of, summarize};
use crate::{LEASE_MS, LockKind, NAMES, Rng, WORKERS, fair_queue_key, ms, now_ms};
use crate::{checker, jvm, sem_supervisor};

/// How often a semaphore run takes a census (`sem_supervisor::census`), at
/// the latest: also after every connection kill.
const CENSUS_EVERY: Duration = Duration::from_secs(8);

pub fn run(
    mut sup: Supervisor,
    redis_pid: Option<u32>,
    chaos_for: Duration,
) -> std::io::Result<bool> {
    let _thaw = ContinueOnDrop(redis_pid);
    std::fs::create_dir_all(&sup.log_dir)?;
    let mut rng = Rng::seeded(0);
    let url = sup.url.clone();
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
    if sup.kind == LockKind::Semaphore {
        let client = sem_supervisor::supervisor_client(&url)
            .and_then(|client| sem_supervisor::set_up(&client).map(|()| client))
            .map_err(|e| std::io::Error::other(format!("setting the semaphores up: {e}")))?;
        sup.sem = Some(client);
    }
    for slot in 0..WORKERS {
        let worker = sup.spawn_worker(slot, 0)?;
        sup.workers.push(worker);
    }
    if let Some(jar) = sup.java_jar.clone() {
        eprintln!("torture: starting a JVM worker ({})", jar.display());
        sup.java = Some(jvm::spawn(&jar, &url, &sup.log_dir, &sup.stats)?);
    }
    for slot in 0..sup.fenced_jars.len() {
        eprintln!(
            "torture: starting a JVM worker ({})",
            sup.fenced_jars[slot].display()
        );
        let jvm = sup.spawn_java(slot, 0, true)?;
        sup.fenced_javas.push(jvm);
    }
    // Let the workers get going before the chaos starts.
    sup.idle(ms(1000))?;
    let started = Instant::now();
    let chaos_start = now_ms();
    let mut next_progress = started + Duration::from_secs(15);
    let mut next_census = started + CENSUS_EVERY;
    let mut censuses = 0;
    while started.elapsed() < chaos_for {
        sup.idle(ms(rng.range(300, 2500)))?;
        if started.elapsed() >= chaos_for {
            break;
        }
        if sup.kind == LockKind::Semaphore && Instant::now() >= next_census {
            censuses += 1;
            sem_supervisor::census(&mut sup, censuses);
            next_census = Instant::now() + CENSUS_EVERY;
            continue;
        }
        let conn_kills = sup.conn_kills;
        sup.chaos(&mut rng, redis_pid)?;
        if sup.conn_kills > conn_kills {
            // Lost replies to releases may have drained a semaphore: the
            // next census (after the next idle spell) gives the permits back.
            next_census = Instant::now();
        }
        if Instant::now() >= next_progress {
            next_progress += Duration::from_secs(15);
            let stats = stats_of(&sup.stats);
            let failovers = sup.cluster.as_ref().map_or_else(String::new, |c| {
                format!(
                    " coordinated_failovers={} master_kills={}",
                    c.coordinated, c.master_kills
                )
            });
            eprintln!(
                "torture: {:>4}s sections={} overlap_reports={} lost_signals={} kills={} conn_kills={} pubsub_kills={} pauses={} stops={} errors={}{failovers}",
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
    // A failover in progress is followed to its end first.
    sup.finish_failover()?;
    let chaos_end = now_ms();
    // Calm down, then let every worker finish its section and exit.
    sup.idle(ms(500))?;
    if sup.kind == LockKind::Semaphore {
        // The permits ambiguous operations took during the chaos are
        // accounted for and given back before the final rounds.
        sem_supervisor::census(&mut sup, censuses + 1);
    }
    let mut hangs = 0;
    if let Some(mut java) = sup.java.take() {
        hangs += jvm::stop(&mut java, &mut sup.redis);
    }
    for mut jvm in std::mem::take(&mut sup.fenced_javas) {
        hangs += jvm.stop(sup.history.as_ref());
    }
    hangs += sup.stop_workers();
    sup_event(sup.history.as_ref(), format_args!("process end target=run"));
    let duration = started.elapsed();
    // A lock released by an unlock that failed expires within a lease.
    thread::sleep(ms(LEASE_MS + 500));
    let (leftover_locks, stale_queue_entries) = leftovers(&mut sup);

    let shared = std::sync::Arc::clone(&sup.stats);
    let stats = stats_of(&shared);
    let (sem_failures, sem_columns, sem_info) = if sup.kind == LockKind::Semaphore {
        sem_supervisor::verdict(&mut sup, &stats)
    } else {
        (0, String::new(), String::new())
    };
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
        sup.log_dir.display()
    );
    // Beyond the lease, an overlap is the hazard every lease lock has; the
    // lock's duty is the lost signal, which `without_signal` checks.
    // In a cluster, a signalled overlap after a master's kill -9 is the
    // failover-before-replication hazard (with a lease shorter than the
    // failover, the lease ran out too); any other overlap is a failure.
    let overlap_failures = if sup.beyond_lease {
        0
    } else {
        summary.overlaps.saturating_sub(summary.after_master_kill)
    };
    let stuck = sup.cluster.as_ref().map_or(0, |c| c.stuck);
    let phantoms = stats.phantom_counts.len() as u64;
    let (history_failures, history_columns) = check_history(&sup)?;
    let failures = overlap_failures
        + summary.without_signal
        + summary.slow_waits
        + panics
        + summary.stalls
        + summary.undetected
        + hangs
        + leftover_locks
        + phantoms
        + summary.unfair_waits
        + stuck
        + sem_failures
        + history_failures;
    let kind_columns = match sup.kind {
        LockKind::Reentrant => String::new(),
        LockKind::Rw => format!(", read_sections={}", stats.read_sections),
        LockKind::Fair => fair_columns(&summary, &sup, stale_queue_entries),
        LockKind::Semaphore => sem_info,
        LockKind::Fenced => format!(
            ", worker_stops={}, java_kills={}, java={}",
            sup.worker_stops,
            sup.java_kills,
            if sup.fenced_jars.is_empty() {
                "none".to_owned()
            } else {
                let versions: Vec<String> = sup
                    .fenced_jars
                    .iter()
                    .map(|jar| {
                        jar.file_stem()
                            .and_then(|s| s.to_str())
                            .and_then(|s| s.strip_prefix("redisson-driver-"))
                            .unwrap_or("?")
                            .to_owned()
                    })
                    .collect();
                format!("{}/{}sections", versions.join("+"), stats.java_sections)
            }
        ),
    };
    let mut unfair = if sup.kind == LockKind::Fair {
        format!(" unfair_waits={}", summary.unfair_waits)
    } else {
        sem_columns
    };
    unfair.push_str(&history_columns);
    let mut kind_columns = kind_columns;
    if let Some(cluster) = &sup.cluster {
        unfair.push_str(&format!(" stuck_failovers={stuck}"));
        kind_columns.push_str(&format!(
            ", topology=cluster, coordinated_failovers={}, master_kills={}, \
             overlaps_after_master_kill={}, unplanned_failovers={}",
            cluster.coordinated, cluster.master_kills, summary.after_master_kill, cluster.unplanned
        ));
    }
    println!(
        "torture: sections={} overlaps={} overlaps_without_lost_signal={} slow_waits={} panics={} \
         stalls={} undetected_overlaps={} phantom_counts={} hangs={} leftover_locks={}{unfair} \
         (kind={}, mode={}, duration {}s, kills={}, conn_kills={}, pubsub_kills={}, pauses={}, stops={}, \
         overlaps_after_long_pause={}, unresolved_overlaps={}, dead_holder_overlaps={}, lost_signals={}, \
         max_wait_after_kill={}ms, errors={}{kind_columns})",
        summary.sections,
        summary.overlaps,
        summary.without_signal,
        summary.slow_waits,
        panics,
        summary.stalls,
        summary.undetected,
        phantoms,
        hangs,
        leftover_locks,
        sup.kind.as_str(),
        if sup.beyond_lease {
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

/// Runs the checker on the run's history (`checker.rs`): its violations
/// (failures) and the summary's column.
fn check_history(sup: &Supervisor) -> std::io::Result<(u64, String)> {
    let (Some(history), Some(path)) = (&sup.history, &sup.history_path) else {
        return Ok((0, String::new()));
    };
    history.flush();
    let report = checker::check_file(path)?;
    checker::print(&report);
    eprintln!("torture: history in {}", path.display());
    let violations = report.violation_count();
    Ok((violations, format!(" history_violations={violations}")))
}

fn fair_columns(summary: &Summary, sup: &Supervisor, stale_queue_entries: u64) -> String {
    format!(
        ", fair_waits_checked={}, fair_waits_skipped={}, worst_fair_wait={}%, reaped_waiters={}, stale_queue_entries={}",
        summary.fair_checked,
        summary.fair_skipped,
        summary.fair_worst_percent,
        sup.reaped_waiters,
        stale_queue_entries
    )
}

/// Lock keys and reader markers left after every worker stopped (failures),
/// and fair queue entries left (information: they age out).
fn leftovers(sup: &mut Supervisor) -> (u64, u64) {
    let mut leftover_locks = 0;
    let mut stale_queue_entries = 0;
    for name in NAMES {
        // A semaphore's key stays (with its permits).
        if sup.kind != LockKind::Semaphore
            && sup.on_lock_key(name, |con| con.exists::<_, bool>(name)) == Some(true)
        {
            eprintln!("torture: LEFTOVER LOCK {name} a lease after every worker stopped");
            leftover_locks += 1;
        }
        if sup.kind == LockKind::Fair {
            let queue = fair_queue_key(name);
            let entries = sup
                .on_lock_key(&queue, |con| con.llen::<_, u64>(&queue))
                .unwrap_or(0);
            if entries > 0 {
                eprintln!("torture: {entries} stale entries in {queue}");
            }
            stale_queue_entries += entries;
        }
    }
    if sup.kind == LockKind::Rw {
        let markers: Vec<String> = sup
            .on_lock_servers(|con| {
                con.scan_match::<_, String>("*rwlock_timeout*")
                    .and_then(|iter| iter.collect::<redis::RedisResult<Vec<String>>>())
            })
            .concat();
        for marker in &markers {
            eprintln!("torture: LEFTOVER READER MARKER {marker}");
        }
        leftover_locks += markers.len() as u64;
    }
    (leftover_locks, stale_queue_entries)
}
