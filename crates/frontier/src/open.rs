//! Opening a store: rebuild the in-memory state from what is durable.

use std::collections::HashMap;
use std::sync::Arc;

use thin_vec::ThinVec;

use crate::api::{Frontier, Inner};
use crate::error::Result;
use crate::events::FrontierEvent;
use crate::sched::aside::Delayed;
use crate::sched::hosts::{HostMem, SegRef};
use crate::sched::pending::Pending;
use crate::store::codec::{DropRecord, HostRecord, QueueEntry};
use crate::store::journal::{journal_decode, Journal};
use crate::store::keys;
use crate::store::packed::{self, Segment};
use crate::store::Batch;
use crate::work::url_hash;

/// A host's intake-log entries: (queue sequence, encoded entry), in log order.
type IntakeEntries = Vec<(u64, Vec<u8>)>;

/// Queue segments by host id, each host's in sequence order.
type HostSegments = HashMap<u64, ThinVec<SegRef>>;

/// What the store holds of the hosts' queues, by host id, before the host records are
/// read: each record takes its host's share out, and what is left has no record.
struct StoredQueues {
    segs: HostSegments,
    /// Sequences with a retry entry (`T` keys).
    retries: HashMap<u64, Vec<u64>>,
    /// The intake log since the last fold: entries not in segments yet.
    intake: HashMap<u64, IntakeEntries>,
    /// The packs (`p` keys) and the hosts pointing into each.
    packs: crate::pack::Packs,
}

/// One host record to load: its `H` key, its encoded record, and whether the record came
/// from the journal (newer than the one under `H`).
type StoredRecord = (Vec<u8>, Vec<u8>, bool);

/// The host records to load, the newest version of each, and the journal's extent.
struct StoredRecords {
    records: Vec<StoredRecord>,
    /// The sequence of the journal's first record, if it has any.
    journal_first: Option<u64>,
    journal_bytes: u64,
    /// The next journal sequence: after the journal's last record and every stored
    /// record's stamp.
    next_journal: u64,
}

impl Frontier {
    pub(crate) fn recover(&self) -> Result<()> {
        let mut inner = self.inner.lock();
        self.load_controls(&mut inner)?;
        let mut batch = Batch::new();
        // 1. queue segments by host id
        let (mut segs, last_fold) = self.scan_segments()?;
        let (packs, last_pack) = self.scan_packs(&mut segs)?;
        // each host's segments and places in packs, in sequence order (once)
        for host_segs in segs.values_mut() {
            host_segs.sort_unstable_by_key(|s| s.first);
        }
        inner.intake.next_fold = last_fold.max(last_pack).map_or(0, SegRef::fold_after);
        self.return_legacy_leases(&mut segs, &mut batch)?;
        // 2. retry entries
        let retries = self.scan_retries()?;
        // 3. the intake log since the last fold: entries not in segments yet
        let intake = self.replay_intake_log(&mut inner)?;
        let mut queues = StoredQueues {
            segs,
            retries,
            intake,
            packs,
        };
        // 4. the host-record journal, replayed over `H` (a later record wins)
        let stored = self.read_host_records()?;
        // 5. each host with anything queued comes into memory; leases in flight when the
        // last run ended return to the front of their queues
        let mut recovered = 0u64;
        let mut loaded = Vec::new();
        for record in stored.records {
            let (h, leases) = rebuild_host(
                &mut inner.journal,
                &mut batch,
                &mut queues,
                record,
                stored.next_journal,
            )?;
            recovered += leases;
            loaded.extend(h);
        }
        inner.packs = std::mem::take(&mut queues.packs);
        queues.log_orphans();
        let n_hosts = loaded.len();
        self.bring_into_memory(&mut inner, loaded)?;
        inner.stats.recovered_leases = recovered;
        if recovered > 0 {
            inner
                .events
                .push(FrontierEvent::LeasesReturned { count: recovered });
        }
        // the journal stays; the next checkpoint writes its records to `H`
        inner.journal.next_seq = stored.next_journal;
        inner.journal.first_seq = stored.journal_first.unwrap_or(stored.next_journal);
        inner.journal.bytes = stored.journal_bytes;
        // 6. the seen-set and the done-set
        self.load_seen_set(&mut inner, &mut batch)?;
        inner.done = crate::done::DoneSet::load(self.store.as_ref())?;
        // 7. drops the caller had not logged when the last run ended: report them again
        self.report_unlogged_drops(&mut inner, &mut batch)?;
        if !batch.is_empty() {
            self.store.apply(batch)?;
            self.store.flush()?;
        }
        tracing::info!(
            hosts_with_work = n_hosts,
            recovered_leases = recovered,
            intake_bytes = inner.intake.bytes,
            "frontier opened"
        );
        Ok(())
    }

    /// The operator's and clients' settings: paused politeness keys (`P`), queue controls
    /// (`g`) and crawls (`c`).
    fn load_controls(&self, inner: &mut Inner) -> Result<()> {
        for kv in self.store.scan_prefix(b"P") {
            let (k, _) = kv?;
            if let Ok(key) = std::str::from_utf8(&k[1..]) {
                inner.sched.load_pause(key);
            }
        }
        for kv in self.store.scan_prefix(b"g") {
            let (k, v) = kv?;
            if let Ok(key) = std::str::from_utf8(&k[1..]) {
                let control = crate::store::control::QueueControl::decode(&v)?;
                inner.sched.load_control(key, control);
            }
        }
        for kv in self.store.scan_prefix(b"c") {
            let (k, v) = kv?;
            inner.crawls.load(&k, &v);
        }
        Ok(())
    }

    /// Queue segments by host id (sorted by the caller): `q` keys (fold first), and the
    /// `Q` keys of older stores (segments, or one-entry values of still older
    /// ones); and the last fold a `q` key names.
    fn scan_segments(&self) -> Result<(HostSegments, Option<u32>)> {
        let mut segs: HostSegments = HashMap::new();
        // (only each value's header is needed: visited in place, not copied)
        let mut bad = None;
        let mut last_fold = None;
        let mut add = |id: u64, first: u64, fold: u32, v: &[u8]| match Segment::parse(v) {
            Ok(seg) => segs.entry(id).or_default().push(SegRef {
                first,
                len: seg.len() as u32,
                fold,
            }),
            Err(e) => bad = Some(e),
        };
        self.store.visit_prefix(b"q", &mut |k, v| {
            if let Some((fold, id, first)) = keys::parse_segment(k) {
                last_fold = Some(fold);
                add(id, first, fold, v);
            }
        })?;
        self.store.visit_prefix(b"Q", &mut |k, v| {
            if let Some((id, first)) = keys::parse_idseq(k) {
                add(id, first, SegRef::LEGACY, v);
            }
        })?;
        if let Some(e) = bad {
            return Err(e.into());
        }
        // (`q` keys come fold by fold: each host's are put in sequence order once its
        // places in packs are added, see `recover`)
        Ok((segs, last_fold))
    }

    /// The hosts' places in packs (`p` keys), added to `segs` (not sorted); the packs
    /// with the hosts pointing into each, and the last pack's number.
    fn scan_packs(&self, segs: &mut HostSegments) -> Result<(crate::pack::Packs, Option<u32>)> {
        let mut packs = crate::pack::Packs::default();
        let mut last = None;
        let mut bad = None;
        self.store.visit_prefix(b"p", &mut |k, v| {
            if let Some(no) = keys::parse_pack(k) {
                last = Some(no);
                if let Err(e) = crate::pack::refs_in(no, v, segs, &mut packs) {
                    bad = Some(e);
                }
            }
        })?;
        if let Some(e) = bad {
            return Err(e.into());
        }
        Ok((packs, last))
    }

    /// Leases of older versions (`L` keys) become one-entry segments again: rewritten as
    /// queue keys in `batch`, and placed in their hosts' `segs` in sequence order.
    fn return_legacy_leases(&self, segs: &mut HostSegments, batch: &mut Batch) -> Result<()> {
        for kv in self.store.scan_prefix(b"L") {
            let (k, v) = kv?;
            let Some((id, seq)) = keys::parse_idseq(&k) else {
                continue;
            };
            batch.del(k);
            batch.put(keys::queued(id, seq), v);
            batch.cut();
            let q = segs.entry(id).or_default();
            let at = q.partition_point(|s| s.first < seq);
            q.insert(
                at,
                SegRef {
                    first: seq,
                    len: 1,
                    fold: SegRef::LEGACY,
                },
            );
        }
        Ok(())
    }

    /// Sequences with a retry entry (`T` keys), by host id.
    fn scan_retries(&self) -> Result<HashMap<u64, Vec<u64>>> {
        let mut retries: HashMap<u64, Vec<u64>> = HashMap::new();
        for kv in self.store.scan_prefix(b"T") {
            let (k, _) = kv?;
            if let Some((id, seq)) = keys::parse_idseq(&k) {
                retries.entry(id).or_default().push(seq);
            }
        }
        Ok(retries)
    }

    /// The intake log (`W` keys) by host id: its extent and size go to `inner.intake`, and
    /// its URLs count as recently seen (they are queued, not yet in the seen-set's buckets).
    fn replay_intake_log(&self, inner: &mut Inner) -> Result<HashMap<u64, IntakeEntries>> {
        let mut intake: HashMap<u64, IntakeEntries> = HashMap::new();
        let mut intake_first = None;
        for kv in self.store.scan_prefix(b"W") {
            let (k, v) = kv?;
            let seq = k
                .get(1..9)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
                .unwrap_or(0);
            intake_first.get_or_insert(seq);
            inner.intake.next_seq = seq + 1;
            inner.intake.bytes += v.len() as u64;
            for (id, qseq, e) in packed::intake_entries(&v)? {
                let entry = QueueEntry::decode(e)?;
                inner.seen.recent.insert(url_hash(&entry.url));
                intake.entry(id).or_default().push((qseq, e.to_vec()));
            }
        }
        inner.intake.first_seq = intake_first.unwrap_or(inner.intake.next_seq);
        inner.intake.hosts = intake.len() as u64;
        inner.intake.entries = intake.values().map(|e| e.len() as u64).sum();
        Ok(intake)
    }

    /// The host records: `H`, with the journal (`J`) replayed over it (a later record
    /// wins). Every record taken from the journal is marked so; the journal itself stays.
    fn read_host_records(&self) -> Result<StoredRecords> {
        let mut replay: HashMap<Vec<u8>, (u64, Vec<u8>)> = HashMap::new();
        let mut journal_keys = Vec::new();
        let mut journal_bytes = 0u64;
        for kv in self.store.scan_prefix(b"J") {
            let (k, v) = kv?;
            let seq = keys::parse_journal(&k).unwrap_or(0);
            for (key, val) in journal_decode(&v)? {
                replay.insert(key, (seq, val));
            }
            journal_bytes += v.len() as u64;
            journal_keys.push(k);
        }
        let mut next_journal = journal_keys
            .last()
            .and_then(|k| keys::parse_journal(k))
            .map(|s| s + 1)
            .unwrap_or(0);
        let mut records: Vec<StoredRecord> = Vec::new();
        for kv in self.store.scan_prefix(b"H") {
            let (k, v) = kv?;
            // a record written when its host left memory is newer than the journal
            // entries before its stamp
            let stamp = HostRecord::decode_stamp(&v);
            next_journal = next_journal.max(stamp);
            match replay.remove(&k[1..]) {
                Some((seq, j)) if seq >= stamp => records.push((k, j, true)),
                _ => records.push((k, v, false)),
            }
        }
        for (key, (_, val)) in replay {
            let mut k = Vec::with_capacity(1 + key.len());
            k.push(b'H');
            k.extend_from_slice(&key);
            records.push((k, val, true));
        }
        Ok(StoredRecords {
            records,
            journal_first: journal_keys.first().and_then(|k| keys::parse_journal(k)),
            journal_bytes,
            next_journal,
        })
    }

    /// The hosts with work join the scheduler: with the IP group their last fetch
    /// reported, indexed by key, and scheduled.
    fn bring_into_memory(&self, inner: &mut Inner, loaded: Vec<HostMem>) -> Result<()> {
        for mut h in loaded {
            let id = h.rec.id;
            // its IP group, as its last fetch reported it: in its record, or in the `I`
            // key of a store from before addresses moved into records
            if h.ip.is_none() {
                h.ip = self.legacy_address(&h.key)?;
            }
            // (no restart hold is set yet while the store is opened)
            inner.sched.insert_host(h, false);
            inner.sched.schedule(id);
        }
        Ok(())
    }

    /// The seen-set: its bucket directory (`b` keys), written first from the buckets
    /// themselves in a store from before the directory, and whether per-URL keys of older
    /// versions are left.
    fn load_seen_set(&self, inner: &mut Inner, batch: &mut Batch) -> Result<()> {
        let starts = &mut inner.seen.starts;
        let mut add_start = |k: &[u8], _: &[u8]| {
            if let Some(b) = k.get(1..17).and_then(|b| <[u8; 16]>::try_from(b).ok()) {
                starts.push(u128::from_be_bytes(b));
            }
        };
        if self.store.contains(keys::BUCKET_DIRECTORY)? {
            self.store.visit_prefix(b"b", &mut add_start)?;
        } else {
            // a store from before the directory: list its buckets once
            self.store.visit_prefix(b"B", &mut add_start)?;
            for &s in starts.iter().filter(|&&s| s != 0) {
                batch.put(keys::bucket_start(s), Vec::new());
            }
            batch.put(keys::BUCKET_DIRECTORY.to_vec(), Vec::new());
            batch.cut();
        }
        inner.seen.starts.sort_unstable();
        inner.seen.starts.dedup();
        inner.seen.legacy = self.store.first_in_range(b"S", b"T")?.is_some();
        Ok(())
    }

    /// Drops the caller had not logged (`U` keys) are reported again; a mark whose drop
    /// record is gone is deleted.
    fn report_unlogged_drops(&self, inner: &mut Inner, batch: &mut Batch) -> Result<()> {
        for kv in self.store.scan_prefix(b"U") {
            let (k, _) = kv?;
            let Some(hash) = k.get(1..17).and_then(|b| <[u8; 16]>::try_from(b).ok()) else {
                continue;
            };
            match self.store.get(&keys::dropped(u128::from_be_bytes(hash)))? {
                Some(v) => inner.push_drop(DropRecord::decode(&v)?),
                None => {
                    batch.del(k);
                    batch.cut();
                }
            }
        }
        Ok(())
    }
}

impl StoredQueues {
    /// Queue entries and intake-log entries that no host record claimed: reported, and
    /// otherwise ignored.
    fn log_orphans(self) {
        for (id, _) in self
            .segs
            .into_iter()
            .chain(self.retries.into_keys().map(|i| (i, ThinVec::new())))
        {
            tracing::error!(
                host_id = id,
                "queue entries of a host without a record are ignored"
            );
        }
        for (id, entries) in self.intake {
            tracing::error!(
                host_id = id,
                entries = entries.len(),
                "intake-log entries of a host without a record are ignored"
            );
        }
    }
}

/// One stored host record at open, with its share of `queues`: the host, if it has
/// anything queued, and how many of its leases were in flight (they return to its queue).
/// A host with nothing queued stays out of memory: its record is corrected in `batch` if
/// it changed, and its queue keys are deleted.
fn rebuild_host(
    journal: &mut Journal,
    batch: &mut Batch,
    queues: &mut StoredQueues,
    (k, v, from_journal): StoredRecord,
    next_journal: u64,
) -> Result<(Option<HostMem>, u64)> {
    let (rec, leased, _) = HostRecord::decode_parts(&v)?;
    let id = rec.id;
    let key: Arc<str> = Arc::from(String::from_utf8_lossy(&k[1..]).as_ref());
    let host_segs = queues.segs.remove(&id).unwrap_or_default();
    let host_retries = queues.retries.remove(&id).unwrap_or_default();
    let host_intake = queues.intake.remove(&id).unwrap_or_default();
    let stored_queued = rec.counters.queued;
    let mut h = HostMem::empty(key, rec);
    h.ip = HostRecord::decode_address(&v);
    h.segs = host_segs;
    if !host_retries.is_empty() {
        h.aside_mut().retries = host_retries.into();
    }
    restore_queue(&mut h, &leased, host_intake);
    let queued = queued_at_open(&h);
    // enqueues since the record was last written are not in its counters yet
    let stored = stored_queued + leased.len() as u64;
    if queued > stored {
        let unrecorded = crate::sched::records::to_u32(queued - stored);
        h.rec.counters.enqueued = h.rec.counters.enqueued.saturating_add(unrecorded);
    }
    // the journal is kept as it is (no checkpoint at open: that would be one write per
    // host); what differs from the stored record is journaled by the host's next change,
    // or redone by the next open
    let changed = h.rec.in_flight != 0 || !leased.is_empty() || h.rec.counters.queued != queued;
    h.rec.in_flight = 0;
    h.rec.counters.queued = queued;
    // segments that only hold URLs handed out and completed before the crash
    for s in h.drop_dead_segments() {
        if let Some(k) = queues.packs.release(&s, id) {
            batch.del(k);
        }
    }
    batch.cut();
    let returned = leased.len() as u64;
    if queued > 0 {
        if changed || from_journal {
            journal.dirty.insert(id);
        }
        return Ok((Some(h), returned));
    }
    if changed {
        // stamped: older journal entries of this host must not undo it
        batch.put(
            k.clone(),
            crate::store::codec::stored_host(&h.rec, &[], next_journal, h.ip),
        );
    } else if from_journal {
        journal.evicted.insert(h.key.clone(), v);
    }
    for s in h.segs.drain(..) {
        if let Some(k) = queues.packs.release(&s, id) {
            batch.del(k);
        }
    }
    for s in h.aside.take().map(|a| a.retries).unwrap_or_default() {
        batch.del(keys::retry(id, s));
    }
    batch.cut();
    Ok((None, returned))
}

/// A host's queue as the last run left it, around its stored segments and retries.
/// Leases in flight and the front come back first (records of older versions have head 0:
/// their leased entries are still queued at the head); other retries below the head
/// (per-URL retries, URLs of held origins set aside) go behind the queue, where a held
/// origin's are set aside again; intake-log entries past the segments are pending.
fn restore_queue(h: &mut HostMem, leased: &[u64], host_intake: IntakeEntries) {
    let mut front: Vec<u64> = leased
        .iter()
        .copied()
        .filter(|&s| s < h.rec.head_seq)
        .collect();
    front.sort_unstable();
    front.dedup();
    let mut behind: Vec<u64> = h
        .aside()
        .retries
        .iter()
        .copied()
        .filter(|&s| s < h.rec.head_seq && front.binary_search(&s).is_err())
        .collect();
    behind.sort_unstable();
    behind.dedup();
    if !front.is_empty() {
        h.aside_mut().front = front.into();
    }
    let seg_end = h.segs.last().map_or(0, SegRef::end);
    let pending = pending_from_intake(h, seg_end.max(h.live_from()), host_intake);
    let tail = [
        h.rec.head_seq,
        seg_end,
        h.aside().front.last().map_or(0, |&s| s + 1),
        pending.as_ref().map_or(0, |p| p.end()),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    h.pending = pending.unwrap_or_else(|| Pending::starting_at(tail));
    let end = h.pending.end();
    let delayed: ThinVec<Delayed> = behind
        .into_iter()
        .map(|seq| Delayed {
            seq,
            due_ms: 0,
            behind: end,
            expired: false,
        })
        .collect();
    if !delayed.is_empty() {
        h.aside_mut().delayed = delayed;
    }
}

/// The host's intake-log entries from `keep_from` on (those below are in its segments or
/// were handed out), if any; entries out of sequence are logged and skipped.
fn pending_from_intake(h: &HostMem, keep_from: u64, host_intake: IntakeEntries) -> Option<Pending> {
    let mut pending: Option<Pending> = None;
    for (seq, e) in host_intake {
        if seq < keep_from {
            continue;
        }
        let p = pending.get_or_insert_with(|| Pending::starting_at(seq));
        if seq != p.end() {
            tracing::error!(host = %h.key, seq, expected = p.end(), "intake log out of order; entry skipped");
            continue;
        }
        p.push(&e);
    }
    pending
}

/// What a rebuilt host has queued: the front and the URLs set aside, plus everything
/// stored or pending from the head on.
fn queued_at_open(h: &HostMem) -> u64 {
    let head = h.rec.head_seq;
    let in_segs: u64 = h
        .segs
        .iter()
        .map(|s| s.end().saturating_sub(s.first.max(head)))
        .sum();
    let in_pending = h.pending.end().saturating_sub(h.pending.first.max(head));
    (h.aside().front.len() + h.aside().delayed.len()) as u64 + in_segs + in_pending
}
