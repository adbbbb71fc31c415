//! Who a holder is: [`Client::identify_holders`] reads the names this
//! crate's connections give themselves (`CLIENT SETNAME
//! redisson-lock/<client id>/<pid>[/<application>]`, see
//! [`ClientBuilder::application_name`](crate::ClientBuilder::application_name))
//! back from `CLIENT LIST`.

use std::collections::BTreeMap;

use super::{Client, LockInfo};
use crate::error::Result;

/// The prefix of this crate's connection names.
const NAME_PREFIX: &str = "redisson-lock/";

/// A holder that is a client of this crate, as the server sees its
/// connections.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderProcess {
    /// The holding client's id (the first part of its owner fields).
    pub client_id: String,
    /// The process id of the program the client runs in.
    pub pid: u32,
    /// The application's name, when its builder was given one.
    pub application: Option<String>,
    /// The addresses (`host:port`, as the server sees them) of the client's
    /// connections to that server.
    pub addresses: Vec<String>,
}

impl Client {
    /// For each holder (and fair waiter) of `info` that is a client of this
    /// crate with connections to the lock's server: its process id,
    /// application name and addresses, by client id. One `CLIENT LIST`
    /// (one round trip; its reply lists every connection of the server,
    /// so it grows with them) on the server that holds the lock's key.
    ///
    /// A Redisson (Java) holder is never in it: Redisson does not put its
    /// client id in its connections' names (its `clientName` setting is a
    /// name shared by every client that sets it), so nothing ties a Java
    /// owner field to a connection, and this does not guess. Nor is a
    /// client of this crate older than this method, or one whose
    /// connections could not name themselves (an ACL without
    /// `client|setname`). Needs `client|list` under an ACL.
    pub fn identify_holders(&self, info: &LockInfo) -> Result<BTreeMap<String, HolderProcess>> {
        self.engine.check_process()?;
        let list: String =
            self.engine
                .with_connection(&info.name, "identify_holders", |con, _| {
                    Ok(redis::cmd("CLIENT").arg("LIST").query(con)?)
                })?;
        let wanted: Vec<&str> = info
            .holders
            .iter()
            .map(|h| h.client_id.as_str())
            .chain(info.queue.iter().map(|w| w.client_id.as_str()))
            .collect();
        let mut found = parse_client_list(&list);
        found.retain(|id, _| wanted.contains(&id.as_str()));
        Ok(found)
    }
}

/// This crate's clients in a `CLIENT LIST` reply, by client id.
fn parse_client_list(list: &str) -> BTreeMap<String, HolderProcess> {
    let mut found: BTreeMap<String, HolderProcess> = BTreeMap::new();
    for line in list.lines() {
        let field = |key: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        };
        let Some(name) = field("name").and_then(|n| n.strip_prefix(NAME_PREFIX)) else {
            continue;
        };
        let mut parts = name.splitn(3, '/');
        let (Some(client_id), Some(Ok(pid))) = (parts.next(), parts.next().map(str::parse)) else {
            continue;
        };
        let application = parts.next().map(str::to_owned);
        let entry = found
            .entry(client_id.to_owned())
            .or_insert_with(|| HolderProcess {
                client_id: client_id.to_owned(),
                pid,
                application,
                addresses: Vec::new(),
            });
        if let Some(addr) = field("addr")
            && !entry.addresses.iter().any(|a| a == addr)
        {
            entry.addresses.push(addr.to_owned());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_crates_connections_are_read_back_from_client_list() {
        let list = "id=3 addr=127.0.0.1:50001 laddr=127.0.0.1:6379 fd=8 name=redisson-lock/abc/4242/billing age=1\n\
                    id=4 addr=127.0.0.1:50002 laddr=127.0.0.1:6379 fd=9 name=redisson-lock/abc/4242/billing age=1\n\
                    id=5 addr=10.0.0.2:40000 laddr=127.0.0.1:6379 fd=10 name=redisson-lock/def/7 age=1\n\
                    id=6 addr=10.0.0.3:40000 laddr=127.0.0.1:6379 fd=11 name=redisson_java age=1\n\
                    id=7 addr=10.0.0.4:40000 laddr=127.0.0.1:6379 fd=12 name= age=1\n\
                    id=8 addr=10.0.0.5:40000 fd=13 name=redisson-lock/ghi/notapid age=1\n";
        let found = parse_client_list(list);
        assert_eq!(found.len(), 2);
        let abc = &found["abc"];
        assert_eq!(abc.pid, 4242);
        assert_eq!(abc.application.as_deref(), Some("billing"));
        assert_eq!(abc.addresses, ["127.0.0.1:50001", "127.0.0.1:50002"]);
        let def = &found["def"];
        assert_eq!((def.pid, def.application.as_deref()), (7, None));
    }
}
