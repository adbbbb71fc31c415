//! What an error reply from the server means to this client, decided once,
//! here, from its code: the cluster router, the renewals, the subscriber,
//! the connections (the Sentinel former-master rule) and
//! [`Error::is_transient`] read an error's [`Verdict`], never its code, as
//! redis-rs's connections read its `RetryMethod`.

use redis::{RedisError, Value};

use super::Error;

/// What a server's error reply says (see the module docs). Every verdict
/// but [`Verdict::WrongType`] and [`Verdict::Other`] proves that the
/// command did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `MOVED`: the key's slot is served by another master now, which the
    /// reply names.
    Moved,
    /// `ASK`: the key's slot is being migrated and the key is at the node
    /// the reply names: send it there once, after `ASKING`.
    Ask,
    /// `TRYAGAIN`: the keys of a command are split by a slot migration
    /// under way; passes in moments.
    TryAgain,
    /// `BUSY` (a script running past its time limit) or `LOADING` (the
    /// server is loading its data set): passes by itself, on that server.
    Busy,
    /// `MASTERDOWN`: a replica that lost its link to its master.
    MasterDown,
    /// `CLUSTERDOWN`: the cluster serves no slot, or not this one, for now
    /// (a failure being decided, a failover).
    ClusterDown,
    /// `READONLY`: a write to a replica; after a failover, the former
    /// master.
    ReadOnly,
    /// `NOSCRIPT`: the server does not have the script; load it and send
    /// the call again.
    NoScript,
    /// `WRONGPASS` or `NOAUTH`: the credentials were refused, or none were
    /// given to a server that wants some.
    Unauthenticated,
    /// `NOPERM`: the ACL user may not run this command or touch this key.
    Forbidden,
    /// `WRONGTYPE`: a key holds a value of another type than the command
    /// (or script) reads; for a lock's key, it was overwritten.
    WrongType,
    /// Anything else: the command's own failure (a script's error, ...),
    /// or no server error at all.
    Other,
}

impl Verdict {
    /// The verdict on an error reply whose code is `code`.
    pub fn of_code(code: &str) -> Verdict {
        match code {
            "MOVED" => Verdict::Moved,
            "ASK" => Verdict::Ask,
            "TRYAGAIN" => Verdict::TryAgain,
            "BUSY" | "LOADING" => Verdict::Busy,
            "MASTERDOWN" => Verdict::MasterDown,
            "CLUSTERDOWN" => Verdict::ClusterDown,
            "READONLY" => Verdict::ReadOnly,
            "NOSCRIPT" => Verdict::NoScript,
            "WRONGPASS" | "NOAUTH" => Verdict::Unauthenticated,
            "NOPERM" => Verdict::Forbidden,
            "WRONGTYPE" => Verdict::WrongType,
            _ => Verdict::Other,
        }
    }

    /// The verdict on `e`: [`Verdict::Other`] for an error that is not the
    /// server's (I/O, a timeout, a parse error).
    pub fn of_redis(e: &RedisError) -> Verdict {
        e.code().map_or(Verdict::Other, Verdict::of_code)
    }

    /// The verdict on `e`: [`Verdict::Other`] for an error that is not the
    /// server's.
    pub fn of(e: &Error) -> Verdict {
        match e {
            Error::Redis(e) => Verdict::of_redis(e),
            _ => Verdict::Other,
        }
    }

    /// The verdict on one reply of a pipeline (whose errors come as
    /// values): [`Verdict::Other`] for a reply that is no error.
    pub fn of_reply(reply: &Value) -> Verdict {
        match reply {
            Value::ServerError(e) => Verdict::of_code(e.code()),
            _ => Verdict::Other,
        }
    }

    /// Refused for a while, for a reason that passes: the command may be
    /// sent again after a pause (the cluster router's retries; a redirect
    /// is followed instead).
    pub fn passes(self) -> bool {
        matches!(
            self,
            Verdict::TryAgain
                | Verdict::Busy
                | Verdict::MasterDown
                | Verdict::ClusterDown
                | Verdict::ReadOnly
        )
    }

    /// The topology changed under the command (a failover, a master
    /// lost): read it again before sending it again. A `MOVED` says where
    /// to, and is recorded instead.
    pub fn topology_changed(self) -> bool {
        matches!(
            self,
            Verdict::ClusterDown | Verdict::MasterDown | Verdict::ReadOnly
        )
    }

    /// The server is a former master (Sentinel, after a failover): look
    /// the master up again, and retire the connection. Under Sentinel only
    /// (`crate::net::endpoint::Endpoint::is_former_master`): a client
    /// pointed at a replica by its URL stays pointed at it.
    pub fn is_former_master(self) -> bool {
        self == Verdict::ReadOnly
    }

    /// A subscription refused with this is served elsewhere now, or for a
    /// moment by nobody (in a cluster): its waiters subscribe again at the
    /// slot's master.
    pub fn served_elsewhere(self) -> bool {
        matches!(
            self,
            Verdict::Moved | Verdict::Ask | Verdict::ClusterDown | Verdict::TryAgain
        )
    }

    /// What [`Error::is_transient`] says of a server error: `BUSY`,
    /// `LOADING`, `TRYAGAIN` and `MASTERDOWN` pass by themselves.
    /// `CLUSTERDOWN` and `READONLY` are not: the cluster router and the
    /// Sentinel rule have retried them before a caller sees them, and a
    /// server that is a replica by configuration stays one.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Verdict::TryAgain | Verdict::Busy | Verdict::MasterDown
        )
    }

    /// The server refuses this client's credentials or its ACL user: as
    /// permanent as a wrong password.
    pub fn refuses_client(self) -> bool {
        matches!(self, Verdict::Unauthenticated | Verdict::Forbidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_reads_as_before() {
        let all = [
            "MOVED",
            "ASK",
            "TRYAGAIN",
            "BUSY",
            "LOADING",
            "MASTERDOWN",
            "CLUSTERDOWN",
            "READONLY",
            "NOSCRIPT",
            "WRONGPASS",
            "NOAUTH",
            "NOPERM",
            "WRONGTYPE",
            "ERR",
        ];
        let which = |pick: fn(Verdict) -> bool| -> Vec<&str> {
            all.into_iter()
                .filter(|code| pick(Verdict::of_code(code)))
                .collect()
        };
        // The sets each reader had spelled out before the verdict.
        assert_eq!(
            which(Verdict::passes),
            [
                "TRYAGAIN",
                "BUSY",
                "LOADING",
                "MASTERDOWN",
                "CLUSTERDOWN",
                "READONLY"
            ]
        );
        assert_eq!(
            which(Verdict::topology_changed),
            ["MASTERDOWN", "CLUSTERDOWN", "READONLY"]
        );
        assert_eq!(which(Verdict::is_former_master), ["READONLY"]);
        assert_eq!(
            which(Verdict::served_elsewhere),
            ["MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"]
        );
        assert_eq!(
            which(Verdict::is_transient),
            ["TRYAGAIN", "BUSY", "LOADING", "MASTERDOWN"]
        );
        assert_eq!(
            which(Verdict::refuses_client),
            ["WRONGPASS", "NOAUTH", "NOPERM"]
        );
        assert_eq!(which(|v| v == Verdict::WrongType), ["WRONGTYPE"]);
        assert_eq!(which(|v| v == Verdict::Other), ["ERR"]);
    }

    #[test]
    fn a_reply_and_an_error_read_alike() {
        let reply = redis::parse_redis_value(b"-READONLY You can't write against a replica.\r\n")
            .expect("a reply");
        assert_eq!(Verdict::of_reply(&reply), Verdict::ReadOnly);
        let Value::ServerError(e) = reply else {
            panic!("not an error: {reply:?}");
        };
        let error = Error::Redis(RedisError::from(e));
        assert_eq!(Verdict::of(&error), Verdict::ReadOnly);
        assert_eq!(Verdict::of_reply(&Value::Okay), Verdict::Other);
        assert_eq!(
            Verdict::of(&Error::Unavailable { reason: "x".into() }),
            Verdict::Other
        );
    }
}
