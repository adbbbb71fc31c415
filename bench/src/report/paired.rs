//! The paired measurements (`bench/src/paired.rs`): the true floor and
//! redisson-lock alternating in blocks on the same threads of one process.
//! Each record carries the median over its rounds of the per-round ratio;
//! the report summarises those medians over the repetitions.

use std::fmt::Write;

use serde_json::Value;

use super::Data;
use super::family::FLOOR_GOAL;
use super::stats::{Stat, fmt, ratio, ratio_text};

/// Scenarios 1 and 2: the crate's pairs/s at least this share of the true
/// floor's, in their own processes (the targets table) and paired here.
pub const UNCONTENDED_GOAL: f64 = 0.97;
/// Scenario 8 (a Redis Cluster): the crate's pairs/s at least this share of
/// the true floor's sent straight to the slot's master.
pub const CLUSTER_GOAL: f64 = 0.95;

/// (label, scenario, threads, lock type, goal)
const ROWS: [(&str, &str, u64, &str, f64); 14] = [
    (
        "Scenario 1 (1 thread)",
        "paired",
        1,
        "lock",
        UNCONTENDED_GOAL,
    ),
    (
        "Scenario 2 (4 threads)",
        "paired",
        4,
        "lock",
        UNCONTENDED_GOAL,
    ),
    (
        "Scenario 5: fair lock (1 thread)",
        "paired",
        1,
        "fair",
        FLOOR_GOAL,
    ),
    (
        "Scenario 5: read lock (1 thread)",
        "paired",
        1,
        "read",
        FLOOR_GOAL,
    ),
    (
        "Scenario 5: write lock (1 thread)",
        "paired",
        1,
        "write",
        FLOOR_GOAL,
    ),
    (
        "Scenario 5: fenced lock (1 thread)",
        "paired",
        1,
        "fenced",
        FLOOR_GOAL,
    ),
    (
        "Scenario 5: spin lock (1 thread)",
        "paired",
        1,
        "spin",
        FLOOR_GOAL,
    ),
    (
        "Scenario 5: non-reentrant lock (1 thread)",
        "paired",
        1,
        "nonreentrant",
        FLOOR_GOAL,
    ),
    (
        "Scenario 5: read lock, 4 readers",
        "paired",
        4,
        "read",
        FLOOR_GOAL,
    ),
    (
        "Semaphore acquire+release (1 thread)",
        "paired",
        1,
        "semaphore",
        FLOOR_GOAL,
    ),
    (
        "Permit-expirable semaphore acquire+release (1 thread)",
        "paired",
        1,
        "pes",
        FLOOR_GOAL,
    ),
    (
        "Latch count_down+count (1 thread)",
        "paired",
        1,
        "latch",
        FLOOR_GOAL,
    ),
    ("Cluster (1 thread)", CLUSTER, 1, "lock", CLUSTER_GOAL),
    ("Cluster (4 threads)", CLUSTER, 4, "lock", CLUSTER_GOAL),
];

/// The contended semaphore (8 threads over 2 permits): the crate's hand-off
/// p99 at most this multiple of its floor's (scenario 3's goal).
pub const SEMAPHORE_HANDOFF_GOAL: f64 = 1.2;
/// The contended semaphore's records.
const SYNC_CONTENDED: &str = "sync_contended";

fn semaphore_handoff(d: &Data, metric: &str) -> super::stats::Series {
    d.series(|r| r["scenario"] == SYNC_CONTENDED, metric)
}

/// The synchronizers' `lock_type`s: paired with their own protocol floor.
const SYNCHRONIZERS: [&str; 3] = ["semaphore", "pes", "latch"];

/// Redisson's uncontended synchronizer records (its own JVM, scenario 7).
const SYNC_UNCONTENDED: &str = "sync_uncontended";

/// The synchronizer rows again, with Redisson's pairs/s beside them: the
/// paired ratio (crate ÷ its protocol floor) and Redisson's own process.
fn beside_redisson(w: &mut String, d: &Data) {
    let redisson = |lock_type: &str, key: &str| {
        Stat::of(
            d.records
                .iter()
                .filter(|r| {
                    r["scenario"] == SYNC_UNCONTENDED
                        && r["contender"] == "redisson"
                        && r["lock_type"] == lock_type
                })
                .filter_map(|r| r[key].as_f64()),
        )
    };
    if !SYNCHRONIZERS
        .iter()
        .any(|t| redisson(t, "pairs_per_s").is_some())
    {
        return;
    }
    let _ = writeln!(
        w,
        "\n*Synchronizers beside Redisson*: the synchronizer rows above with Redisson's own pairs \
         of the same calls, one thread on one name in its own JVM (`Bench.java` \
         `sync_uncontended`: `RSemaphore.acquire(1)` + `release(1)`; \
         `RPermitExpirableSemaphore.acquire()`, a permanent permit, + `release(id)`; \
         `RCountDownLatch.countDown()` + `getCount()`), run after the paired measurement, \
         {} ms after {} untimed pairs. Redisson's figures come from another process than the \
         paired ones, so the last column carries whatever changed on the machine in between.\n\n\
         | synchronizer (1 thread) | protocol floor pairs/s | redisson-lock pairs/s | \
         redisson-lock ÷ floor (paired, goal ≥ {FLOOR_GOAL:.2}×) | Redisson pairs/s | \
         Redisson p50 µs | redisson-lock ÷ Redisson |\n|---|---|---|---|---|---|---|",
        d.m("s5_duration_ms"),
        d.m("s5_warmup"),
    );
    let value = |s: Option<Stat>| {
        s.map_or("–".into(), |s| {
            format!("{} [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max))
        })
    };
    for (what, scenario, threads, lock_type, _) in ROWS {
        if !SYNCHRONIZERS.contains(&lock_type) {
            continue;
        }
        let cell = |key: &str| metric(d, scenario, threads, lock_type, key);
        let (ours, theirs) = (cell("pairs_per_s"), redisson(lock_type, "pairs_per_s"));
        if ours.is_none() && theirs.is_none() {
            continue;
        }
        let against = match (ours, theirs) {
            (Some(a), Some(b)) if b.median > 0.0 => format!("{:.2}×", a.median / b.median),
            _ => "–".into(),
        };
        let _ = writeln!(
            w,
            "| {what} | {} | {} | **{}** | {} | {} | {against} |",
            value(cell("floor_pairs_per_s")),
            value(ours),
            ratio_text(cell("ratio_median"), 2),
            value(theirs),
            redisson(lock_type, "p50_us").map_or("–".into(), |s| fmt(s.median)),
        );
    }
}

/// The scenario name of scenario 8's records.
const CLUSTER: &str = "cluster_paired";

fn records<'a>(
    d: &'a Data,
    scenario: &'a str,
    threads: u64,
    lock_type: &'a str,
) -> impl Iterator<Item = &'a Value> {
    d.records.iter().filter(move |r| {
        r["scenario"] == scenario
            && r["threads"].as_u64() == Some(threads)
            && r["lock_type"] == lock_type
            && !given(r)
    })
}

/// The runs of one connection mode asked for with `--multiplexed`: 0 for
/// the pooled connections, else that many multiplexed sockets. The other
/// rows take the runs made with the crate's default connections
/// ([`records`]).
fn records_in<'a>(
    d: &'a Data,
    scenario: &'a str,
    threads: u64,
    lock_type: &'a str,
    multiplexed: u64,
) -> impl Iterator<Item = &'a Value> {
    d.records.iter().filter(move |r| {
        r["scenario"] == scenario
            && r["threads"].as_u64() == Some(threads)
            && r["lock_type"] == lock_type
            && given(r)
            && r["multiplexed"].as_u64().unwrap_or(0) == multiplexed
    })
}

/// Whether the run asked for its connection mode (`--multiplexed N`).
fn given(r: &Value) -> bool {
    r["multiplexed_given"].as_bool().unwrap_or(false)
}

/// Many threads, one name each (scenario 2 scaled up): (threads,
/// multiplexed sockets or 0 for the pool, goal).
const MANY: [(u64, u64, f64); 10] = [
    (1, 4, UNCONTENDED_GOAL),
    (16, 0, UNCONTENDED_GOAL),
    (16, 4, UNCONTENDED_GOAL),
    (64, 0, UNCONTENDED_GOAL),
    (64, 1, UNCONTENDED_GOAL),
    (64, 4, MULTIPLEXED_GOAL),
    (128, 0, UNCONTENDED_GOAL),
    (128, 1, UNCONTENDED_GOAL),
    (128, 4, UNCONTENDED_GOAL),
    (1, 1, UNCONTENDED_GOAL),
];

/// 64 threads over `multiplexed(4)`: pairs/s at least this multiple of the
/// true floor's (one connection per thread).
pub const MULTIPLEXED_GOAL: f64 = 1.5;

fn mode(multiplexed: u64) -> String {
    match multiplexed {
        0 => "pooled (32)".to_owned(),
        4 => "multiplexed(4), the default".to_owned(),
        n => format!("multiplexed({n})"),
    }
}

/// Redisson's scenario 2 runs at `threads` (its own JVM, its default
/// configuration: a pool of up to 64 command connections shared by every
/// thread, pipelined by Netty).
fn redisson_metric(d: &Data, threads: u64, key: &str) -> Option<Stat> {
    Stat::of(
        d.records
            .iter()
            .filter(|r| {
                r["scenario"] == "scaled"
                    && r["contender"] == "redisson"
                    && r["threads"].as_u64() == Some(threads)
            })
            .filter_map(|r| r[key].as_f64()),
    )
}

fn many_metric(d: &Data, threads: u64, multiplexed: u64, key: &str) -> Option<Stat> {
    Stat::of(records_in(d, "paired", threads, "lock", multiplexed).filter_map(|r| r[key].as_f64()))
}

/// The many-threads rows: pooled against multiplexed, with the connections
/// each side used.
fn many_section(w: &mut String, d: &Data) {
    if !MANY
        .iter()
        .any(|&(t, m, _)| many_metric(d, t, m, "ratio_median").is_some())
    {
        return;
    }
    let _ = writeln!(
        w,
        "\n*Many threads* (scenario 2 scaled up, each thread on its own name): the floor keeps \
         one plain connection per thread; the crate either checks a pooled connection out per \
         command (`pool_size` 32, the default under replica sync) or shares a few multiplexed \
         sockets (`ClientBuilder::multiplexed(n)`, 4 the default for one server: commands written as they come, replies read back in \
         order by the caller whose reply is next). *Connections*: floor / crate at the end of \
         the measurement; *CPU*: the measuring threads' own CPU time per pair, floor / crate. \
         *Redisson*: `RLock.lock()` + `unlock()` with as many threads on distinct names in its \
         own JVM in the same run (scenario 2's measurement, its default configuration), and the \
         connections the server had open after it (`INFO clients`: its command pool as the run \
         grew it, and its pub/sub connection).\n\n\
         | threads | crate's connections | floor pairs/s | redisson-lock pairs/s | ratio \
         (median of rounds) | goal | connections | CPU µs/pair | Redisson pairs/s (connections) |\n\
         |---|---|---|---|---|---|---|---|---|"
    );
    let value = |s: Option<Stat>| {
        s.map_or("–".into(), |s| {
            format!("{} [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max))
        })
    };
    let median = |s: Option<Stat>| s.map_or("–".into(), |s| fmt(s.median));
    for (threads, multiplexed, goal) in MANY {
        let cell = |key: &str| many_metric(d, threads, multiplexed, key);
        let Some(r) = cell("ratio_median") else {
            continue;
        };
        let redisson = match redisson_metric(d, threads, "pairs_per_s") {
            Some(pairs) => format!(
                "{} ({})",
                value(Some(pairs)),
                median(redisson_metric(d, threads, "connections"))
            ),
            None => "–".into(),
        };
        let _ = writeln!(
            w,
            "| {threads} | {} | {} | {} | **{}** | ≥ {goal:.2}× | {} / {} | {} / {} | {redisson} |",
            mode(multiplexed),
            value(cell("floor_pairs_per_s")),
            value(cell("pairs_per_s")),
            ratio_text(Some(r), 2),
            median(cell("floor_connections")),
            median(cell("connections")),
            median(cell("floor_cpu_us_per_pair")),
            median(cell("cpu_us_per_pair")),
        );
    }
}

fn metric(d: &Data, scenario: &str, threads: u64, lock_type: &str, key: &str) -> Option<Stat> {
    Stat::of(records(d, scenario, threads, lock_type).filter_map(|r| r[key].as_f64()))
}

pub fn targets(d: &Data, push: &mut impl FnMut(String, &str, String, Option<bool>)) {
    for (what, scenario, threads, lock_type, goal) in ROWS {
        let Some(r) = metric(d, scenario, threads, lock_type, "ratio_median") else {
            continue;
        };
        let against = match scenario {
            CLUSTER => "the true floor on the slot's master",
            _ if SYNCHRONIZERS.contains(&lock_type) => "its protocol floor",
            _ => "the true floor",
        };
        push(
            format!("{what}, paired in one process: pairs/s vs {against}"),
            &format!("≥ {goal:.2}×"),
            ratio_text(Some(r), 2),
            Some(r.median >= goal),
        );
    }
    for (threads, multiplexed, goal) in MANY {
        // The 1- and 4-thread pooled rows are above.
        let Some(r) = many_metric(d, threads, multiplexed, "ratio_median") else {
            continue;
        };
        push(
            format!(
                "Scenario 2 ({threads} threads, {}), paired in one process: pairs/s vs the true floor",
                mode(multiplexed)
            ),
            &format!("≥ {goal:.2}×"),
            ratio_text(Some(r), 2),
            Some(r.median >= goal),
        );
    }
    let h = semaphore_handoff(d, "handoff_p99_us");
    if !h.is_empty() {
        let r = ratio(&h, "crate", "floor");
        push(
            "Semaphore, 8 threads over 2 permits: hand-off p99 vs its protocol floor's".to_owned(),
            &format!("≤ {SEMAPHORE_HANDOFF_GOAL:.1}×"),
            ratio_text(r, 2),
            r.map(|s| s.median <= SEMAPHORE_HANDOFF_GOAL),
        );
    }
}

pub fn section(w: &mut String, d: &Data) {
    if !ROWS
        .iter()
        .any(|&(_, s, t, l, _)| records(d, s, t, l).next().is_some())
    {
        return;
    }
    let rounds = d.m("pair_rounds");
    let block = d.m("pair_block_ms");
    let _ = writeln!(
        w,
        "\n## Paired: the floor and redisson-lock in one process\n\n\
         The scenarios above run each contender in its own process, one after the other, so a \
         ratio also carries whatever changed on the machine between the two (on this 2-vCPU VM, \
         a few percent either way). Here one process holds a floor session and a redisson-lock \
         session per thread and alternates {block} ms blocks of lock + unlock pairs between them, \
         {rounds} rounds per repetition (the floor first in even rounds, the crate first in odd \
         ones), all threads switching together. *Ratio* is the median over the rounds of \
         crate ÷ floor pairs/s; the table gives its median [min–max] over the repetitions. \
         The synchronizer rows pair each synchronizer's protocol floor (its Redisson scripts \
         as SYNCHRONIZERS §3–§5 describe them, written for the benchmark in `bench/lua/`, on one \
         plain connection per thread; the latch's count a plain `GET`) with the crate's object \
         on its own name per thread: a pair is one permit's acquire + release (the semaphore: \
         `acquire(1)`, the guard's `release()`; the permit-expirable one: `acquire(None)`, a \
         permanent permit, the guard's `release()`, while the floor releases with the one-id \
         script Redisson's `release(id)` sends), or the latch's `count_down()` + `count()` on a \
         count that never reaches 0.\n\n\
         | measurement | floor pairs/s | redisson-lock pairs/s | ratio (median of rounds) | ratio of the means |\n\
         |---|---|---|---|---|"
    );
    for (what, scenario, threads, lock_type, _) in ROWS {
        let cell = |key: &str| metric(d, scenario, threads, lock_type, key);
        let Some(r) = cell("ratio_median") else {
            continue;
        };
        let value = |s: Option<Stat>| {
            s.map_or("–".into(), |s| {
                format!("{} [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max))
            })
        };
        let _ = writeln!(
            w,
            "| {what} | {} | {} | **{}** | {} |",
            value(cell("floor_pairs_per_s")),
            value(cell("pairs_per_s")),
            ratio_text(Some(r), 2),
            ratio_text(cell("ratio_of_means"), 2),
        );
    }
    beside_redisson(w, d);
    many_section(w, d);
    let p99 = semaphore_handoff(d, "handoff_p99_us");
    if !p99.is_empty() {
        let p50 = semaphore_handoff(d, "handoff_p50_us");
        let side = |s: &super::stats::Series, c: &str| {
            Stat::of(s.get(c).into_iter().flat_map(|reps| reps.values().copied()))
                .map_or("–".into(), |s| {
                    format!("{} µs [{}–{}]", fmt(s.median), fmt(s.min), fmt(s.max))
                })
        };
        let _ = writeln!(
            w,
            "\n*Contended semaphore*: 8 threads of one process over one semaphore of 2 permits, \
             each taking a permit {} times and holding it {} µs, run once per side and repetition \
             in its own process. The floor tries its acquire script and, failing, waits for the \
             next message on `redisson_sc:{{name}}` (as Redisson's waiters do, with a 100 ms \
             safety net); the crate calls `acquire(1)` and the guard's `release()`. A hand-off is \
             the time from the release that freed a permit (in time order, the k-th acquisition \
             takes the permit of the (k − 2)-th release) to that acquisition. Hand-off p50: floor \
             {}, redisson-lock {}; p99: floor {}, redisson-lock {} (medians [min–max] over the \
             repetitions); p99 ratio {}.",
            d.m("s3_iterations"),
            d.m("s3_hold_us"),
            side(&p50, "floor"),
            side(&p50, "crate"),
            side(&p99, "floor"),
            side(&p99, "crate"),
            ratio_text(ratio(&p99, "crate", "floor"), 2),
        );
        if p99.contains_key("redisson") {
            let _ = writeln!(
                w,
                "\nRedisson's contended semaphore (`RSemaphore.acquire()` + `release()`, the same \
                 8 threads, iterations and hold, in its own JVM after the two; `Bench.java` \
                 `syncContended`, hand-offs computed the same way): hand-off p50 {}, p99 {}; \
                 p99 ÷ the floor's {}, redisson-lock's p99 ÷ Redisson's {}.",
                side(&p50, "redisson"),
                side(&p99, "redisson"),
                ratio_text(ratio(&p99, "redisson", "floor"), 2),
                ratio_text(ratio(&p99, "crate", "redisson"), 2),
            );
        }
    }
    let cluster: Vec<&Value> = d
        .records
        .iter()
        .filter(|r| r["scenario"] == CLUSTER)
        .collect();
    if let Some(first) = cluster.first() {
        let publish = first["publish"].as_str().unwrap_or("?").to_uppercase();
        let _ = writeln!(
            w,
            "\n*Cluster* rows (scenario 8, `scripts/bench.sh --only 8` alone) run on a Redis \
             Cluster of {} masters and no replicas that the script starts for each repetition's \
             two measurements and stops after them (cluster-enabled `redis-server`s on free \
             loopback ports, no persistence, all pinned to the server's vCPU, formed with \
             `redis-cli --cluster create`). The crate is \
             `Client::cluster_builder(every node)`, `lock(name)` + unlock, routing each script to \
             the master of the name's slot over its pool for that master. The floor sends the same \
             true-floor scripts on one plain connection per thread straight to that master \
             (found with `redisson_lock::key_slot` and `CLUSTER SLOTS`): no slot table, no \
             routing, no redirect handling. Both unlock with `{publish}`, the command the crate \
             chose (its default, Redisson 4.7.0's: sharded pub/sub when the server has it), read \
             from the master's `INFO commandstats` around one crate unlock. Thread *t* works on \
             master *t* mod {} on both sides, so 4 threads use every master.",
            d.m("cluster_masters"),
            first["masters"].as_u64().unwrap_or(0),
        );
    }
}
