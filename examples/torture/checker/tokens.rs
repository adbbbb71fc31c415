//! Check 2 of the module docs (`checker.rs`): fencing tokens strictly
//! increase in acquisition order (`Reader::token_order`): no token handed
//! out twice, real-time order, and no greater token handed out while a hold
//! was valid.

use std::collections::{HashMap, HashSet};

use super::checks::Span;
use super::read::Reader;

impl Reader {
    /// Check 2 over the acquisitions (invoked, acquired, token, hold) of one
    /// lock and its holds' spans.
    pub(super) fn token_order(
        &mut self,
        lock: &str,
        mut acquisitions: Vec<(u64, u64, u64, usize)>,
        spans: &[Span],
    ) {
        let mut reported: HashSet<(usize, usize)> = HashSet::new();
        let mut seen: HashMap<u64, usize> = HashMap::new();
        for &(_, acquired, token, index) in &acquisitions {
            if let Some(&first) = seen.get(&token) {
                let detail = format!(
                    "token {token} handed out twice: {} and {}",
                    self.describe(first),
                    self.describe(index)
                );
                self.report
                    .violate("duplicate_token", lock, acquired, detail);
                reported.insert((first, index));
                reported.insert((index, first));
            } else {
                seen.insert(token, index);
            }
        }
        // Real-time order: acquired(A) < invoked(B) => token(A) < token(B).
        acquisitions.sort_by_key(|&(_, acquired, _, index)| (acquired, index));
        let mut best: Vec<(u64, usize)> = Vec::with_capacity(acquisitions.len());
        for &(_, _, token, index) in &acquisitions {
            let previous = best.last().copied();
            best.push(match previous {
                Some((max, at)) if max >= token => (max, at),
                _ => (token, index),
            });
        }
        for &(invoked, acquired, token, index) in &acquisitions {
            let before = acquisitions.partition_point(|&(_, a, _, _)| a < invoked);
            if before == 0 {
                continue;
            }
            let (max, at) = best[before - 1];
            if max >= token && reported.insert((at, index)) {
                let detail = format!(
                    "{} completed before {} was invoked, with a token not smaller",
                    self.describe(at),
                    self.describe(index)
                );
                self.report.violate("token_order", lock, acquired, detail);
            }
        }
        // A hold B is valid, its key in Redis, from its acquire's effect
        // until its valid part ends. An acquisition A by another thread
        // that completed before then took effect inside that time if its
        // token is greater (tokens follow the effects): both held the lock.
        // So: acquired(A) < valid_end(B) => token(A) < token(B).
        // `top` is the prefix's largest token, and the largest of another
        // thread than the largest's (B's own reentries do not count).
        let mut top: Vec<[Option<(u64, usize)>; 2]> = Vec::with_capacity(acquisitions.len());
        let mut current: [Option<(u64, usize)>; 2] = [None, None];
        for &(_, _, token, index) in &acquisitions {
            let who = |i: usize| self.holds[i].who.as_str();
            match current[0] {
                Some((max, first)) if max >= token => {
                    if who(first) != who(index) && current[1].is_none_or(|(m, _)| token > m) {
                        current[1] = Some((token, index));
                    }
                }
                Some((_, first)) => {
                    if who(first) != who(index) {
                        current[1] = current[0];
                    }
                    current[0] = Some((token, index));
                }
                None => current[0] = Some((token, index)),
            }
            top.push(current);
        }
        for b in spans {
            let Some(token) = self.holds[b.index].token else {
                continue;
            };
            let before = acquisitions.partition_point(|&(_, a, _, _)| a < b.valid_end);
            if before == 0 {
                continue;
            }
            let candidate = top[before - 1]
                .into_iter()
                .flatten()
                .find(|&(_, i)| self.holds[i].who != self.holds[b.index].who);
            if let Some((max, at)) = candidate
                && max > token
                && reported.insert((at, b.index))
            {
                let detail = format!(
                    "{} was acquired while {} was valid, with a greater token",
                    self.describe(at),
                    self.describe(b.index)
                );
                self.report.violate(
                    "token_order",
                    lock,
                    self.holds[at].acquired.unwrap_or(0),
                    detail,
                );
            }
        }
    }
}
