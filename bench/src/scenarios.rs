//! The scenarios, run by one process for one contender. Each prints one JSON
//! line on stdout; `contended` also writes its events for `analyze`.

use std::io::Write;
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::analyze::Event;
use crate::common::{
    Args, count_live_bytes, cpu_ns, critical_section, live_bytes, mono_ns, ms, percentile,
    redis_barrier, rss_bytes, together, us,
};
use crate::contenders::{Contender, Factory, current_thread_runtime};
use crate::lock_types::BenchedLock;
use crate::session::{counted_pairs, timed_pairs, warm_up};

pub fn run(args: &Args) -> Result<()> {
    let paired = args.str("scenario")?;
    // `paired_many` (issue 36: the thread curve to 1,024) is the paired
    // measurement under its own name; `--delay-us` records the delay proxy's
    // one-way delay when the connections go through it (scenario 9).
    if matches!(paired, "paired" | "paired_many" | "cluster_paired") {
        let mut out = match paired {
            "cluster_paired" => crate::cluster::run(args)?,
            _ => crate::paired::run(args)?,
        };
        out["delay_us"] = json!(args.num_or("delay-us", 0)?);
        out["scenario"] = json!(paired);
        out["contender"] = json!(args.str("contender")?);
        out["lock_type"] = json!(args.str_or("lock-type", "lock"));
        out["rep"] = json!(args.num_or("rep", 0)?);
        out["run_id"] = json!(args.str_or("run-id", "0"));
        println!("{out}");
        return Ok(());
    }
    let kind = Contender::parse(args.str("contender")?)?;
    let scenario = args.str("scenario")?;
    let url = args.str("url")?;
    let watchdog = Duration::from_millis(args.num_or("watchdog-ms", 30_000)?);
    let lock_type = BenchedLock::parse(args.str_or("lock-type", "lock"))?;
    let typed =
        || -> Result<Factory> { Ok(Factory::new(kind, url, watchdog)?.with_lock_type(lock_type)) };
    let mut out = match scenario {
        "family" => crate::family::run(&typed()?, args)?,
        "redlock" => crate::redlock::run(kind, args)?,
        "contended" if lock_type != BenchedLock::Lock => contended(&typed()?, args)?,
        "uncontended" => uncontended(&Factory::new(kind, url, watchdog)?, args)?,
        "scaled" => {
            // `--multiplexed N`: the crate's commands share N sockets.
            let multiplexed = args.multiplexed()?;
            let f = Factory::with_connections(kind, url, watchdog, multiplexed)?;
            let mut out = scaled(&f, args)?;
            out["multiplexed"] = json!(f.multiplexed());
            out["connections"] = json!(f.connections());
            out
        }
        "contended" => contended(&Factory::new(kind, url, watchdog)?, args)?,
        // `watchdog_scale`: scenario 4 for the crate at one size of issue
        // 36's curve (10k, 100k, 1M locks, 30 s lease), under its own name.
        "watchdog" | "watchdog_scale" if kind == Contender::Crate => crate_watchdog(url, args)?,
        "watchdog" if kind == Contender::Rslock => rslock_watchdog(url, args)?,
        "soak" if kind == Contender::Crate => crate::soak::run(url, args)?,
        "waiters" if kind == Contender::Crate => crate::waiters::run(url, args)?,
        "sync_contended" if matches!(kind, Contender::Floor | Contender::Crate) => {
            crate::sync_types::contended(url, kind == Contender::Floor, args)?
        }
        other => bail!("scenario {other} does not apply to {}", kind.name()),
    };
    out["scenario"] = json!(scenario);
    out["contender"] = json!(kind.name());
    out["lock_type"] = json!(args.str_or("lock-type", "lock"));
    out["rep"] = json!(args.num_or("rep", 0)?);
    out["run_id"] = json!(args.str_or("run-id", "0"));
    println!("{out}");
    Ok(())
}

/// Scenario 1: one thread, lock+unlock pairs on one name.
fn uncontended(f: &Factory, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0");
    let warmup = args.num_or("warmup", 2_000)?;
    let duration = Duration::from_millis(args.num_or("duration-ms", 3_000)?);
    let mut session = f.session(&format!("bench:s1:{run_id}"), 1, false)?;
    warm_up(session.as_mut(), warmup)?;
    let mut latencies = Vec::with_capacity(200_000);
    let cpu0 = cpu_ns();
    let start = Instant::now();
    timed_pairs(session.as_mut(), start + duration, &mut latencies)?;
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_ns() - cpu0;
    let pairs = latencies.len() as u64;
    latencies.sort_unstable();
    Ok(json!({
        "threads": 1,
        "pairs": pairs,
        "pairs_per_s": pairs as f64 / elapsed,
        "p50_us": us(percentile(&latencies, 0.50)),
        "p99_us": us(percentile(&latencies, 0.99)),
        "cpu_us_per_pair": us(cpu) / pairs.max(1) as f64,
    }))
}

/// Scenario 2: `threads` threads, each on its own name, for a fixed time.
fn scaled(f: &Factory, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0").to_owned();
    let threads = args.num_or("threads", 4)? as usize;
    let warmup = args.num_or("warmup", 500)?;
    let duration = Duration::from_millis(args.num_or("duration-ms", 3_000)?);
    let cpu0 = cpu_ns();
    let results: Vec<Result<(u64, f64)>> = together(
        threads,
        |t| {
            let name = format!("bench:s2:{run_id}:{t}");
            let mut session = f.session(&name, t as u64 + 1, false)?;
            warm_up(session.as_mut(), warmup)?;
            Ok(session)
        },
        |mut session, _| {
            let start = Instant::now();
            let pairs = counted_pairs(session.as_mut(), start + duration)?;
            Ok((pairs, start.elapsed().as_secs_f64()))
        },
    );
    let cpu = cpu_ns() - cpu0;
    let mut pairs = 0;
    let mut rate = 0.0;
    for r in results {
        let (p, secs) = r?;
        pairs += p;
        rate += p as f64 / secs;
    }
    Ok(json!({
        "threads": threads,
        "pairs": pairs,
        "pairs_per_s": rate,
        "cpu_us_per_pair": us(cpu) / pairs.max(1) as f64,
    }))
}

/// Scenario 3, one process of it: `threads` threads take one hot lock
/// `iterations` times each, holding it for `hold-us`; the events go to
/// `--events` for `analyze`, which merges the processes of a run.
fn contended(f: &Factory, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0").to_owned();
    let threads = args.num_or("threads", 4)? as usize;
    let iterations = args.num_or("iterations", 500)?;
    let warmup = args.num_or("warmup", 20)?;
    let hold = Duration::from_micros(args.num_or("hold-us", 100)?);
    let procs = args.num_or("procs", 1)?;
    let proc_index = args.num_or("proc-index", 0)? as usize;
    let events_path = args.str("events")?.to_owned();
    let hot = format!("bench:s3:{run_id}");
    let warm = format!("bench:s3w:{run_id}");

    let ready = Barrier::new(threads + 1);
    let go = Barrier::new(threads + 1);
    let mut control = f.plain_connection()?;
    let results: Vec<Result<Vec<Event>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (ready, go, hot, warm) = (&ready, &go, &hot, &warm);
                scope.spawn(move || -> Result<Vec<Event>> {
                    let thread = (proc_index * 1000 + t) as u64;
                    let setup = (|| -> Result<_> {
                        let mut warm_session = f.session(warm, thread + 1, true)?;
                        let hot_session = f.session(hot, thread + 1, true)?;
                        for _ in 0..warmup {
                            warm_session.lock()?;
                            critical_section(hold);
                            warm_session.unlock()?;
                        }
                        Ok(hot_session)
                    })();
                    ready.wait();
                    go.wait();
                    let mut session = setup?;
                    let mut events = Vec::with_capacity(iterations as usize);
                    for _ in 0..iterations {
                        let call = mono_ns();
                        session.lock()?;
                        let acquired = mono_ns();
                        critical_section(hold);
                        let release = mono_ns();
                        session.unlock()?;
                        let released = mono_ns();
                        events.push(Event {
                            thread,
                            call,
                            acquired,
                            release,
                            released,
                        });
                    }
                    Ok(events)
                })
            })
            .collect();
        ready.wait();
        let barrier = redis_barrier(&mut control, &format!("bench:barrier:{run_id}"), procs);
        go.wait();
        let joined: Vec<Result<Vec<Event>>> = handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect();
        match barrier {
            Ok(()) => joined,
            Err(e) => vec![Err(e)],
        }
    });
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(&events_path).with_context(|| format!("create {events_path}"))?,
    );
    let mut count = 0;
    for r in results {
        for e in r? {
            e.write_line(&mut file)?;
            count += 1;
        }
    }
    file.flush()?;
    Ok(json!({ "kind": "process", "events": count, "proc_index": proc_index }))
}

/// The names of the watchdog scenario's locks.
fn watchdog_names(run_id: &str, n: u64) -> Vec<String> {
    (0..n).map(|i| format!("bench:s4:{run_id}:{i}")).collect()
}

/// Marks the observed window in Redis (`holding`, then `done`).
fn mark(con: &mut redis::Connection, run_id: &str, what: &str) -> Result<()> {
    let _: () = redis::cmd("SET")
        .arg(format!("bench:s4:{run_id}:{what}"))
        .arg(1)
        .arg("EX")
        .arg(600)
        .query(con)?;
    Ok(())
}

/// Redis's `used_memory` (INFO memory), in bytes.
fn used_memory(con: &mut redis::Connection) -> Result<u64> {
    let info: String = redis::cmd("INFO").arg("memory").query(con)?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

fn count_existing(con: &mut redis::Connection, names: &[String]) -> Result<u64> {
    let mut existing = 0;
    for chunk in names.chunks(1000) {
        let n: u64 = redis::cmd("EXISTS").arg(chunk).query(con)?;
        existing += n;
    }
    Ok(existing)
}

/// Scenario 4 for the crate: hold `locks` locks in watchdog mode for
/// `window-permille`/1000 renewal periods, while `observe` times the renewal
/// ticks on the server. `acquire-threads` threads take the locks (a guard
/// stays on the thread that took it), hold them through the window, and
/// release them; the main thread measures.
fn crate_watchdog(url: &str, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0");
    let n = args.num_or("locks", 10_000)?;
    let threads = args.num_or("acquire-threads", 4)?.max(1) as usize;
    let watchdog = Duration::from_millis(args.num_or("watchdog-ms", 3_000)?);
    let window = watchdog.mul_f64(args.num_or("window-permille", 3_500)? as f64 / 3_000.0);
    let client = redisson_lock::Client::builder(url)
        .watchdog_timeout(watchdog)
        .build()?;
    let mut con = redis::Client::open(url)?.get_connection()?;
    let names = watchdog_names(run_id, n);
    // Warm the pool (one connection per acquiring thread) and the allocator
    // before the baseline.
    std::thread::scope(|scope| -> Result<()> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let client = &client;
                scope.spawn(move || -> Result<()> {
                    drop(client.lock(format!("bench:s4:warm:{t}")).lock()?);
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("warm-up thread panicked")?;
        }
        Ok(())
    })?;
    let rss0 = rss_bytes();
    let redis0 = used_memory(&mut con)?;
    // From here on the allocator counts what Rust code holds: the guards,
    // the client's registry and whatever a renewal tick allocates.
    count_live_bytes();
    let acquired = Barrier::new(threads + 1);
    let window_over = Barrier::new(threads + 1);
    let counted = Barrier::new(threads + 1);
    let shares: Vec<&[String]> = names.chunks(names.len().div_ceil(threads).max(1)).collect();
    let shares = &shares;
    let t_acquire = Instant::now();
    let (measured, lost, release_s) = std::thread::scope(|scope| -> Result<_> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (client, acquired, window_over, counted) =
                    (&client, &acquired, &window_over, &counted);
                scope.spawn(move || -> Result<(usize, Duration)> {
                    let mut guards = Vec::with_capacity(shares.get(t).map_or(0, |s| s.len()));
                    let taken = (|| -> Result<()> {
                        for name in shares.get(t).copied().unwrap_or_default() {
                            guards.push(client.lock(name.as_str()).lock()?);
                        }
                        Ok(())
                    })();
                    acquired.wait();
                    window_over.wait();
                    let lost = guards.iter().filter(|g| g.is_lost()).count();
                    counted.wait();
                    let t_release = Instant::now();
                    drop(guards);
                    taken?;
                    Ok((lost, t_release.elapsed()))
                })
            })
            .collect();
        acquired.wait();
        let acquire_s = t_acquire.elapsed().as_secs_f64();
        let rss1 = rss_bytes();
        let heap1 = live_bytes();
        let redis1 = used_memory(&mut con);
        let cpu1 = cpu_ns();
        let window_result = (|| -> Result<(i64, i64)> {
            mark(&mut con, run_id, "holding")?;
            // Live heap through the window: its low point is what the held
            // locks cost at rest, its high point adds a renewal tick's buffers.
            let (mut heap_min, mut heap_max) = (heap1, heap1);
            let end = Instant::now() + window;
            while Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10).min(end - Instant::now()));
                let h = live_bytes();
                heap_min = heap_min.min(h);
                heap_max = heap_max.max(h);
            }
            Ok((heap_min, heap_max))
        })();
        let cpu2 = cpu_ns();
        let rss2 = rss_bytes();
        let done = mark(&mut con, run_id, "done");
        window_over.wait();
        let registered = client.diagnostics().registered_holds;
        let existing = count_existing(&mut con, &names);
        counted.wait();
        let mut lost = 0;
        let mut release = Duration::ZERO;
        let mut first_error = None;
        for h in handles {
            match h.join().expect("watchdog bench thread panicked") {
                Ok((l, r)) => {
                    lost += l;
                    release = release.max(r);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let (heap_min, heap_max) = window_result?;
        done?;
        Ok((
            json!({
                "acquire_s": acquire_s,
                "cpu_ms_window": ms(cpu2 - cpu1),
                "rss_holding_mb": rss1 as f64 / 1048576.0,
                "rss_end_mb": rss2 as f64 / 1048576.0,
                "bytes_per_lock": (rss1.saturating_sub(rss0)) as f64 / n as f64,
                "heap_bytes_per_lock": heap_min.max(0) as f64 / n as f64,
                "heap_tick_peak_mb": (heap_max - heap_min) as f64 / 1048576.0,
                // Redis's own memory per held lock (INFO memory used_memory
                // growth while the locks were taken ÷ locks).
                "redis_bytes_per_lock": redis1?.saturating_sub(redis0) as f64 / n as f64,
                "keys_alive": existing?,
                "registered_while_holding": registered,
            }),
            lost,
            release.as_secs_f64(),
        ))
    })?;
    let after = client.diagnostics();
    let mut out = json!({
        "kind": "holder",
        "locks": n,
        "acquire_threads": threads,
        "watchdog_ms": watchdog.as_millis() as u64,
        "window_ms": window.as_millis() as u64,
        "release_s": release_s,
        "rss_before_mb": rss0 as f64 / 1048576.0,
        "lost_flagged": lost,
        "registered_after_release": after.registered_holds,
        "renewal": "shared watchdog thread, batches of 100 per EVALSHA",
    });
    if let (Some(o), Some(m)) = (out.as_object_mut(), measured.as_object()) {
        o.extend(m.clone());
    }
    Ok(out)
}

/// Scenario 4 for rslock, which has no watchdog: its closest feature is
/// `LockManager::using`, which extends each lock on its own timer.
fn rslock_watchdog(url: &str, args: &Args) -> Result<Value> {
    let run_id = args.str_or("run-id", "0");
    let n = args.num_or("locks", 10_000)?;
    let ttl = Duration::from_millis(args.num_or("watchdog-ms", 3_000)?);
    let window = ttl.mul_f64(args.num_or("window-permille", 3_500)? as f64 / 3_000.0);
    let names = watchdog_names(run_id, n);
    let rt = current_thread_runtime()?;
    let manager = rslock::LockManager::new(vec![url.to_owned()]);
    let mut con = redis::Client::open(url)?.get_connection()?;
    // Warm the connection before the baseline.
    rt.block_on(async {
        let g = manager.acquire(&b"bench:s4:warm"[..], ttl).await?;
        g.release().await;
        Ok::<_, rslock::LockError>(())
    })?;
    let rss0 = rss_bytes();
    let acquired = AtomicUsize::new(0);
    let (tx, rx) = tokio::sync::watch::channel(false);
    let t_acquire = Instant::now();
    let (results, stats) = rt.block_on(async {
        let holders = futures::future::join_all(names.iter().map(|name| {
            let mut rx = rx.clone();
            let acquired = &acquired;
            manager.using(name.as_bytes(), ttl, async move || {
                acquired.fetch_add(1, Ordering::AcqRel);
                while !*rx.borrow_and_update() {
                    if rx.changed().await.is_err() {
                        break;
                    }
                }
            })
        }));
        let controller = async {
            while acquired.load(Ordering::Acquire) < n as usize {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            let acquire_s = t_acquire.elapsed().as_secs_f64();
            let rss1 = rss_bytes();
            let cpu1 = cpu_ns();
            mark(&mut con, run_id, "holding")?;
            tokio::time::sleep(window).await;
            let cpu2 = cpu_ns();
            let rss2 = rss_bytes();
            mark(&mut con, run_id, "done")?;
            let existing = count_existing(&mut con, &names)?;
            let _ = tx.send(true);
            Ok::<_, anyhow::Error>((acquire_s, rss1, cpu2 - cpu1, rss2, existing))
        };
        futures::join!(holders, controller)
    });
    let (acquire_s, rss1, cpu, rss2, existing) = stats?;
    let failed = results.iter().filter(|r| r.is_err()).count();
    Ok(json!({
        "kind": "holder",
        "locks": n,
        "watchdog_ms": ttl.as_millis() as u64,
        "window_ms": window.as_millis() as u64,
        "acquire_s": acquire_s,
        "cpu_ms_window": ms(cpu),
        "rss_before_mb": rss0 as f64 / 1048576.0,
        "rss_holding_mb": rss1 as f64 / 1048576.0,
        "rss_end_mb": rss2 as f64 / 1048576.0,
        "bytes_per_lock": (rss1.saturating_sub(rss0)) as f64 / n as f64,
        "lost_flagged": failed,
        "keys_alive": existing,
        "renewal": "no watchdog; LockManager::using extends each lock on its own timer (validity - 500 ms)",
    }))
}
