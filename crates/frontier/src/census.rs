//! How many origins are in each robots state, kept in memory: built from the store at the
//! first question, then updated by every robots outcome applied, and for the origins whose
//! state changes with time alone (a copy expiring, a failure run reaching fallback) by
//! decoding just those when their instant has passed. Nothing is held until it is asked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use robots_policy::state::RobotsStatus;

use crate::sched::robots_gate::OriginState;

/// The census. Empty and not `ready` until the first question.
#[derive(Debug, Default)]
pub(crate) struct RobotsCensus {
    /// origin -> (state at the last look, instant from which time alone may change it)
    origins: HashMap<Arc<str>, (&'static str, u64)>,
    counts: BTreeMap<&'static str, u64>,
    pub(crate) ready: bool,
}

/// The instant after `now_ms` at which `status` changes by time alone (u64::MAX: never).
fn changes_at(status: &RobotsStatus, now_ms: u64) -> u64 {
    [status.expires_at, status.fallback_at]
        .into_iter()
        .flatten()
        .map(|t| t.0)
        .filter(|&t| t > now_ms)
        .min()
        .unwrap_or(u64::MAX)
}

impl RobotsCensus {
    /// Record `origin`'s new state as of `now_ms` (a no-op until the census is built).
    pub(crate) fn note(&mut self, origin: &str, state: &OriginState, now_ms: u64) {
        if !self.ready {
            return;
        }
        self.set(origin, &state.status(now_ms), now_ms);
    }

    /// Record `origin`'s status while building or refreshing.
    pub(crate) fn set(&mut self, origin: &str, status: &RobotsStatus, now_ms: u64) {
        let kind = status.kind.as_str();
        let entry = (kind, changes_at(status, now_ms));
        if let Some((old, _)) = self.origins.insert(Arc::from(origin), entry) {
            if let Some(n) = self.counts.get_mut(old) {
                *n = n.saturating_sub(1);
            }
        }
        *self.counts.entry(kind).or_default() += 1;
    }

    /// Origins whose state may have changed by time alone at `now_ms`.
    pub(crate) fn due(&self, now_ms: u64) -> Vec<Arc<str>> {
        self.origins
            .iter()
            .filter(|(_, &(_, at))| at <= now_ms)
            .map(|(o, _)| o.clone())
            .collect()
    }

    /// Origins per state (states with none left out).
    pub(crate) fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.counts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&k, &n)| (k, n))
            .collect()
    }
}
