//! The intake log's fold, in slices: every host's pending entries become queue segments,
//! the hashes queued before it are merged into the seen buckets, then the log records it
//! covers go. A fold is started by a call that finds it due and goes on a slice (about
//! `fold_slice_bytes` of writes) at a time in the calls that follow (enqueues and
//! completions), the frontier's lock given back between slices: at 3M hosts a whole fold
//! held it for 30-41 s and gave sled a gigabyte at once (docs/benchmarks.md).
//!
//! Between slices everything stays answerable: a host not yet folded keeps its entries in
//! memory, a folded one reads them from its segments, and the hashes being merged are
//! looked up in memory (`SeenSet::folding`) until the last slice. A crash part way leaves
//! the log whole: at open its entries are queued again from past the hosts' segments, and
//! its hashes merged twice are stored once.

use crate::api::{Frontier, Inner};
use crate::error::Result;
use crate::sched::hosts::SegRef;
use crate::store::journal::FOLD_PIECE_BYTES;
use crate::store::keys;
use crate::store::packed;
use crate::store::Batch;

/// A fold under way.
pub(crate) struct Folding {
    /// Its number (the first part of its segments' keys).
    fold: u32,
    /// The hosts that had pending entries when it started, sorted; those before
    /// `next_host` are folded.
    hosts: Vec<u64>,
    next_host: usize,
    /// Position in `SeenSet::folding` of the first hash not yet merged.
    next_hash: usize,
    /// Log records below this one are covered by the fold.
    log_end: u64,
    /// Segments written so far.
    segments: usize,
    /// The pack being filled with thin hosts' entries (written at the latest at the end
    /// of the slice: no host points into a pack the store does not have), and the packs
    /// written so far.
    pack: Option<crate::pack::OpenPack>,
    packs: usize,
    /// Slices done so far, and when it started (for its log line).
    slices: u32,
    started: std::time::Instant,
}

impl Frontier {
    /// After a call's own writes (`batch`: applied first, left empty): start a fold if
    /// `due` and none is under way, then do a slice of the fold under way. A fold found
    /// due again while one is under way (the intake outran the slices) is finished now.
    pub(crate) fn fold_step(&self, inner: &mut Inner, batch: &mut Batch, due: bool) -> Result<()> {
        let budget = match (&inner.folding, due) {
            (None, false) => return Ok(()),
            (None, true) => {
                Self::start_fold(inner);
                self.cfg.fold_slice_bytes
            }
            (Some(_), true) => usize::MAX,
            (Some(_), false) => self.cfg.fold_slice_bytes,
        };
        self.fold_slice(inner, batch, budget)
    }

    /// Whether a fold is under way.
    #[cfg(test)]
    pub(crate) fn folding(&self) -> bool {
        self.inner.lock().folding.is_some()
    }

    /// Take what the fold covers: the hosts with pending entries, the hashes queued since
    /// the last fold, the log so far. The log's counters start again from here.
    fn start_fold(inner: &mut Inner) {
        let mut hosts: Vec<u64> = inner
            .sched
            .hosts()
            .filter(|(_, h)| !h.pending.is_empty())
            .map(|(id, _)| id)
            .collect();
        hosts.sort_unstable();
        let fold = inner.intake.next_fold;
        inner.intake.next_fold = SegRef::fold_after(fold);
        inner.seen.folding = inner.seen.recent.take_sorted();
        inner.folding = Some(Folding {
            fold,
            hosts,
            next_host: 0,
            next_hash: 0,
            log_end: inner.intake.next_seq,
            segments: 0,
            pack: None,
            packs: 0,
            slices: 0,
            started: std::time::Instant::now(),
        });
        inner.intake.bytes = 0;
        inner.intake.entries = 0;
        inner.intake.hosts = 0;
    }

    /// Fold hosts, then merge hashes, until about `budget` bytes were written; the last
    /// slice lets the log records go. Written in pieces of about [`FOLD_PIECE_BYTES`] (a
    /// whole fold's writes are never held at once); the caller's flush makes it durable.
    fn fold_slice(&self, inner: &mut Inner, batch: &mut Batch, budget: usize) -> Result<()> {
        const INTAKE_DELETES_PER_CALL: usize = 64;
        let mut out = std::mem::take(batch);
        out.cut();
        let Some(mut f) = inner.folding.take() else {
            self.store.apply(out)?;
            return Ok(());
        };
        f.slices += 1;
        let mut held = 0usize;
        let mut written = 0usize;
        while f.next_host < f.hosts.len() && written < budget {
            let id = f.hosts[f.next_host];
            f.next_host += 1;
            let bytes = self.fold_host(inner, id, &mut f, &mut out);
            written += bytes;
            self.spill(&mut out, &mut held, bytes)?;
        }
        Self::close_pack(&mut f, &mut out);
        if f.next_host == f.hosts.len() && written < budget {
            self.merge_hashes(inner, &mut f, &mut out, &mut held, budget - written)?;
        }
        self.store.apply(out)?;
        if f.next_host < f.hosts.len() || f.next_hash < inner.seen.folding.len() {
            inner.folding = Some(f);
            return Ok(());
        }
        // the log, off the lock: thousands of small records now, and sled reads each one
        // it deletes back from disk. Deleted after the fold in sled's log, so never
        // durable without it; a delete lost in a crash leaves records whose entries the
        // replay at open finds in segments already (and hashes merged twice are stored
        // once). Calls of 64: sled holds every leaf a call touches until it returns.
        let log: Vec<Vec<u8>> = (inner.intake.first_seq..f.log_end)
            .map(keys::intake)
            .collect();
        for chunk in log.chunks(INTAKE_DELETES_PER_CALL) {
            self.reclaimer.delete(chunk.to_vec());
        }
        tracing::debug!(
            segments = f.segments,
            packs = f.packs,
            hashes = inner.seen.folding.len(),
            log_records = log.len(),
            slices = f.slices,
            elapsed_ms = f.started.elapsed().as_millis() as u64,
            "intake log folded"
        );
        inner.intake.first_seq = f.log_end;
        inner.seen.folding = Vec::new();
        Ok(())
    }

    /// Host `id`'s pending entries as segments of fold `f`, or (a few) in a pack, through
    /// `out`; bytes written.
    fn fold_host(&self, inner: &mut Inner, id: u64, f: &mut Folding, out: &mut Batch) -> usize {
        let Inner {
            sched,
            intake,
            packs,
            ..
        } = inner;
        let Some(h) = sched.host_mut(id) else {
            // left memory since the fold started: nothing of it was pending any more
            return 0;
        };
        let from = h.live_from().max(h.pending.first);
        let entries: Vec<&[u8]> = h.pending.from(from).collect();
        let mut first = h.pending.end() - entries.len() as u64;
        let mut bytes = 0;
        let size: usize = entries.iter().map(|e| packed::intake_entry_bytes(e)).sum();
        if !entries.is_empty()
            && size < crate::pack::PACK_BELOW_BYTES
            && SegRef::can_pack(intake.next_fold)
        {
            if f.pack.as_ref().is_some_and(|p| p.full_for(size)) {
                Self::close_pack(f, out);
            }
            let pack = f.pack.get_or_insert_with(|| {
                let no = intake.next_fold;
                intake.next_fold = SegRef::fold_after(no);
                crate::pack::OpenPack::new(no)
            });
            bytes += pack.push(id, first, &entries);
            packs.add_ref(pack.no);
            crate::sched::pending::grow_gently(&mut h.segs, 1);
            h.segs.push(SegRef {
                first,
                len: entries.len() as u32,
                fold: SegRef::pack(pack.no),
            });
            let end = h.pending.end();
            h.pending.reset(end);
            return bytes;
        }
        let chunks = packed::chunk_by_size(
            &entries,
            packed::SEGMENT_MAX_ENTRIES,
            packed::VALUE_TARGET_BYTES,
            |e| e.len() + 4,
        );
        for chunk in chunks {
            let seg = packed::encode_segment(chunk.iter().copied());
            bytes += seg.len();
            let at = SegRef {
                first,
                // at most SEGMENT_MAX_ENTRIES
                len: chunk.len() as u32,
                fold: f.fold,
            };
            out.put(keys::segment_key(&at, id), seg);
            crate::sched::pending::grow_gently(&mut h.segs, 1);
            h.segs.push(at);
            first += chunk.len() as u64;
            f.segments += 1;
        }
        out.cut();
        let end = h.pending.end();
        h.pending.reset(end);
        bytes
    }

    /// Write the pack being filled, if any, through `out`.
    fn close_pack(f: &mut Folding, out: &mut Batch) {
        if let Some(pack) = f.pack.take() {
            let (k, v) = pack.finish();
            out.put(k, v);
            out.cut();
            f.packs += 1;
        }
    }

    /// Apply `out` once it holds a fold piece's worth ([`FOLD_PIECE_BYTES`]) with `more`.
    fn spill(&self, out: &mut Batch, held: &mut usize, more: usize) -> Result<()> {
        *held += more;
        if *held >= FOLD_PIECE_BYTES {
            self.store.apply(std::mem::take(out))?;
            *held = 0;
        }
        Ok(())
    }

    /// Merge the fold's hashes into the stored seen buckets (splitting those that grow
    /// too big), a bucket at a time from `f.next_hash`, through `out`, until about
    /// `budget` bytes were written.
    fn merge_hashes(
        &self,
        inner: &mut Inner,
        f: &mut Folding,
        out: &mut Batch,
        held: &mut usize,
        budget: usize,
    ) -> Result<()> {
        let seen = &mut inner.seen;
        let new = &seen.folding;
        let mut added = Vec::new();
        let mut written = 0usize;
        let mut i = f.next_hash;
        while i < new.len() && written < budget {
            let start = seen.bucket_of(new[i]);
            let next = seen
                .starts
                .get(seen.starts.partition_point(|&s| s <= start))
                .copied();
            let mut j = match next {
                Some(n) => i + new[i..].partition_point(|&h| h < n),
                None => new.len(),
            };
            // a bucket taking more than the slice's worth (the first fold of a store puts
            // every hash into its one bucket) takes a slice's worth now: the pieces it is
            // split into are found by the next slice's lookups (their starts below, the
            // pieces applied by the caller in between)
            let room = ((budget - written) / std::mem::size_of::<u128>()).max(1);
            let capped = j - i > room;
            if capped {
                j = i + room;
            }
            let old = match self.store.get(&keys::seen_bucket(start))? {
                Some(v) => packed::decode_bucket(&v)?,
                None => Vec::new(),
            };
            let merged = packed::merge_sorted(&old, &new[i..j]);
            for (s, part) in packed::split_bucket(start, merged) {
                let v = packed::encode_bucket(&part);
                let bytes = v.len();
                out.put(keys::seen_bucket(s), v);
                if s != start {
                    out.put(keys::bucket_start(s), Vec::new());
                    added.push(s);
                }
                out.cut();
                written += bytes;
                self.spill(out, held, bytes)?;
            }
            i = j;
            if capped {
                break;
            }
        }
        f.next_hash = i;
        // buckets split in this slice: their starts are in the store with them (applied
        // by the caller before anything reads them)
        seen.starts.extend(added);
        seen.starts.sort_unstable();
        Ok(())
    }
}
