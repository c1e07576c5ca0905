//! One politeness key in memory: its record, queue positions, leases, what is set aside.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::IpAddr;
use std::sync::Arc;

use thin_vec::ThinVec;

use crate::sched::aside::{Delayed, Parked, ParkedOrigins, Source};
use crate::sched::pending::Pending;
use crate::sched::records::HostRecord;

/// Where one stored segment of a host's queue is: its sequences and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegRef {
    /// Sequence of its first entry.
    pub(crate) first: u64,
    /// Entries in it.
    pub(crate) len: u32,
    /// The fold that wrote it ([`SegRef::LEGACY`]: an older store's `Q` key).
    pub(crate) fold: u32,
}

impl SegRef {
    /// `fold` of a segment under an older store's `Q` + host id + first key.
    pub(crate) const LEGACY: u32 = u32::MAX;
    /// Set in `fold` for a place in a pack (the rest is the pack's number; see `pack.rs`).
    const PACKED: u32 = 1 << 31;

    /// The number of the fold after `fold` (packs take theirs from the same counter). (A
    /// store would need two billion folds and packs to reach the pack marker; past it the
    /// keys stay unique by host id and sequence, only no longer in fold order, and no pack
    /// is made.)
    pub(crate) fn fold_after(fold: u32) -> u32 {
        fold.saturating_add(1).min(SegRef::PACKED - 1)
    }

    /// The `fold` of a place in pack `no`.
    pub(crate) fn pack(no: u32) -> u32 {
        no | SegRef::PACKED
    }

    /// Whether a fold number can still be a pack's (below the marker's last number).
    pub(crate) fn can_pack(no: u32) -> bool {
        no < SegRef::PACKED - 1
    }

    /// The pack it is in, if it is a place in a pack.
    pub(crate) fn pack_no(&self) -> Option<u32> {
        (self.fold != SegRef::LEGACY && self.fold & SegRef::PACKED != 0)
            .then_some(self.fold & !SegRef::PACKED)
    }

    /// Sequence after its last entry.
    pub(crate) fn end(&self) -> u64 {
        self.first + u64::from(self.len)
    }
}

/// What a host has only after a restart, a failure or a held origin, or while it is being
/// fetched from: most hosts have none of it at a given moment (the hosts with a lease or a
/// robots.txt fetch out number the fetches in flight, a few thousand at most), so it is
/// boxed: 8 bytes in every host in memory instead of 88, with a million hosts in memory at
/// once in a large crawl.
#[derive(Default)]
pub(crate) struct SetAside {
    /// Sequences below the head to hand out before it, lowest first: leases returned at
    /// open and URLs waiting for a retry.
    pub(crate) front: ThinVec<u64>,
    /// Sequences with a `T` retry entry (attempts raised) in the store.
    pub(crate) retries: ThinVec<u64>,
    /// URLs set aside because their origin's robots state holds them, so the host's other
    /// origins go on: origin -> when to look again, sequences. Each has a `T` entry (at
    /// open it comes back through the front, and is set aside again if still held).
    pub(crate) parked: ParkedOrigins,
    /// URLs waiting out their own back-off after a per-URL failure, each with a `T` entry
    /// (at open they come back through the front).
    pub(crate) delayed: ThinVec<Delayed>,
    /// Different sequences that timed out since the host last answered.
    pub(crate) timeouts: ThinVec<u64>,
    /// The origin whose robots state held the host's next URL when nothing else could go
    /// (for the queue breakdown).
    pub(crate) held_origin: Option<Arc<str>>,
    /// Sequences of the page leases in flight (at most `max_in_flight_per_host`),
    /// persisted in the host record: a lease costs no write beyond the host record.
    pub(crate) leased: ThinVec<u64>,
    /// The origin whose robots.txt fetch is out for it.
    pub(crate) robots_pending: Option<Box<str>>,
    /// Not due before this instant (unix ms; 0: no hold): when set-aside URLs may go, or
    /// a pause after a robots.txt outcome could not be stored.
    pub(crate) hold_until_ms: u64,
}

/// A host's [`SetAside`] when it has none.
static NOTHING_SET_ASIDE: SetAside = SetAside {
    front: ThinVec::new(),
    retries: ThinVec::new(),
    parked: ParkedOrigins::new(),
    delayed: ThinVec::new(),
    timeouts: ThinVec::new(),
    held_origin: None,
    leased: ThinVec::new(),
    robots_pending: None,
    hold_until_ms: 0,
};

impl SetAside {
    fn is_empty(&self) -> bool {
        self.front.is_empty()
            && self.retries.is_empty()
            && self.parked.is_empty()
            && self.delayed.is_empty()
            && self.timeouts.is_empty()
            && self.held_origin.is_none()
            && self.leased.is_empty()
            && self.robots_pending.is_none()
            && self.hold_until_ms == 0
    }
}

pub(crate) struct HostMem {
    pub(crate) key: Arc<str>,
    /// The record; `rec.head_seq` is the queue's head (next sequence to hand out).
    pub(crate) rec: HostRecord,
    /// Entries not yet folded into segments (durable in the intake log). Every sequence
    /// below `pending.first` is in a segment or was handed out; the next sequence to
    /// assign is `pending.end()`.
    pub(crate) pending: Pending,
    /// The host's stored segments, oldest first.
    // thin: most hosts have one segment or none
    pub(crate) segs: ThinVec<SegRef>,
    /// When it is due in the ready heap (its entry there with this time is its live one).
    pub(crate) scheduled: DueAt,
    /// Since when the host has had a free slot and work (ms): the start of the politeness
    /// wait reported on the next page lease.
    pub(crate) free_since_ms: u64,
    /// Leases in flight, a robots.txt fetch out, a hold, returned leases, retries and URLs
    /// set aside: None while there are none.
    pub(crate) aside: Option<Box<SetAside>>,
    /// The address its fetches last connected to, or its name resolved to before its
    /// first fetch (None until then): the IP group it shares a politeness budget with.
    pub(crate) ip: Option<IpAddr>,
    /// Whether its address was asked for before its first robots.txt fetch.
    pub(crate) resolve: crate::sched::ipgroup::Resolve,
}

/// When a host is due in the ready heap, in 8 bytes where `Option<u64>` takes 16:
/// `u64::MAX` stands for not scheduled (no host is due at the end of time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DueAt(u64);

impl DueAt {
    /// Not in the ready heap.
    pub(crate) const NEVER: DueAt = DueAt(u64::MAX);

    /// Due at `ms` (unix ms; the last millisecond of time is taken as the one before it).
    pub(crate) fn at(ms: u64) -> DueAt {
        DueAt(ms.min(u64::MAX - 1))
    }

    /// When, if scheduled.
    pub(crate) fn get(self) -> Option<u64> {
        (self.0 != u64::MAX).then_some(self.0)
    }
}

impl HostMem {
    /// The origin whose robots.txt fetch is out for it, if one is.
    pub(crate) fn robots_pending_origin(&self) -> Option<&str> {
        self.aside().robots_pending.as_deref()
    }

    /// A robots.txt fetch for `origin` is out for it (None: it ended).
    pub(crate) fn set_robots_pending(&mut self, origin: Option<&str>) {
        match origin {
            Some(o) => self.aside_mut().robots_pending = Some(Box::from(o)),
            None => self.clear_aside(|a| a.robots_pending = None),
        }
    }

    /// Sequences of the page leases in flight.
    pub(crate) fn leased(&self) -> &[u64] {
        &self.aside().leased
    }

    /// A page lease of `seq` is out.
    pub(crate) fn push_lease(&mut self, seq: u64) {
        self.aside_mut().leased.push(seq);
    }

    /// The lease at position `pos` of [`HostMem::leased`] ended: its sequence.
    pub(crate) fn take_lease(&mut self, pos: usize) -> Option<u64> {
        let mut seq = None;
        self.clear_aside(|a| {
            seq = (pos < a.leased.len()).then(|| a.leased.swap_remove(pos));
            if a.leased.is_empty() {
                // freed, not kept empty, when the box stays for something else
                a.leased = ThinVec::new();
            }
        });
        seq
    }

    /// Not due before `until_ms` (beside its record's times; 0: no hold).
    pub(crate) fn hold_until_ms(&self) -> u64 {
        self.aside().hold_until_ms
    }

    /// Hold it until `until_ms` (0: no hold any more).
    pub(crate) fn set_hold_until(&mut self, until_ms: u64) {
        if until_ms != 0 {
            self.aside_mut().hold_until_ms = until_ms;
        } else {
            self.clear_aside(|a| a.hold_until_ms = 0);
        }
    }

    /// Take something out of what is set aside (no box made when there is none), then
    /// free the box if nothing is left in it.
    fn clear_aside(&mut self, take: impl FnOnce(&mut SetAside)) {
        if let Some(a) = self.aside.as_deref_mut() {
            take(a);
            self.tidy_aside();
        }
    }

    /// A host with an empty queue whose head is `rec.head_seq`.
    pub(crate) fn empty(key: Arc<str>, rec: HostRecord) -> HostMem {
        HostMem {
            key,
            pending: Pending::starting_at(rec.head_seq),
            rec,
            segs: ThinVec::new(),
            scheduled: DueAt::NEVER,
            free_since_ms: 0,
            aside: None,
            ip: None,
            resolve: crate::sched::ipgroup::Resolve::NotAsked,
        }
    }

    /// What is set aside (nothing, for most hosts).
    pub(crate) fn aside(&self) -> &SetAside {
        self.aside.as_deref().unwrap_or(&NOTHING_SET_ASIDE)
    }

    /// What is set aside, to add to (boxed on first use; [`HostMem::tidy_aside`] frees it).
    /// To take from or clear, `aside.as_deref_mut()` makes no box.
    pub(crate) fn aside_mut(&mut self) -> &mut SetAside {
        self.aside.get_or_insert_with(Box::default)
    }

    /// Free the box once nothing is set aside.
    pub(crate) fn tidy_aside(&mut self) {
        if self.aside.as_ref().is_some_and(|a| a.is_empty()) {
            self.aside = None;
        }
    }

    /// Sequences below the head that are still owed: leased or in the front.
    pub(crate) fn owed(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .leased()
            .iter()
            .chain(&self.aside().front)
            .copied()
            .collect();
        v.sort_unstable();
        v
    }

    /// Lowest sequence whose entry may still be needed: the head, a returned or retried
    /// URL, or a lease in flight (a failed lease is retried from its entry).
    pub(crate) fn live_from(&self) -> u64 {
        let mut live = self.rec.head_seq;
        if let Some(&f) = self.aside().front.first() {
            live = live.min(f);
        }
        if let Some(&l) = self.leased().iter().min() {
            live = live.min(l);
        }
        live
    }

    /// The smallest stored or pending sequence at or after `from`.
    pub(crate) fn next_seq_from(&self, from: u64) -> Option<u64> {
        let i = self.segs.partition_point(|s| s.first <= from);
        if i > 0 && from < self.segs[i - 1].end() {
            return Some(from);
        }
        if let Some(s) = self.segs.get(i) {
            return Some(s.first);
        }
        if from < self.pending.end() {
            return Some(from.max(self.pending.first));
        }
        None
    }

    /// Take `seq` off the queue: out of `front` or the delayed retries, or past the head.
    pub(crate) fn consume(&mut self, seq: u64, from: Source) {
        match from {
            Source::Front => self.aside_mut().front.retain(|&s| s != seq),
            Source::Delayed => self.aside_mut().delayed.retain(|d| d.seq != seq),
            Source::Head => self.rec.head_seq = self.rec.head_seq.max(seq + 1),
        }
    }

    /// `seq` is done for good: its retry entry, if any, goes.
    /// Returns whether it had one (the caller deletes its `T` key).
    pub(crate) fn forget_retry(&mut self, seq: u64) -> bool {
        match self.aside().retries.iter().position(|&s| s == seq) {
            Some(p) => {
                self.aside_mut().retries.swap_remove(p);
                true
            }
            None => false,
        }
    }

    /// Forget the segments nothing live points into any more; returns them (the caller
    /// deletes their keys).
    pub(crate) fn drop_dead_segments(&mut self) -> Vec<SegRef> {
        let live = self.live_from();
        let n = self.segs.iter().take_while(|s| s.end() <= live).count();
        let dead = self.segs.drain(..n).collect();
        if self.segs.is_empty() {
            // freed, not kept empty: the host may go on from its pending entries for long
            self.segs = ThinVec::new();
        }
        dead
    }
}

// ---- what is set aside (see aside.rs)

impl HostMem {
    /// Whether the queue from the head on is empty.
    pub(crate) fn head_exhausted(&self) -> bool {
        self.next_seq_from(self.rec.head_seq).is_none()
    }

    /// The next per-URL retry that may go now: its back-off is over and the URLs queued
    /// before it failed have gone (or the queue is empty).
    pub(crate) fn due_retry(&self, now_ms: u64) -> Option<usize> {
        let exhausted = self.head_exhausted();
        self.aside()
            .delayed
            .iter()
            .enumerate()
            .filter(|(_, d)| d.due_ms <= now_ms && (d.behind <= self.rec.head_seq || exhausted))
            .min_by_key(|(_, d)| (d.due_ms, d.seq))
            .map(|(i, _)| i)
    }

    /// When something set aside may go again (None if nothing is).
    pub(crate) fn set_aside_wake(&self) -> Option<u64> {
        let parked = self.aside().parked.values().map(|p| p.until_ms);
        let delayed = self.aside().delayed.iter().map(|d| d.due_ms);
        parked.chain(delayed).min()
    }

    /// `seq` is leaving the places the host record lists: whether it needs a `T` entry
    /// written (it has none yet; it is counted as having one from now on).
    /// Where `seq` waits in the delayed list after its lease expired (not handed out
    /// again since), if it does.
    pub(crate) fn expired_waiting(&self, seq: u64) -> Option<usize> {
        self.aside()
            .delayed
            .iter()
            .position(|d| d.seq == seq && d.expired)
    }

    pub(crate) fn keep_entry(&mut self, seq: u64) -> bool {
        if self.aside().retries.contains(&seq) {
            return false;
        }
        self.aside_mut().retries.push(seq);
        true
    }

    /// Set `seq` aside while `origin` is held until `until_ms`; true if the origin was not
    /// held before.
    pub(crate) fn park(&mut self, origin: &str, seq: u64, until_ms: u64) -> bool {
        let (p, first) = self.aside_mut().parked.get_or_insert(origin, || Parked {
            until_ms,
            seqs: Vec::new(),
        });
        p.until_ms = p.until_ms.min(until_ms);
        p.seqs.push(seq);
        first
    }

    /// Origins whose set-aside URLs are due for another look at `now_ms`.
    pub(crate) fn parked_due(&self, now_ms: u64) -> Vec<Arc<str>> {
        self.aside()
            .parked
            .iter()
            .filter(|(_, p)| p.until_ms <= now_ms)
            .map(|(o, _)| o.clone())
            .collect()
    }

    /// After a look at a parked origin's robots state: still held (until `until_ms`), or
    /// free, when its URLs go back to the front (they are older than the head) to be
    /// gated again. Returns how many went back.
    pub(crate) fn recheck_parked(
        &mut self,
        origin: &str,
        held_until: Option<u64>,
        now_ms: u64,
    ) -> usize {
        match held_until {
            Some(until) => {
                let parked = self.aside.as_deref_mut().map(|a| &mut a.parked);
                if let Some(p) = parked.and_then(|p| p.get_mut(origin)) {
                    p.until_ms = until.max(now_ms + 1);
                }
                0
            }
            None => match self
                .aside
                .as_deref_mut()
                .and_then(|a| a.parked.remove(origin))
            {
                Some(p) => {
                    let n = p.seqs.len();
                    self.aside_mut().front.extend(p.seqs);
                    self.aside_mut().front.sort_unstable();
                    self.aside_mut().front.dedup();
                    n
                }
                None => 0,
            },
        }
    }
}

/// The ready heap: (instant the host may go, host id), earliest first. A host is in it at
/// most once with its current instant (`HostMem::scheduled`); stale entries are skipped
/// when popped.
pub(crate) type ReadyHeap = BinaryHeap<Reverse<(u64, u64)>>;

/// The instant host `h` may go next, or None if it cannot go at all now (nothing queued,
/// every slot taken, its robots.txt in flight, or paused).
pub(crate) fn ready_at(h: &HostMem, max_in_flight: u64, paused: bool) -> Option<u64> {
    if h.rec.counters.queued == 0
        || u64::from(h.rec.in_flight) >= max_in_flight
        || h.robots_pending_origin().is_some()
        || paused
    {
        return None;
    }
    Some(
        h.rec
            .next_allowed_ms
            .max(h.rec.backoff_until_ms)
            .max(h.hold_until_ms()),
    )
}

/// Put host `id` into the ready heap if it has queued work and a free slot (once per
/// instant), not before a client's block ends (`blocked_until_ms`, 0: none).
pub(crate) fn schedule(
    h: &mut HostMem,
    id: u64,
    heap: &mut ReadyHeap,
    max_in_flight: u64,
    paused: bool,
    blocked_until_ms: u64,
) {
    // (after most changes to a host: the place to free what is no longer set aside)
    h.tidy_aside();
    let Some(ready) = ready_at(h, max_in_flight, paused) else {
        h.scheduled = DueAt::NEVER;
        return;
    };
    let ready = crate::sched::lease::ready_with_block(ready, blocked_until_ms);
    if h.scheduled.get() == Some(ready) {
        return;
    }
    h.scheduled = DueAt::at(ready);
    heap.push(Reverse((ready, id)));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every host with queued URLs is in memory (a million of them at 10M URLs over 1M
    /// hosts), so what it costs there is budgeted: the record, the queue's bookkeeping and
    /// one word for what is almost never set aside. 192 is an allocator size class
    /// (mimalloc's, below 224): a box of 193 bytes costs 224, 32 MB more at a million hosts.
    #[test]
    fn a_host_in_memory_stays_within_its_budget() {
        let size = std::mem::size_of::<HostMem>();
        eprintln!("HostMem: {size} bytes");
        assert!(size <= 192, "HostMem grew to {size} bytes");
    }

    /// Once its last segment is dead a host holds no segment list.
    #[test]
    fn a_host_past_its_segments_holds_no_segment_list() {
        let mut h = HostMem::empty(Arc::from("a.test"), HostRecord::default());
        for first in [0, 4] {
            h.segs.push(SegRef {
                first,
                len: 4,
                fold: 0,
            });
        }
        h.rec.head_seq = 4;
        assert_eq!(h.drop_dead_segments().len(), 1);
        assert_eq!(h.segs.len(), 1);
        h.rec.head_seq = 8;
        assert_eq!(h.drop_dead_segments().len(), 1);
        assert_eq!(h.segs.capacity(), 0);
    }

    #[test]
    fn what_is_set_aside_is_boxed_only_while_there_is_some() {
        let rec = HostRecord {
            head_seq: 5,
            ..HostRecord::default()
        };
        let mut h = HostMem::empty(Arc::from("a.test"), rec);
        assert!(h.aside.is_none(), "a new host has nothing set aside");
        h.aside_mut().front.push(3);
        h.tidy_aside();
        assert_eq!(h.aside().front.as_slice(), [3], "kept while it holds a URL");
        h.consume(3, Source::Front);
        let mut heap = ReadyHeap::new();
        schedule(&mut h, 1, &mut heap, 1, false, 0);
        assert!(h.aside.is_none(), "freed once the URL went");
    }
}
