//! One acquire attempt of a [`PermitExpirableSemaphore`], with Redisson's
//! compensation when replica sync is checked and no replica acknowledged
//! it (docs/synchronizers.md: the ids are released, which publishes,
//! and the acquire is sent again).

use super::*;

impl PermitExpirableSemaphore {
    /// One acquire attempt of `n` permits: their ids and when the attempt
    /// that took them was sent (before its expiry was computed), or the
    /// nearest expiry to wait for. With replica sync checked, an acquisition no
    /// replica acknowledged is undone by releasing its ids (Redisson's
    /// `release(ids)`, which publishes) and sent again with new ids, at
    /// most the client's retry attempts, `retry_delay` apart, and while
    /// `deadline` has not passed; then [`Error::NotReplicated`].
    pub(super) fn attempt(
        &self,
        n: u32,
        lease: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Attempted<(Vec<PermitId>, Instant)>> {
        let config = &self.engine.config;
        let mut retries = 0;
        loop {
            let ids: Vec<PermitId> = (0..n).map(|_| PermitId::random()).collect();
            let raw: Vec<[u8; 16]> = ids.iter().map(|id| id.0).collect();
            let sent = Instant::now();
            let (found, synced) = self.attempt_once(&raw, lease)?;
            let TryAcquired::No { nearest_expiry_ms } = found else {
                let Some(error) = synced.error("acquire", &self.keys.name) else {
                    return Ok(Attempted::Done((ids, sent)));
                };
                if !self.engine.checks_replicas() {
                    log::warn!("redisson-lock: {error}");
                    return Ok(Attempted::Done((ids, sent)));
                }
                if !self.undo(&raw)? {
                    return Ok(Attempted::Done((ids, sent)));
                }
                let past = |at: Instant| deadline.is_some_and(|deadline| at >= deadline);
                if retries >= config.retry_attempts || past(Instant::now() + config.retry_delay) {
                    return Err(error);
                }
                retries += 1;
                std::thread::sleep(config.retry_delay);
                continue;
            };
            let hint = nearest_expiry_ms.map(|at| {
                let now = i64::try_from(epoch_millis()).unwrap_or(i64::MAX);
                Duration::from_millis(at.saturating_sub(now).max(0).unsigned_abs())
            });
            return Ok(Attempted::Retry { hint });
        }
    }

    /// The acquire script for the ids `raw`, sent once (followed by a
    /// `WAIT` with replica sync on): a lost reply is
    /// [`Error::OutcomeUnknown`].
    fn attempt_once(
        &self,
        raw: &[[u8; 16]],
        lease: Option<Duration>,
    ) -> Result<(TryAcquired, Synced)> {
        let now = epoch_millis();
        let expiry = protocol::expiry_score(now, lease);
        let publish = self.engine.publish;
        let encoding = self.engine.config.permit_ids;
        self.synced("acquire", false, |con| {
            protocol::try_acquire(con, &self.keys, raw, expiry, now, publish, encoding)
        })
    }

    /// Releases the ids `raw` of an acquisition no replica acknowledged,
    /// once and without a `WAIT` (the replicas that did not see them taken
    /// need not see them returned): `true` when given back. A lost reply
    /// makes the acquire's outcome unknown; any other failure leaves the
    /// permits taken, for the caller (`false`, logged).
    fn undo(&self, raw: &[[u8; 16]]) -> Result<bool> {
        let publish = self.engine.publish;
        let undone = self
            .engine
            .with_connection(&self.keys.name, "release", |con, resend| {
                if resend {
                    return Err(self.unknown(
                        "release",
                        "the connection dropped after the request was sent".to_owned(),
                    ));
                }
                protocol::try_release_many(con, &self.keys, raw, epoch_millis(), publish)
            });
        match undone {
            Ok(_) => Ok(true),
            Err(e) if reply_lost(&e) || matches!(e, Error::OutcomeUnknown { .. }) => Err(self
                .unknown(
                    "acquire",
                    format!("undoing an acquire no replica acknowledged: {e}"),
                )),
            Err(e) => {
                log::warn!(
                    "redisson-lock: undoing an unreplicated acquire of {} permit(s) of \
                     semaphore `{}` failed ({e}): the permits stay taken",
                    raw.len(),
                    self.keys.name
                );
                Ok(false)
            }
        }
    }
}
