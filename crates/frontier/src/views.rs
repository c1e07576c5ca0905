//! What the frontier shows of itself, read-only: hosts and their records, origins and
//! their robots states, IP groups, drop records, the queued URLs of a host, and the totals
//! behind the gauges (for the admin API, `frontierd stats` and /metrics). Nothing here
//! changes what is scheduled.

use std::net::IpAddr;

use crate::api::{host_of_origin, Frontier, Inner};
use crate::crawl::canonicalize_stored;
use crate::error::Result;
use crate::events::{HostTotals, OriginView};
use crate::sched::ipgroup::IpGroupView;
use crate::store::codec::{DropRecord, HostRecord, QueueEntry};
use crate::store::keys;
use crate::store::packed::Segment;
use crate::work::url_hash;

impl Frontier {
    /// The politeness key of a host in memory (by the id its leases carry).
    pub fn host_key_of(&self, host_id: u64) -> Option<String> {
        self.inner
            .lock()
            .sched
            .host(host_id)
            .map(|h| h.key.to_string())
    }

    /// The IP address a politeness key's fetches last connected to, if known.
    pub fn host_address(&self, key: &str) -> Result<Option<IpAddr>> {
        // under the lock: a checkpoint moves records from the journal to `H`
        let inner = self.inner.lock();
        if let Some(h) = inner.sched.host_of_key(key) {
            if h.ip.is_some() {
                return Ok(h.ip);
            }
        }
        let stored = match inner.journal.evicted.get(key) {
            Some(v) => Some(v.clone()),
            None => self.store.get(&keys::host(key))?,
        };
        match stored {
            Some(v) => self.stored_address(key, &v),
            None => Ok(None),
        }
    }

    /// The IP groups of the hosts in memory (hosts with queued or in-flight work), by
    /// address: which hosts share it, its requests in flight and next allowed instant.
    pub fn ip_groups(&self) -> Vec<IpGroupView> {
        self.inner.lock().sched.ip_group_views()
    }

    /// How many IP groups have hosts in memory.
    pub fn ip_group_count(&self) -> usize {
        self.inner.lock().sched.ip_group_count()
    }

    // ---------------------------------------------------------------- inspection

    /// The drop / give-up record of a URL, if any.
    pub fn drop_record(&self, url: &str) -> Result<Option<DropRecord>> {
        let Ok((_, c)) = canonicalize_stored(url, self.cfg.max_url_len) else {
            return Ok(None);
        };
        match self.store.get(&keys::dropped(url_hash(&c)))? {
            None => Ok(None),
            Some(v) => Ok(Some(DropRecord::decode(&v)?)),
        }
    }

    /// The stored record of a politeness key.
    pub fn host_record(&self, key: &str) -> Result<Option<HostRecord>> {
        // under the lock: a checkpoint moves records from the journal to `H`
        let inner = self.inner.lock();
        if let Some(h) = inner.sched.host_of_key(key) {
            return Ok(Some(h.rec));
        }
        if let Some(v) = inner.journal.evicted.get(key) {
            return Ok(Some(HostRecord::decode(v)?));
        }
        match self.store.get(&keys::host(key))? {
            None => Ok(None),
            Some(v) => Ok(Some(HostRecord::decode(&v)?)),
        }
    }

    /// The stored robots record of an origin (robots-policy's encoding).
    pub fn robots_record(&self, origin: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.store.get(&keys::robots(origin))?)
    }

    /// URLs queued, hosts in back-off and hosts paused, for gauges. Read from memory only:
    /// a host with queued URLs or fetches in flight is always in memory, so no stored
    /// record needs reading; hosts without work that are still backing off are not
    /// counted. (Listing every host with [`Frontier::hosts`] for this scanned and
    /// decoded every record under the scheduler lock at each stats tick.)
    pub fn host_totals(&self, now_ms: u64) -> HostTotals {
        let inner = self.inner.lock();
        let mut t = HostTotals {
            paused: inner.sched.paused_count() as u64,
            ..HostTotals::default()
        };
        for h in inner.sched.hosts().map(|(_, h)| h) {
            t.queued += h.rec.counters.queued;
            t.in_flight += u64::from(h.rec.in_flight);
            if h.rec.backoff_until_ms > now_ms {
                t.in_backoff += 1;
            }
        }
        t
    }

    /// The `n` hosts in memory (those with queued or in-flight work) ranked by `by`,
    /// first the highest: what the status page's "busiest" and "slowest" tables show. In
    /// memory only, so cheap enough to ask every few seconds at a million hosts.
    pub fn hosts_ranked(&self, by: HostRank, n: usize) -> Vec<(String, HostRecord)> {
        let inner = self.inner.lock();
        let score = |r: &HostRecord| match by {
            HostRank::Completed => u64::from(r.counters.completed),
            HostRank::Slowest => r.last_response_ms.into(),
            HostRank::Queued => r.counters.queued,
        };
        // the best `n` so far in a min-heap of `n`: one pass, no list of every host, since
        // the scheduler's lock is held (a status page asks every few seconds)
        let mut best: std::collections::BinaryHeap<
            std::cmp::Reverse<(u64, std::cmp::Reverse<&str>)>,
        > = std::collections::BinaryHeap::with_capacity(n.min(inner.sched.host_count()) + 1);
        for (_, h) in inner.sched.hosts() {
            best.push(std::cmp::Reverse((
                score(&h.rec),
                std::cmp::Reverse(&*h.key),
            )));
            if best.len() > n {
                best.pop();
            }
        }
        // highest first, then by key so equal scores come out the same way each time
        best.into_sorted_vec()
            .into_iter()
            .filter_map(|std::cmp::Reverse((_, std::cmp::Reverse(key)))| {
                let rec = inner.sched.host_of_key(key)?.rec;
                Some((key.to_string(), rec))
            })
            .collect()
    }

    /// Politeness keys (in key order) with their records, up to `limit`, starting after
    /// `after` when given. Reads `limit` stored records from `after` on, and walks the
    /// hosts in memory keeping only the first `limit`: a page of a million hosts costs a
    /// page, not a million.
    pub fn hosts(&self, after: Option<&str>, limit: usize) -> Result<Vec<(String, HostRecord)>> {
        // held throughout: a checkpoint moves records from the journal to `H`
        let inner = self.inner.lock();
        let wanted = |key: &str| after.is_none_or(|a| key > a);
        let mut out: std::collections::BTreeMap<String, HostRecord> = Default::default();
        // the first `limit` stored keys after `after` ...
        let from = match after {
            // the key just after `after`'s own
            Some(a) => {
                let mut k = keys::host(a);
                k.push(0);
                k
            }
            None => b"H".to_vec(),
        };
        for kv in self.store.scan_prefix_from(b"H", &from).take(limit) {
            let (k, v) = kv?;
            let key = String::from_utf8_lossy(&k[1..]).into_owned();
            if wanted(&key) {
                out.insert(key, HostRecord::decode(&v)?);
            }
        }
        // ... merged with the records that are newer than `H` (in memory, or journaled),
        // keeping the first `limit` keys
        let mut merge = |key: &str, rec: HostRecord| {
            if !wanted(key) || limit == 0 {
                return;
            }
            if out.len() >= limit
                && out
                    .last_key_value()
                    .is_some_and(|(last, _)| key > last.as_str())
            {
                return;
            }
            out.insert(key.to_string(), rec);
            if out.len() > limit {
                out.pop_last();
            }
        };
        for (key, v) in &inner.journal.evicted {
            merge(key, HostRecord::decode(v)?);
        }
        for h in inner.sched.hosts().map(|(_, h)| h) {
            merge(&h.key, h.rec);
        }
        Ok(out.into_iter().collect())
    }

    /// The robots states of the origins under each of `keys`, by the rule of
    /// [`Frontier::origins_of`], at `now_ms`: one walk of the robots census (kept in
    /// memory; built at the first question), no record decoded but those whose state time
    /// alone has changed. A key with no origin is left out.
    pub fn robots_kinds_under(
        &self,
        keys: &[&str],
        now_ms: u64,
    ) -> Result<std::collections::HashMap<String, Vec<robots_policy::state::RobotsStateKind>>> {
        let wanted: std::collections::HashSet<&str> = keys.iter().copied().collect();
        let mut out: std::collections::HashMap<String, Vec<_>> = Default::default();
        let mut guard = self.inner.lock();
        self.refresh_census(&mut guard, now_ms)?;
        for (origin, kind) in guard.census.entries() {
            keys_over(origin, |key| {
                if let Some(k) = wanted.get(key) {
                    out.entry(k.to_string()).or_default().push(kind);
                }
            });
        }
        Ok(out)
    }

    /// The hosts (in key order, with their records) with an origin in robots state `kind`
    /// at `now_ms`, found from the census's origins in that state; None if more than
    /// `max_origins` are in it (walking the hosts is then the cheaper way).
    pub fn hosts_with_origin_in(
        &self,
        kind: robots_policy::state::RobotsStateKind,
        now_ms: u64,
        max_origins: usize,
    ) -> Result<Option<Vec<(String, HostRecord)>>> {
        let mut origins = Vec::new();
        {
            let mut guard = self.inner.lock();
            self.refresh_census(&mut guard, now_ms)?;
            for (origin, k) in guard.census.entries() {
                if k == kind {
                    if origins.len() >= max_origins {
                        return Ok(None);
                    }
                    origins.push(origin.to_string());
                }
            }
        }
        let mut keys = std::collections::BTreeSet::new();
        for origin in &origins {
            keys_over(origin, |key| {
                keys.insert(key.to_string());
            });
        }
        let mut out = Vec::new();
        for key in keys {
            if let Some(rec) = self.host_record(&key)? {
                out.push((key, rec));
            }
        }
        Ok(Some(out))
    }

    /// Every origin with a robots record, in origin order, decoded at `now_ms`.
    pub fn origins(&self, now_ms: u64) -> Result<Vec<OriginView>> {
        self.origins_where(now_ms, |_| true)
    }

    /// The origins under a politeness key: the key itself (origin keys), its host, or a
    /// subdomain of it (host and domain keys), decoded at `now_ms`.
    pub fn origins_of(&self, key: &str, now_ms: u64) -> Result<Vec<OriginView>> {
        self.origins_where(now_ms, |origin| {
            let mut under = false;
            keys_over(origin, |k| under |= k == key);
            under
        })
    }

    /// How many origins are in each robots state at `now_ms` (state name -> origins).
    /// Kept in memory (see `census.rs`): the first call reads every record, later calls
    /// decode only the origins whose state time alone may have changed.
    pub fn robots_state_counts(
        &self,
        now_ms: u64,
    ) -> Result<std::collections::BTreeMap<&'static str, u64>> {
        let mut guard = self.inner.lock();
        self.refresh_census(&mut guard, now_ms)?;
        Ok(guard.census.counts())
    }

    /// Builds the robots census at the first call, then decodes again the origins whose
    /// state may have changed with time alone by `now_ms`.
    pub(crate) fn refresh_census(&self, inner: &mut Inner, now_ms: u64) -> Result<()> {
        let backend = inner.robots.backend().clone();
        if !inner.census.ready {
            for kv in self.store.scan_prefix(b"R") {
                let (k, v) = kv?;
                let origin = String::from_utf8_lossy(&k[1..]).into_owned();
                match backend.decode(&v) {
                    Ok(state) => inner.census.set(&origin, &state.status(now_ms), now_ms),
                    Err(e) => {
                        tracing::warn!(%origin, error = %e, "robots record not decodable; not counted")
                    }
                }
            }
            inner.census.ready = true;
        }
        for origin in inner.census.due(now_ms) {
            if let Some(v) = self.store.get(&keys::robots(&origin))? {
                let state = backend.decode(&v)?;
                inner.census.set(&origin, &state.status(now_ms), now_ms);
            }
        }
        Ok(())
    }

    fn origins_where(&self, now_ms: u64, keep: impl Fn(&str) -> bool) -> Result<Vec<OriginView>> {
        let backend = self.inner.lock().robots.backend().clone();
        let mut out = Vec::new();
        for kv in self.store.scan_prefix(b"R") {
            let (k, v) = kv?;
            let origin = String::from_utf8_lossy(&k[1..]).into_owned();
            if !keep(&origin) {
                continue;
            }
            match backend.decode(&v) {
                Ok(state) => out.push(OriginView {
                    status: state.status(now_ms),
                    sitemaps: state.sitemaps(),
                    origin,
                }),
                // one bad record does not hide the others
                Err(e) => {
                    tracing::warn!(%origin, error = %e, "robots record not decodable; skipped")
                }
            }
        }
        Ok(out)
    }

    /// Every queued (not in flight) URL of a politeness key: in queue order, then those
    /// waiting out a retry back-off or set aside while their origin is held.
    pub fn queued_urls(&self, key: &str) -> Result<Vec<String>> {
        Ok(self
            .queued_entries(key)?
            .into_iter()
            .map(|e| e.url)
            .collect())
    }

    /// [`Frontier::queued_urls`] with each URL's whole entry (depth, via, hops, kind,
    /// attempts, recrawl record): what another frontier needs to queue it again.
    pub fn queued_entries(&self, key: &str) -> Result<Vec<QueueEntry>> {
        let inner = self.inner.lock();
        let Some(h) = inner.sched.host_of_key(key) else {
            return Ok(Vec::new());
        };
        let id = h.rec.id;
        let mut out = Vec::new();
        for &seq in &h.aside().front {
            if let Some(b) = self.entry_bytes(id, h, seq)? {
                out.push(QueueEntry::decode(&b)?);
            }
        }
        let head = h.rec.head_seq;
        for s in &h.segs {
            if s.end() <= head {
                continue;
            }
            let Some(v) = self.store.get(&crate::store::keys::segment_key(s, id))? else {
                continue;
            };
            if s.pack_no().is_some() {
                // the host's entries are consecutive in the pack: one walk
                for entry in crate::store::packed::intake_entries_iter(&v)? {
                    let (h, seq, e) = entry?;
                    if h == id && seq >= head.max(s.first) && seq < s.end() {
                        out.push(QueueEntry::decode(e)?);
                    }
                }
                continue;
            }
            let seg = Segment::parse(&v)?;
            for i in head.saturating_sub(s.first)..u64::from(s.len) {
                out.push(seg.entry(i as usize)?);
            }
        }
        for b in h.pending.from(head) {
            out.push(QueueEntry::decode(b)?);
        }
        // then the URLs waiting out their own retry back-off, and those of held origins
        let mut aside: Vec<u64> = h.aside().delayed.iter().map(|d| d.seq).collect();
        for p in h.aside().parked.values() {
            aside.extend(&p.seqs);
        }
        for seq in aside {
            if let Some(b) = self.entry_bytes(id, h, seq)? {
                out.push(QueueEntry::decode(&b)?);
            }
        }
        Ok(out)
    }

    /// The politeness keys in memory that `pick` takes, with their records: every host
    /// with URLs queued or in flight is in memory.
    pub fn hosts_in_memory_where(
        &self,
        mut pick: impl FnMut(&str) -> bool,
    ) -> Vec<(String, HostRecord)> {
        let inner = self.inner.lock();
        inner
            .sched
            .hosts()
            .filter(|(_, h)| pick(&h.key))
            .map(|(_, h)| (h.key.to_string(), h.rec))
            .collect()
    }
}

/// What [`Frontier::hosts_ranked`] ranks hosts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRank {
    /// Pages completed (the busiest).
    Completed,
    /// The last answer's response time (the slowest).
    Slowest,
    /// URLs queued.
    Queued,
}

/// Each politeness key `origin` can be under (the rule of [`Frontier::origins_of`]): the
/// origin itself (origin keys), its host, and each domain above the host.
fn keys_over(origin: &str, mut f: impl FnMut(&str)) {
    // an IPv6 host keeps its brackets (as the URL parser gives it); any other is a slice
    // of the origin, not a parse of it
    let host: std::borrow::Cow<str> = if origin.contains('[') {
        host_of_origin(origin).into()
    } else {
        crate::resolve::host_of_origin(origin).into()
    };
    f(origin);
    f(&host);
    for (i, _) in host.match_indices('.') {
        f(&host[i + 1..]);
    }
}

#[cfg(test)]
mod tests {
    use super::keys_over;

    fn keys(origin: &str) -> Vec<String> {
        let mut out = Vec::new();
        keys_over(origin, |k| out.push(k.to_string()));
        out
    }

    /// An origin is under itself, its host and each domain above it; never under a name
    /// that only ends like its host, nor under a longer one.
    #[test]
    fn an_origin_is_under_its_host_and_the_domains_above_it_only() {
        assert_eq!(
            keys("https://www.a.example:8443"),
            [
                "https://www.a.example:8443",
                "www.a.example",
                "a.example",
                "example"
            ]
        );
        assert!(!keys("https://ba.example").contains(&"a.example".to_string()));
        assert!(!keys("https://a.example.org").contains(&"a.example".to_string()));
        assert!(keys("http://[::1]:8080").contains(&"[::1]".to_string()));
    }
}
