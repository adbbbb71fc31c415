//! Scenario 8: the paired measurement (`paired.rs`) on a Redis Cluster.
//!
//! The contender is redisson-lock's cluster client
//! (`Client::cluster_builder(every node)`), `lock(name)` + unlock as a user
//! calls them: it routes each script to the master of the name's slot over
//! its per-master pool. The floor is the true floor's scripts sent on one
//! plain connection per thread straight to that master: no slot table, no
//! routing, no redirect handling, nothing a cluster client could save. Both
//! unlock with the publish command the crate chose (`SPUBLISH` on a Redis 7
//! cluster with sharded pub/sub, as Redisson 4.7.0 does by default), read
//! from the owner's `INFO commandstats` around one crate unlock rather than
//! assumed.
//!
//! Thread `t` works on master `t mod masters` (sorted by address) on both
//! sides: names are picked by their slot (`redisson_lock::key_slot`) so that
//! with 4 threads on 3 masters every master serves some thread, and the
//! floor and the crate of one thread talk to the same master.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::common::Args;
use crate::contenders::floor_session_on;
use crate::session::crate_session;

/// A `CLUSTER SLOTS` reply: `(first slot, last slot, master "host:port")`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots(Vec<(u16, u16, String)>);

impl Slots {
    /// `CLUSTER SLOTS` from the node at `url`.
    fn read(url: &str) -> Result<Slots> {
        let mut con = redis::Client::open(url)?.get_connection()?;
        let reply: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con)?;
        Slots::parse(&reply)
    }

    fn parse(reply: &redis::Value) -> Result<Slots> {
        use redis::Value::{Array, BulkString, Int, SimpleString};
        let Array(ranges) = reply else {
            bail!("CLUSTER SLOTS: not an array: {reply:?}");
        };
        let mut out = Vec::with_capacity(ranges.len());
        for range in ranges {
            let Array(fields) = range else {
                bail!("CLUSTER SLOTS: a range is not an array");
            };
            let (Some(Int(start)), Some(Int(end)), Some(Array(master))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                bail!("CLUSTER SLOTS: bad range {range:?}");
            };
            let host = match master.first() {
                Some(BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                Some(SimpleString(s)) => s.clone(),
                _ => bail!("CLUSTER SLOTS: bad master {master:?}"),
            };
            let Some(Int(port)) = master.get(1) else {
                bail!("CLUSTER SLOTS: bad master port {master:?}");
            };
            let host = if host.is_empty() || host == "?" {
                "127.0.0.1".to_owned()
            } else {
                host
            };
            out.push((
                u16::try_from(*start)?,
                u16::try_from(*end)?,
                format!("{host}:{port}"),
            ));
        }
        Ok(Slots(out))
    }

    /// The master serving `slot`.
    fn owner(&self, slot: u16) -> Option<&str> {
        self.0
            .iter()
            .find(|(start, end, _)| *start <= slot && slot <= *end)
            .map(|(_, _, master)| master.as_str())
    }

    /// The master serving the slot of lock name `name`.
    fn owner_of(&self, name: &str) -> Option<&str> {
        self.owner(redisson_lock::key_slot(name.as_bytes()))
    }

    /// Every master, sorted by address.
    fn masters(&self) -> Vec<String> {
        let set: BTreeSet<&str> = self.0.iter().map(|(_, _, m)| m.as_str()).collect();
        set.into_iter().map(str::to_owned).collect()
    }
}

/// `<prefix>:<i>` for the first `i` whose slot `master` serves.
fn name_on(slots: &Slots, master: &str, prefix: &str) -> Result<String> {
    (0..100_000)
        .map(|i| format!("{prefix}:{i}"))
        .find(|name| slots.owner_of(name) == Some(master))
        .with_context(|| format!("no name {prefix}:N on {master}"))
}

/// Per thread, `[floor name, crate name]`, both served by master
/// `t mod masters`.
fn thread_names(slots: &Slots, threads: usize, run_id: &str) -> Result<Vec<[String; 2]>> {
    let masters = slots.masters();
    if masters.is_empty() {
        bail!("the cluster reports no master");
    }
    (0..threads)
        .map(|t| {
            let master = &masters[t % masters.len()];
            Ok([
                name_on(slots, master, &format!("bench:cluster:{run_id}:0:{t}"))?,
                name_on(slots, master, &format!("bench:cluster:{run_id}:1:{t}"))?,
            ])
        })
        .collect()
}

/// `calls` of `cmdstat_<command>` in an `INFO commandstats` text.
fn calls(info: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The publish command the crate's unlock sends (`publish` or `spublish`):
/// which of the two the owner of `name` counted more of around one crate
/// lock + unlock on it.
fn crate_publish(
    client: &redisson_lock::Client,
    owner: &redis::Client,
    name: &str,
) -> Result<&'static str> {
    let mut con = owner.get_connection()?;
    let mut counts = || -> Result<[u64; 2]> {
        let info: String = redis::cmd("INFO").arg("commandstats").query(&mut con)?;
        Ok([calls(&info, "publish"), calls(&info, "spublish")])
    };
    let before = counts()?;
    let mut session = crate_session(client.lock(name));
    session.lock()?;
    session.unlock()?;
    let after = counts()?;
    match (
        after[0].saturating_sub(before[0]),
        after[1].saturating_sub(before[1]),
    ) {
        (0, n) if n > 0 => Ok("spublish"),
        (n, 0) if n > 0 => Ok("publish"),
        other => bail!("cannot tell the crate's publish command: (publish, spublish) {other:?}"),
    }
}

/// Scenario 8: `--urls` (every node of the cluster), `--threads`, and the
/// paired measurement's `--rounds`, `--block-ms`, `--warmup`.
pub fn run(args: &Args) -> Result<Value> {
    let seeds: Vec<&str> = args.str("urls")?.split(',').collect();
    let watchdog = Duration::from_millis(args.num_or("watchdog-ms", 30_000)?);
    let threads = args.num_or("threads", 1)?.max(1) as usize;
    let run_id = args.str_or("run-id", "0");
    let slots = Slots::read(seeds[0])?;
    let names = thread_names(&slots, threads, run_id)?;
    let owner_url = |name: &str| -> Result<String> {
        let owner = slots.owner_of(name).context("a slot without a master")?;
        Ok(format!("redis://{owner}"))
    };
    let client = redisson_lock::Client::cluster_builder(seeds.iter().copied())
        .watchdog_timeout(watchdog)
        .build()?;
    let probe = format!("bench:cluster:{run_id}:probe");
    let publish = crate_publish(&client, &redis::Client::open(owner_url(&probe)?)?, &probe)?;
    let floor_id = uuid::Uuid::new_v4().to_string();
    let owners: Vec<String> = names
        .iter()
        .map(|[floor, _]| owner_url(floor))
        .collect::<Result<_>>()?;
    let mut out = crate::paired::measure(args, |t| {
        let [floor, crate_name] = &names[t];
        let redis = redis::Client::open(owners[t].as_str())?;
        Ok([
            floor_session_on(&redis, &floor_id, floor, t as u64 + 1, publish)?,
            crate_session(client.lock(crate_name)),
        ])
    })?;
    out["masters"] = json!(slots.masters().len());
    out["publish"] = json!(publish);
    out["owners"] = json!(owners);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value::{Array, BulkString, Int};

    fn range(start: i64, end: i64, host: &str, port: i64) -> redis::Value {
        Array(vec![
            Int(start),
            Int(end),
            Array(vec![
                BulkString(host.into()),
                Int(port),
                BulkString(b"id".to_vec()),
            ]),
        ])
    }

    fn three_masters() -> Slots {
        Slots::parse(&Array(vec![
            range(0, 5460, "127.0.0.1", 7002),
            range(5461, 10922, "127.0.0.1", 7000),
            range(10923, 16383, "", 7001),
        ]))
        .expect("parsed")
    }

    #[test]
    fn slots_parse_and_find_owners() {
        let slots = three_masters();
        assert_eq!(slots.owner(0), Some("127.0.0.1:7002"));
        assert_eq!(slots.owner(5461), Some("127.0.0.1:7000"));
        // An empty host is the queried node's: loopback here.
        assert_eq!(slots.owner(16383), Some("127.0.0.1:7001"));
        assert_eq!(
            slots.masters(),
            ["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]
        );
        // "foo" is in slot 12182 (CLUSTER KEYSLOT foo).
        assert_eq!(slots.owner_of("foo"), Some("127.0.0.1:7001"));
        assert!(Slots::parse(&Int(1)).is_err());
    }

    #[test]
    fn thread_names_spread_over_masters_and_pair_up() {
        let slots = three_masters();
        let names = thread_names(&slots, 4, "r1").expect("names");
        let masters = slots.masters();
        for (t, [floor, crate_name]) in names.iter().enumerate() {
            let want = Some(masters[t % 3].as_str());
            assert_eq!(slots.owner_of(floor), want, "thread {t} floor");
            assert_eq!(slots.owner_of(crate_name), want, "thread {t} crate");
            assert_ne!(floor, crate_name);
        }
    }

    #[test]
    fn commandstats_calls() {
        let info = "# Commandstats\r\ncmdstat_publish:calls=3,usec=9,usec_per_call=3.00\r\n\
                    cmdstat_spublish:calls=12,usec=30,usec_per_call=2.50\r\n";
        assert_eq!(calls(info, "publish"), 3);
        assert_eq!(calls(info, "spublish"), 12);
        assert_eq!(calls(info, "evalsha"), 0);
    }
}
