//! Authentication, least privilege and secrecy.
//!
//! - Everything works against a server with `requirepass`, and with an ACL
//!   user that may run only the commands the crate needs, on only the keys
//!   and channels it needs. That command list is docs/security.md's "minimal
//!   recipe for reentrant locks only", and each command on it is shown to be
//!   needed: without it, the server's `ACL LOG` records the crate being
//!   refused that very command.
//! - docs/security.md's least-privilege recipes for every kind, synchronizer
//!   and topology (single server, Redis Cluster, Sentinel), each run and each
//!   permission shown needed: the `recipes` module (tests/security/recipes.rs).
//! - Credentials never show in `Debug`/`Display` of the crate's types and
//!   errors, nor in any log line, whatever fails (wrong password, unparsable
//!   URL, server gone, subscriber reconnects).

mod support;

#[path = "security/recipes.rs"]
mod recipes;

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error, LockGuard, RequestId, UnlockOutcome};
use support::RedisServer;

/// The commands docs/security.md's "minimal recipe for reentrant locks
/// only" lists as required, as the server names them in `ACL LOG`.
const REQUIRED: &[&str] = &[
    "evalsha",
    "script|load",
    "exists",
    "hexists",
    "hget",
    "hincrby",
    "hset",
    "pexpire",
    "pttl",
    "get",
    "set",
    "del",
    "publish",
    "subscribe",
    "unsubscribe",
];
/// Listed as recommended: `ping` checks suspect pooled connections and the
/// idle subscriber (without it they are replaced instead), `client|setinfo`
/// is redis-rs announcing itself on connect (a refusal is ignored, but logged
/// by the server), `client|setname` names each command connection after its
/// client (a refusal is ignored too).
const RECOMMENDED: &[&str] = &["ping", "client|setinfo", "client|setname"];

const ADMIN_PASSWORD: &str = "Adm1n-pw-4c1d";
const LOCKER_PASSWORD: &str = "L0cker-pw-7f3e";
const REQUIREPASS: &str = "Req-pass-9b2a";
/// Percent-encoded in URLs as `p%40ss%3Aw%2Frd-5e8d`.
const SPECIAL_PASSWORD: &str = "p@ss:w/rd-5e8d";
const SPECIAL_PASSWORD_ENCODED: &str = "p%40ss%3Aw%2Frd-5e8d";
const WRONG_PASSWORD: &str = "Wr0ng-pw-0a6b";

const ALL_SECRETS: &[&str] = &[
    ADMIN_PASSWORD,
    LOCKER_PASSWORD,
    REQUIREPASS,
    SPECIAL_PASSWORD,
    SPECIAL_PASSWORD_ENCODED,
    WRONG_PASSWORD,
];

fn assert_no_secret(what: &str, text: &str) {
    for secret in ALL_SECRETS {
        assert!(!text.contains(secret), "{what} reveals a password: {text}");
    }
}

/// Commands for inspecting and poking a server whose default user is closed.
struct Admin {
    client: redis::Client,
}

impl Admin {
    fn new(url: &str) -> Admin {
        Admin {
            client: redis::Client::open(url).expect("admin url"),
        }
    }

    fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut con = self
            .client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("admin connection");
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut con).expect("admin command")
    }

    /// `(reason, object)` of every `ACL LOG` entry.
    fn acl_denials(&self) -> Vec<(String, String)> {
        denial_pairs(self.cmd(&["ACL", "LOG"]))
    }
}

/// `(reason, object)` of each entry of an `ACL LOG` reply.
fn denial_pairs(entries: Vec<HashMap<String, redis::Value>>) -> Vec<(String, String)> {
    entries
        .into_iter()
        .map(|entry| {
            let text = |field: &str| match entry.get(field) {
                Some(redis::Value::BulkString(bytes)) => {
                    String::from_utf8_lossy(bytes).into_owned()
                }
                Some(redis::Value::SimpleString(s)) => s.clone(),
                other => format!("{other:?}"),
            };
            (text("reason"), text("object"))
        })
        .collect()
}

/// A server whose default user is off, with `admin` (everything) and
/// `locker` (exactly `commands`, keys `app:*` and the unlock latches,
/// channels of RLock releases).
fn acl_server(commands: &[&str]) -> (RedisServer, Admin) {
    let admin_password = format!(">{ADMIN_PASSWORD}");
    let locker_password = format!(">{LOCKER_PASSWORD}");
    let mut args = vec![
        "--user",
        "admin",
        "on",
        &admin_password,
        "~*",
        "&*",
        "+@all",
        "--user",
        "default",
        "off",
        "--user",
        "locker",
        "on",
        &locker_password,
        "~app:*",
        "~redisson_unlock_latch:*",
        "~redisson_lock__channel:*",
        "&redisson_lock__channel:*",
        "-@all",
    ];
    // `CLIENT SETINFO` exists since Redis 7.2; granting an unknown command
    // makes the server refuse to start, so it is granted afterwards, if known.
    let (late, early): (Vec<&str>, Vec<&str>) =
        commands.iter().partition(|c| **c == "client|setinfo");
    let grants: Vec<String> = early.iter().map(|c| format!("+{c}")).collect();
    args.extend(grants.iter().map(String::as_str));
    let server = RedisServer::start_with(&args);
    let admin = Admin::new(&format!(
        "redis://admin:{ADMIN_PASSWORD}@127.0.0.1:{}/",
        server.port()
    ));
    for command in late {
        let mut con = admin
            .client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("admin connection");
        let _ = redis::cmd("ACL")
            .arg(&["SETUSER", "locker", &format!("+{command}")])
            .query::<()>(&mut con);
    }
    (server, admin)
}

fn locker_url(server: &RedisServer) -> String {
    format!(
        "redis://locker:{LOCKER_PASSWORD}@127.0.0.1:{}/",
        server.port()
    )
}

/// Lock, reentry, queries, a waiter woken by the release, watchdog renewal
/// over `hold`, force_unlock, unlock of what is not held, and latch clean-up.
/// Stops at the first thing that does not work.
fn exercise(url: &str, admin: &Admin, hold: Duration) -> Result<(), String> {
    let lease = Duration::from_millis(900);
    let build = || support::acl::tuned(Client::builder(url).watchdog_timeout(lease));
    let client = build()?;
    let rival = build()?;
    let lock = client.lock("app:orders");
    let step = |what: &str, e: Error| format!("{what}: {e}");

    let guard = lock
        .try_lock_for(Duration::from_secs(2))
        .map_err(|e| step("lock", e))?
        .ok_or("lock: not acquired")?;
    let inner = lock
        .try_lock()
        .map_err(|e| step("reentry", e))?
        .ok_or("reentry refused")?;
    inner.unlock().map_err(|e| step("reentrant unlock", e))?;
    if !lock.is_locked().map_err(|e| step("is_locked", e))? {
        return Err("is_locked: false while held".into());
    }
    if !lock
        .is_held_by_current_thread()
        .map_err(|e| step("is_held_by_current_thread", e))?
    {
        return Err("is_held_by_current_thread: false while held".into());
    }
    if lock.hold_count().map_err(|e| step("hold_count", e))? != 1 {
        return Err("hold_count: not 1".into());
    }
    lock.remaining_ttl()
        .map_err(|e| step("remaining_ttl", e))?
        .ok_or("remaining_ttl: none while held")?;

    // A waiter on the other client, woken by the release.
    let waiter = {
        let lock = rival.lock("app:orders");
        thread::spawn(move || {
            let start = Instant::now();
            let got = lock.try_lock_for(Duration::from_secs(3));
            (
                got.map(|guard| guard.map(|guard| guard.unlock())),
                start.elapsed(),
            )
        })
    };
    let subscribed = support::eventually(Duration::from_secs(2), || {
        rival.diagnostics().waiters == 1 && admin.cmd::<i64>(&["PUBSUB", "NUMPAT"]) == 0
    });
    if !subscribed {
        return Err("the waiter never waited".into());
    }
    // Renewal keeps the lock past its lease.
    thread::sleep(hold);
    if guard.is_lost() {
        return Err(format!("lost after {hold:?} despite the watchdog"));
    }
    let released = Instant::now();
    guard.unlock().map_err(|e| step("unlock", e))?;
    let (got, _) = waiter.join().map_err(|_| "waiter panicked")?;
    let woken_after = released.elapsed();
    match got {
        Ok(Some(Ok(()))) => {}
        Ok(Some(Err(e))) => return Err(step("waiter unlock", e)),
        Ok(None) => return Err("waiter timed out".into()),
        Err(e) => return Err(step("waiter", e)),
    }
    // Woken by the message, not by polling the 900 ms lease.
    if woken_after > Duration::from_millis(600) {
        return Err(format!("waiter woken {woken_after:?} after the release"));
    }

    let rival_guard = rival
        .lock("app:orders")
        .try_lock()
        .map_err(|e| step("rival try_lock", e))?
        .ok_or("rival: lock not free")?;
    if !lock.force_unlock().map_err(|e| step("force_unlock", e))? {
        return Err("force_unlock found nothing".into());
    }
    match rival_guard.unlock() {
        Err(Error::NotHeld { .. } | Error::Lost { .. }) => {}
        other => return Err(format!("unlock after force_unlock: {other:?}")),
    }
    match lock.unlock_with_request_id(&RequestId::new()) {
        Err(Error::NotHeld { .. }) => {}
        other => return Err(format!("unlock of a free lock: {other:?}")),
    }
    // Redisson's latched unlock, with a caller's request id.
    let held = lock.try_lock().map_err(|e| step("lock again", e))?;
    match lock.unlock_with_request_id(&RequestId::new()) {
        Ok(UnlockOutcome::Released) => {}
        other => return Err(format!("unlock with a request id: {other:?}")),
    }
    match held.map(LockGuard::unlock) {
        Some(Err(Error::NotHeld { .. } | Error::Lost { .. })) => {}
        other => return Err(format!("guard released elsewhere: {other:?}")),
    }
    // That unlock's latch lives for its TTL (about 2 s with these settings).
    let clean = support::eventually(Duration::from_secs(5), || {
        admin.cmd::<Vec<String>>(&["KEYS", "*"]).is_empty()
    });
    if !clean {
        return Err(format!(
            "keys left: {:?}",
            admin.cmd::<Vec<String>>(&["KEYS", "*"])
        ));
    }
    Ok(())
}

#[test]
fn acl_user_with_the_documented_commands_can_do_everything_and_is_refused_nothing() {
    let mut commands = REQUIRED.to_vec();
    commands.extend_from_slice(RECOMMENDED);
    let (server, admin) = acl_server(&commands);
    // A server that has never seen the scripts: SCRIPT LOAD is exercised.
    exercise(&locker_url(&server), &admin, Duration::from_millis(1500)).expect("everything works");
    let denials = admin.acl_denials();
    assert!(denials.is_empty(), "refused: {denials:?}");
}

#[test]
fn the_required_commands_alone_are_enough() {
    let (server, admin) = acl_server(REQUIRED);
    exercise(&locker_url(&server), &admin, Duration::from_millis(1500)).expect("everything works");
    // Only the optional `CLIENT SETINFO` (redis-rs) and `CLIENT SETNAME`
    // (the connections' names) may have been refused.
    let denials: Vec<_> = admin
        .acl_denials()
        .into_iter()
        .filter(|(_, object)| object != "client|setinfo" && object != "client|setname")
        .collect();
    assert!(denials.is_empty(), "refused: {denials:?}");
}

#[test]
fn every_required_command_is_needed() {
    let (server, admin) = acl_server(REQUIRED);
    let url = locker_url(&server);
    for command in REQUIRED {
        let _: () = admin.cmd(&["ACL", "SETUSER", "locker", &format!("-{command}")]);
        let _: () = admin.cmd(&["FLUSHALL"]);
        let _: () = admin.cmd(&["SCRIPT", "FLUSH"]);
        let _: () = admin.cmd(&["ACL", "LOG", "RESET"]);
        let outcome = exercise(&url, &admin, Duration::ZERO);
        // Give the watchdog's latch clean-up and the subscriber's
        // UNSUBSCRIBE time to be refused too.
        let refused = support::eventually(Duration::from_secs(2), || {
            admin
                .acl_denials()
                .iter()
                .any(|(reason, object)| reason == "command" && object == command)
        });
        assert!(
            refused,
            "without `{command}` the crate was never refused it ({outcome:?}): {:?}",
            admin.acl_denials()
        );
        let _: () = admin.cmd(&["ACL", "SETUSER", "locker", &format!("+{command}")]);
    }
}

#[test]
fn password_protected_server_works_end_to_end() {
    let server = RedisServer::start_with(&["--requirepass", REQUIREPASS]);
    let url = format!("redis://:{REQUIREPASS}@127.0.0.1:{}/", server.port());
    let admin = Admin::new(&url);
    exercise(&url, &admin, Duration::from_millis(1500)).expect("everything works");
    // No connection of the crate's stayed unauthenticated: every one of
    // them would have failed with NOAUTH above.
    let stats: String = admin.cmd(&["INFO", "stats"]);
    assert!(stats.contains("total_connections_received"), "{stats}");
}

#[test]
fn percent_encoded_password_with_special_characters_works() {
    let server = RedisServer::start_with(&["--requirepass", SPECIAL_PASSWORD]);
    let url = format!(
        "redis://:{SPECIAL_PASSWORD_ENCODED}@127.0.0.1:{}/",
        server.port()
    );
    let admin = Admin::new(&url);
    exercise(&url, &admin, Duration::ZERO).expect("everything works");
}

#[test]
fn credentials_never_appear_in_debug_or_display() {
    let server = RedisServer::start_with(&["--requirepass", REQUIREPASS]);
    let port = server.port();
    let url = format!("redis://:{REQUIREPASS}@127.0.0.1:{port}/");

    let builder = Client::builder(url.as_str());
    assert_no_secret("ClientBuilder Debug", &format!("{builder:?}"));
    let client = builder.build().expect("client");
    assert_no_secret("Client Debug", &format!("{client:?}"));
    let lock = client.lock("app:debug");
    assert_no_secret("Lock Debug", &format!("{lock:?}"));
    let guard = lock.lock().expect("lock");
    assert_no_secret("LockGuard Debug", &format!("{guard:?}"));
    drop(guard);

    let mut errors = Vec::new();
    for bad in [
        format!("redis://:{WRONG_PASSWORD}@127.0.0.1:{port}/"),
        format!("redis://default:{WRONG_PASSWORD}@127.0.0.1:{port}/"),
        format!("redis://nobody:{SPECIAL_PASSWORD_ENCODED}@127.0.0.1:{port}/"),
    ] {
        let result = Client::builder(bad.as_str())
            .connect_timeout(Duration::from_millis(500))
            .build();
        match result {
            Err(e) => errors.push(e),
            Ok(_) => panic!("a wrong password connected: {bad}"),
        }
    }
    for unparsable in [
        format!("redis://user:{WRONG_PASSWORD}@127.0.0.1:99999/"),
        format!("redis://user:{WRONG_PASSWORD}@127.0.0.1:{port}/notadb"),
        format!("redis://user:{WRONG_PASSWORD}@[::1/"),
        format!("http://user:{WRONG_PASSWORD}@127.0.0.1:{port}/"),
        format!("redis://user:{WRONG_PASSWORD}@127.0.0.1:{port}/?protocol=banana"),
        format!("redis://user:{SPECIAL_PASSWORD_ENCODED}%zz@127.0.0.1:{port}/"),
        format!("redis+unix://user:{WRONG_PASSWORD}@/nonexistent/redis.sock"),
        WRONG_PASSWORD.to_string(),
        format!("redis://user:{WRONG_PASSWORD}@host with spaces:{port}/"),
    ] {
        match Client::builder(unparsable.as_str())
            .connect_timeout(Duration::from_millis(500))
            .build()
        {
            Err(e) => errors.push(e),
            Ok(_) => panic!("connected with {unparsable}"),
        }
    }
    // A server that goes away: what the pool reports.
    let gone = {
        let mut doomed = RedisServer::start_with(&["--requirepass", REQUIREPASS]);
        let url = format!("redis://:{REQUIREPASS}@127.0.0.1:{}/", doomed.port());
        let client = Client::builder(url.as_str())
            .connect_timeout(Duration::from_millis(300))
            .build()
            .expect("client");
        doomed.stop();
        client
            .lock("app:gone")
            .try_lock()
            .expect_err("server is gone")
    };
    errors.push(gone);
    for e in &errors {
        assert_no_secret("Error Display", &e.to_string());
        assert_no_secret("Error Debug", &format!("{e:?}"));
        let mut source = std::error::Error::source(e);
        while let Some(inner) = source {
            assert_no_secret("Error source", &format!("{inner} {inner:?}"));
            source = inner.source();
        }
    }
}

#[test]
fn credentials_never_appear_in_log_lines() {
    support::logs::install();
    let mut server = RedisServer::start_with(&["--requirepass", REQUIREPASS]);
    let port = server.port();
    let url = format!("redis://:{REQUIREPASS}@127.0.0.1:{port}/");
    let admin = Admin::new(&url);

    // Wrong passwords.
    for user in ["", "default", "nobody"] {
        let bad = format!("redis://{user}:{WRONG_PASSWORD}@127.0.0.1:{port}/");
        let _ = Client::builder(bad.as_str())
            .connect_timeout(Duration::from_millis(300))
            .build();
    }

    let client = Client::builder(url.as_str())
        .watchdog_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        .unlock_retries(1, Duration::from_millis(10))
        .build()
        .expect("client");
    let rival = Client::builder(url.as_str())
        .connect_timeout(Duration::from_millis(300))
        .build()
        .expect("rival");
    let lock = client.lock("app:logged");
    let guard = lock.lock().expect("lock");

    // A waiter whose subscriber connection is killed: it reconnects (AUTH
    // again) and is still woken.
    let waiter = {
        let lock = rival.lock("app:logged");
        thread::spawn(move || {
            lock.try_lock_for(Duration::from_secs(5))
                .map(|g| g.is_some())
        })
    };
    assert!(support::eventually(Duration::from_secs(2), || rival
        .diagnostics()
        .waiters
        == 1));
    let _: i64 = admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    thread::sleep(Duration::from_millis(200));
    guard.unlock().expect("unlock");
    assert!(waiter.join().expect("waiter").expect("try_lock_for"));

    // The server changes its password: reconnects fail to authenticate.
    let held = lock.lock().expect("lock again");
    let waiter = {
        let lock = rival.lock("app:logged");
        thread::spawn(move || {
            lock.try_lock_for(Duration::from_millis(1500))
                .map(|g| g.is_some())
        })
    };
    assert!(support::eventually(Duration::from_secs(2), || rival
        .diagnostics()
        .waiters
        == 1));
    let _: () = admin.cmd(&["CONFIG", "SET", "requirepass", ADMIN_PASSWORD]);
    let admin = Admin::new(&format!("redis://:{ADMIN_PASSWORD}@127.0.0.1:{port}/"));
    let _: i64 = admin.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
    let _: i64 = admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    // The watchdog cannot renew (its connection is gone, new ones are
    // refused) and reports the lock lost.
    assert!(support::eventually(Duration::from_secs(3), || held.is_lost()));
    let _ = held.unlock();
    let _ = waiter.join().expect("waiter");

    // The server goes away altogether.
    let doomed = rival.lock("app:down");
    server.stop();
    let _ = doomed.try_lock_for(Duration::from_millis(500));
    thread::sleep(Duration::from_millis(500));
    drop(client);
    drop(rival);

    let lines = support::logs::lines();
    assert!(
        lines.iter().any(|line| line.starts_with("WARN")),
        "the failures above should have been logged: {lines:#?}"
    );
    for line in &lines {
        assert_no_secret("log line", line);
    }
}
