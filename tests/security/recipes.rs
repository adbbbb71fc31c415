//! The least-privilege ACL recipes of docs/security.md, run: one for a
//! single server, one for a Redis Cluster, one for Sentinel (the master's
//! user and the sentinels' user).
//!
//! - A user with exactly the recipe can use every lock kind (holder, a
//!   second client kept out, a waiter woken by the release) and every
//!   synchronizer (semaphore, permit-expirable semaphore, count-down latch,
//!   each with a waiter woken by another client), and the server refuses it
//!   nothing (`ACL LOG` stays empty).
//! - Each permission of the recipe is needed: without it the exercise fails
//!   with an error that names the refusal (`NOPERM`), and the server's
//!   `ACL LOG` records that very command, key or channel. The data commands
//!   are shown needed on a single server; the cluster and Sentinel tests
//!   show the permissions their topology adds.
//! - The recipe's data commands are exactly the scripts' (`lua/*.lua`) and
//!   the client's own: a command a script calls on a rare path (a fair
//!   waiter giving up, a reader's release) is granted too, since a refusal
//!   mid-script would leave its earlier writes in place.
//!
//! Each topology is started once per binary (the cluster and Sentinel
//! harnesses' shared setups).

use std::collections::BTreeSet;
use std::thread;
use std::time::Duration;

use crate::support::acl::{exercise, tuned};
use crate::support::cluster::Cluster;
use crate::support::sentinel::{self, SentinelSetup};
use crate::support::{self, RedisServer};
use redisson_lock::Client;

/// The commands the crate sends itself, on every topology.
const CLIENT_COMMANDS: &[&str] = &[
    "evalsha",
    "script|load",
    "subscribe",
    "unsubscribe",
    // Commands sent outside scripts: queries and synchronizer reads.
    "exists",
    "hget",
    "get",
    "del",
];

/// What the scripts call (`redis.call` in lua/*.lua, the publish command
/// included, which a script gets as an argument), less `inspect.lua`'s
/// read-only operator commands.
const SCRIPT_COMMANDS: &[&str] = &[
    "decr",
    "decrby",
    "del",
    "exists",
    "get",
    "hdel",
    "hexists",
    "hget",
    "hgetall",
    "hincrby",
    "hlen",
    "hset",
    "incr",
    "incrby",
    "lindex",
    "lpop",
    "lrange",
    "lrem",
    "pexpire",
    "pttl",
    "publish",
    "rpush",
    "set",
    "zadd",
    "zcount",
    "zincrby",
    "zrange",
    "zrangebyscore",
    "zrem",
    "zscore",
];

/// Recipe commands that only a path this exercise does not take calls: a
/// fair waiter that gives up (`lrange`, `lrem`, `zincrby`). Their need is
/// the static check's ([`the_recipe_is_exactly_what_the_scripts_call`]).
const RARE: &[&str] = &["lrange", "lrem", "zincrby"];

/// Recommended, not required: `ping` checks suspect pooled connections
/// and the idle subscriber (without it they are replaced instead);
/// `client|setinfo` is redis-rs announcing itself on connect (a refusal is
/// ignored, but the server logs it); `client|setname` names each command
/// connection after its client (a refusal is ignored too), so that
/// `identify_holders` can tell who holds a lock.
const RECOMMENDED: &[&str] = &["ping", "client|setinfo", "client|setname"];

/// Refusals the crate survives: an `UNSUBSCRIBE` refused leaves the
/// subscription to the connection's end (the refusal is still logged).
const NOT_FATAL: &[&str] = &["unsubscribe", "sunsubscribe"];

/// The cluster's additions: slot discovery, Redisson's sharded pub/sub
/// probe, sharded publish and subscribe, and replica sync (`WAIT` after
/// each lock write, the replica count from `INFO replication`).
const CLUSTER_COMMANDS: &[&str] = &[
    "cluster|slots",
    "pubsub|shardnumsub",
    "spublish",
    "ssubscribe",
    "sunsubscribe",
    "wait",
    "info",
];

/// Sentinel's additions on the master: its role check and replica sync.
const SENTINEL_MASTER_COMMANDS: &[&str] = &["role", "wait", "info"];

/// What the client sends a sentinel.
const SENTINEL_COMMANDS: &[&str] = &["sentinel|get-master-addr-by-name"];

/// The recipe's keys and channels, for names that start with `app:`.
const KEYS: &[&str] = &["~app:*", "~{app:*", "~redisson_*{app:*"];
const CHANNELS: &[&str] = &["&redisson_*{app:*"];

const ADMIN_PASSWORD: &str = "Adm1n-pw-61c2";
const LOCKER_PASSWORD: &str = "L0cker-pw-08da";

/// The single-server recipe: the client's and the scripts' commands, the
/// recommended ones, the keys and the channels.
fn standalone_recipe() -> Vec<&'static str> {
    let mut all: BTreeSet<&str> = CLIENT_COMMANDS.iter().copied().collect();
    all.extend(SCRIPT_COMMANDS.iter().chain(RECOMMENDED).copied());
    all.extend(KEYS.iter().chain(CHANNELS).copied());
    all.into_iter().collect()
}

/// `ACL SETUSER locker reset on >pw -@all <permissions>`: a permission is a
/// command (granted as `+command`) or a key (`~pattern`) or channel
/// (`&pattern`) pattern.
fn setuser_args(commands: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["ACL", "SETUSER", "locker", "reset", "on"]
        .map(str::to_owned)
        .to_vec();
    args.push(format!(">{LOCKER_PASSWORD}"));
    args.push("-@all".into());
    args.extend(
        commands
            .iter()
            .filter(|c| **c != "client|setinfo")
            .map(|c| match c.starts_with(['~', '&']) {
                true => c.to_string(),
                false => format!("+{c}"),
            }),
    );
    args
}

/// Sets `locker` to `commands` on `con`'s server. `CLIENT SETINFO` exists
/// since Redis 7.2 (Valkey 8 has it): granting an unknown command is an
/// error, so it is granted on its own, where known.
fn set_locker(con: &mut redis::Connection, commands: &[&str]) {
    let _: () = query(con, &setuser_args(commands));
    if commands.contains(&"client|setinfo") {
        let _ = redis::cmd("ACL")
            .arg(&["SETUSER", "locker", "+client|setinfo"])
            .query::<()>(con);
    }
}

fn query<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[String]) -> T {
    let mut cmd = redis::cmd(&args[0]);
    for arg in &args[1..] {
        cmd.arg(arg);
    }
    cmd.query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// `(reason, object)` of every `ACL LOG` entry on `con`'s server.
fn denials(con: &mut redis::Connection) -> Vec<(String, String)> {
    crate::denial_pairs(query(con, &strings(&["ACL", "LOG"])))
}

/// Runs `run` with each permission of `permissions` taken away in turn
/// (`ACL SETUSER locker -<command>`, or the whole recipe set again without
/// it, through `set`), and asserts that the exercise then fails with a
/// `NOPERM` error and that some server's `ACL LOG` names the refusal.
fn each_is_needed(
    permissions: &[&str],
    set: &dyn Fn(&[&str]),
    run: &dyn Fn(&str) -> Result<(), String>,
    logs: &dyn Fn() -> Vec<(String, String)>,
    full: &[&str],
) {
    for permission in permissions {
        let fewer: Vec<&str> = full.iter().copied().filter(|c| c != permission).collect();
        set(&fewer);
        // Names of their own: a waiter left behind by a failed run (it
        // waits up to 20 s) must not meet this run's locks.
        let tag: String = permission
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        let outcome = run(&tag);
        eprintln!("without `{permission}`: {outcome:?}");
        let refused = support::eventually(Duration::from_secs(2), || {
            logs()
                .iter()
                .any(|(reason, object)| match &permission[..1] {
                    "~" => reason == "key",
                    "&" => reason == "channel",
                    _ => reason == "command" && object == permission,
                })
        });
        assert!(
            refused,
            "without `{permission}` the crate was never refused it ({outcome:?}): {:?}",
            logs()
        );
        if NOT_FATAL.contains(permission) {
            continue;
        }
        let error = outcome.expect_err(&format!("the exercise passed without `{permission}`"));
        assert!(
            ["NOPERM", "permission", "user executing the script can't"]
                .iter()
                .any(|says| error.contains(says)),
            "without `{permission}` the error does not say so: {error}"
        );
    }
    set(full);
}

/// A single server whose default user is off: `admin` and the recipe's
/// `locker`.
fn standalone() -> (RedisServer, impl Fn() -> redis::Connection) {
    let admin = format!(">{ADMIN_PASSWORD}");
    let server = RedisServer::start_with(&[
        "--user", "admin", "on", &admin, "~*", "&*", "+@all", "--user", "default", "off",
    ]);
    let url = format!(
        "redis://admin:{ADMIN_PASSWORD}@127.0.0.1:{}/",
        server.port()
    );
    let connect = move || {
        redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("admin connection")
    };
    (server, connect)
}

fn locker_url(port: u16) -> String {
    format!("redis://locker:{LOCKER_PASSWORD}@127.0.0.1:{port}/")
}

#[test]
fn the_recipe_is_exactly_what_the_scripts_call() {
    let mut called = BTreeSet::new();
    for entry in std::fs::read_dir("lua").expect("lua/") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|n| n == "inspect.lua") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a script");
        for quote in ["redis.call('", "redis.call(\"", "redis.pcall('"] {
            for part in text.split(quote).skip(1) {
                let command: String = part.chars().take_while(char::is_ascii_alphabetic).collect();
                called.insert(command.to_ascii_lowercase());
            }
        }
        // The publish command is an argument: each word of it (`publish`,
        // `spublish`, or both in ShardedSubscription::Both) is called.
        if text.contains("redis.call(ARGV") || text.contains("string.gmatch(ARGV") {
            called.insert("publish".into()); // or spublish: the flavour's
        }
    }
    let granted: BTreeSet<String> = SCRIPT_COMMANDS.iter().map(|c| c.to_string()).collect();
    assert_eq!(called, granted, "lua/*.lua call exactly SCRIPT_COMMANDS");
}

#[test]
fn single_server_recipe_works_and_each_command_is_needed() {
    let (server, admin) = standalone();
    let recipe = standalone_recipe();
    let set = |commands: &[&str]| {
        let mut con = admin();
        // The last run's clients (threads it left waiting) are shut out
        // first: their next command fails at once and they end.
        let _: () = query(&mut con, &strings(&["ACL", "SETUSER", "locker", "off"]));
        let _: i64 = query(&mut con, &strings(&["CLIENT", "KILL", "USER", "locker"]));
        thread::sleep(Duration::from_millis(100));
        set_locker(&mut con, commands);
        let _: () = query(&mut con, &strings(&["FLUSHALL"]));
        let _: () = query(&mut con, &strings(&["SCRIPT", "FLUSH"]));
        let _: () = query(&mut con, &strings(&["ACL", "LOG", "RESET"]));
    };
    let url = locker_url(server.port());
    let run = |tag: &str| {
        let holder = tuned(Client::builder(url.as_str()))?;
        let waiter = tuned(Client::builder(url.as_str()))?;
        exercise(&holder, &waiter, tag)
    };
    set(&recipe);
    run("all").expect("every kind and synchronizer works with the recipe");
    let refused = denials(&mut admin());
    assert!(refused.is_empty(), "the recipe was refused: {refused:?}");

    let needed: Vec<&str> = recipe
        .iter()
        .copied()
        .filter(|c| !RARE.contains(c) && !RECOMMENDED.contains(c))
        .collect();
    each_is_needed(&needed, &set, &run, &|| denials(&mut admin()), &recipe);
}

/// The cluster recipe: the single server's, with sharded pub/sub instead of
/// the classic one (what Redisson 4.7.0 and this crate pick on Redis 7+),
/// and the cluster's own commands. `asking` is recommended: it is sent only
/// while a slot migrates.
fn cluster_recipe() -> Vec<&'static str> {
    let classic = ["publish", "subscribe", "unsubscribe"];
    let mut all: BTreeSet<&str> = standalone_recipe()
        .into_iter()
        .filter(|c| !classic.contains(c))
        .collect();
    all.extend(CLUSTER_COMMANDS.iter().copied());
    all.insert("asking");
    all.into_iter().collect()
}

#[test]
fn cluster_recipe_works_and_each_cluster_permission_is_needed() {
    let cluster = Cluster::shared();
    let nodes = || cluster.nodes.iter();
    let set = |permissions: &[&str]| {
        for node in nodes() {
            let mut con = node.con().expect("node connection");
            let _: () = query(&mut con, &strings(&["ACL", "SETUSER", "locker", "off"]));
            let _: i64 = query(&mut con, &strings(&["CLIENT", "KILL", "USER", "locker"]));
        }
        thread::sleep(Duration::from_millis(100));
        cluster.flush();
        for node in nodes() {
            let mut con = node.con().expect("node connection");
            set_locker(&mut con, permissions);
            let _: () = query(&mut con, &strings(&["ACL", "LOG", "RESET"]));
        }
    };
    let logs = || {
        nodes()
            .flat_map(|node| denials(&mut node.con().expect("node connection")))
            .collect::<Vec<_>>()
    };
    let urls: Vec<String> = cluster.nodes.iter().map(|n| locker_url(n.port)).collect();
    let run = |tag: &str| {
        let holder = tuned(Client::cluster_builder(urls.clone()))?;
        let waiter = tuned(Client::cluster_builder(urls.clone()))?;
        exercise(&holder, &waiter, tag)
    };
    let recipe = cluster_recipe();
    set(&recipe);
    run("all").expect("every kind and synchronizer works with the cluster recipe");
    let refused = logs();
    assert!(refused.is_empty(), "the recipe was refused: {refused:?}");
    each_is_needed(CLUSTER_COMMANDS, &set, &run, &logs, &recipe);
}

/// The Sentinel recipe for the master and its replicas: the single
/// server's, with the master's role check and replica sync.
fn sentinel_master_recipe() -> Vec<&'static str> {
    let mut all: BTreeSet<&str> = standalone_recipe().into_iter().collect();
    all.extend(SENTINEL_MASTER_COMMANDS.iter().copied());
    all.into_iter().collect()
}

/// The recipe for the sentinels: the master look-up, and the recommended
/// commands.
fn sentinel_recipe() -> Vec<&'static str> {
    SENTINEL_COMMANDS
        .iter()
        .chain(RECOMMENDED)
        .copied()
        .collect()
}

#[test]
fn sentinel_recipes_work_and_each_sentinel_permission_is_needed() {
    let (setup, _serial) = SentinelSetup::shared();
    let set_on = |ports: &[u16], permissions: &[&str]| {
        for &port in ports {
            let mut con = sentinel::con(port);
            let _: () = query(&mut con, &strings(&["ACL", "SETUSER", "locker", "off"]));
            let _: i64 = query(&mut con, &strings(&["CLIENT", "KILL", "USER", "locker"]));
        }
        thread::sleep(Duration::from_millis(100));
        for &port in ports {
            let mut con = sentinel::con(port);
            set_locker(&mut con, permissions);
            let _: () = query(&mut con, &strings(&["ACL", "LOG", "RESET"]));
        }
    };
    let all_ports: Vec<u16> = setup
        .data_ports
        .iter()
        .chain(&setup.sentinel_ports)
        .copied()
        .collect();
    let logs = || {
        all_ports
            .iter()
            .flat_map(|&port| denials(&mut sentinel::con(port)))
            .collect::<Vec<_>>()
    };
    // Each sentinel asked with the locker's credentials: its own user.
    let sentinels: Vec<String> = setup
        .sentinel_ports
        .iter()
        .map(|&p| locker_url(p))
        .collect();
    let run = |tag: &str| {
        let build = || Client::sentinel_builder(sentinel::MASTER_NAME, sentinels.clone());
        let holder = tuned(build())?;
        let waiter = tuned(build())?;
        exercise(&holder, &waiter, tag)
    };
    let master = sentinel_master_recipe();
    let on_sentinels = sentinel_recipe();
    let set_master = |permissions: &[&str]| {
        set_on(&setup.data_ports, permissions);
        setup.flush();
    };
    let set_sentinels = |permissions: &[&str]| set_on(&setup.sentinel_ports, permissions);
    set_sentinels(&on_sentinels);
    set_master(&master);
    run("all").expect("every kind and synchronizer works with the Sentinel recipes");
    let refused = logs();
    assert!(refused.is_empty(), "the recipes were refused: {refused:?}");
    each_is_needed(SENTINEL_MASTER_COMMANDS, &set_master, &run, &logs, &master);
    each_is_needed(
        SENTINEL_COMMANDS,
        &set_sentinels,
        &run,
        &logs,
        &on_sentinels,
    );
}
