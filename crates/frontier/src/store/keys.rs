//! Store key layout. The first byte names the record kind.

/// A key: the record kind's tag byte followed by the parts, back to back.
fn tagged(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + parts.iter().map(|p| p.len()).sum::<usize>());
    k.push(tag);
    for part in parts {
        k.extend_from_slice(part);
    }
    k
}
/// Seen-set as older stores kept it: `S` + 128-bit xxh3 of the canonical URL
/// (big-endian) -> empty. Still read (a store that has them keeps answering for
/// them); no longer written.
pub fn seen(hash: u128) -> Vec<u8> {
    tagged(b'S', &[&hash.to_be_bytes()])
}
/// Seen bucket: `B` + lowest hash it covers (u128 BE) -> sorted hashes (see
/// `packed.rs`). The buckets partition the hash space.
pub fn seen_bucket(start: u128) -> Vec<u8> {
    tagged(b'B', &[&start.to_be_bytes()])
}
/// Seen-bucket directory: `b` + a bucket's lowest hash (u128 BE) -> empty, one per [`seen_bucket`]
/// except the first (lowest hash 0), written with the bucket. Opening reads these small keys
/// instead of every bucket (which would pull the whole seen-set through sled's cache).
pub fn bucket_start(start: u128) -> Vec<u8> {
    tagged(b'b', &[&start.to_be_bytes()])
}
/// Present once the `b` directory lists every bucket (stores from before it are listed
/// once, at their first open).
pub const BUCKET_DIRECTORY: &[u8] = b"M\0bucket_directory";
/// Intake-log record: `W` + sequence (u64 BE) -> the entries one enqueue queued.
pub fn intake(seq: u64) -> Vec<u8> {
    tagged(b'W', &[&seq.to_be_bytes()])
}
/// Retry entry: `T` + host id + sequence -> [`crate::QueueEntry`] with its attempts
/// raised; it overrides the entry at that sequence until the URL completes.
pub fn retry(id: u64, seq: u64) -> Vec<u8> {
    idseq(b'T', id, seq)
}
/// Host record: `H` + politeness key -> [`crate::HostRecord`].
pub fn host(key: &str) -> Vec<u8> {
    tagged(b'H', &[key.as_bytes()])
}
fn idseq(tag: u8, id: u64, seq: u64) -> Vec<u8> {
    tagged(tag, &[&id.to_be_bytes(), &seq.to_be_bytes()])
}
/// Queue segment of older stores: `Q` + host id + sequence of its first entry ->
/// consecutive entries (see `packed.rs`; still older stores have one
/// [`crate::QueueEntry`] per key here, which reads as a one-entry segment). Still read and
/// deleted; no longer written.
pub fn queued(id: u64, seq: u64) -> Vec<u8> {
    idseq(b'Q', id, seq)
}
/// Queue segment: `q` + fold number (u32 BE) + host id + sequence of its first entry ->
/// consecutive entries of that host (see `packed.rs`). The fold number comes first so
/// that each fold writes its segments after every earlier one: with many hosts a fold
/// gives each host a small segment, and keyed by host first those landed in every leaf
/// of the tree, so each fold rewrote what all earlier folds had written.
pub fn segment(fold: u32, id: u64, first: u64) -> Vec<u8> {
    tagged(
        b'q',
        &[&fold.to_be_bytes(), &id.to_be_bytes(), &first.to_be_bytes()],
    )
}
/// Parse a [`segment`] key: (fold, host id, first sequence).
pub fn parse_segment(k: &[u8]) -> Option<(u32, u64, u64)> {
    if k.len() != 21 || k[0] != b'q' {
        return None;
    }
    let fold = u32::from_be_bytes(k[1..5].try_into().ok()?);
    let id = u64::from_be_bytes(k[5..13].try_into().ok()?);
    let first = u64::from_be_bytes(k[13..21].try_into().ok()?);
    Some((fold, id, first))
}
/// Leased URL: `L` + host id + sequence (written by older versions only; such leases are
/// returned to their queues at open. Leases now live in the host record).
pub fn leased(id: u64, seq: u64) -> Vec<u8> {
    idseq(b'L', id, seq)
}
/// Robots record: `R` + origin -> robots-policy's encoded state.
pub fn robots(origin: &str) -> Vec<u8> {
    tagged(b'R', &[origin.as_bytes()])
}
/// Dropped / given-up URL: `D` + 128-bit hash -> [`crate::DropRecord`].
pub fn dropped(hash: u128) -> Vec<u8> {
    tagged(b'D', &[&hash.to_be_bytes()])
}
/// A drop not yet written to the caller's log: `U` + 128-bit hash -> empty. Put in the
/// same batch as the [`dropped`] record, deleted by [`crate::Frontier::drops_logged`];
/// those left at open are reported again as `FrontierEvent::Dropped` (at-least-once).
pub fn unlogged(hash: u128) -> Vec<u8> {
    tagged(b'U', &[&hash.to_be_bytes()])
}
/// Paused politeness key: `P` + key -> empty (an operator's pause survives restarts).
pub fn paused(key: &str) -> Vec<u8> {
    tagged(b'P', &[key.as_bytes()])
}
/// A host's IP address: `I` + politeness key -> the address its fetches last connected
/// to, as text (the IP group it belongs to; see `sched/ipgroup.rs`).
pub fn address(key: &str) -> Vec<u8> {
    tagged(b'I', &[key.as_bytes()])
}
/// Host-record journal: `J` + sequence (u64 BE) -> changed host records (see
/// `docs/frontier.md`, "Host-record journal").
pub fn journal(seq: u64) -> Vec<u8> {
    tagged(b'J', &[&seq.to_be_bytes()])
}
/// Parse a journal key.
pub fn parse_journal(k: &[u8]) -> Option<u64> {
    let b: [u8; 8] = k.get(1..9)?.try_into().ok()?;
    (k.len() == 9 && k[0] == b'J').then(|| u64::from_be_bytes(b))
}
/// Due index: `N` + due second (unix ms rounded up to a whole second, u64 BE) + a
/// random id (u64 BE) -> the queue entries (with their recrawl records) of one batch that
/// come due in that second (`store::revisit::encode_due`). Ordered by due time; one key
/// per completion batch and second, not per URL.
pub fn due(due_slot_ms: u64, id: u64) -> Vec<u8> {
    tagged(b'N', &[&due_slot_ms.to_be_bytes(), &id.to_be_bytes()])
}
/// The due second of a due-index key.
pub fn parse_due(k: &[u8]) -> Option<u64> {
    let b: [u8; 8] = k.get(1..9)?.try_into().ok()?;
    (k.len() == 17 && k[0] == b'N').then(|| u64::from_be_bytes(b))
}
/// The second a due time belongs to in the due index: rounded up, so that every entry of
/// a key is due once its second has come.
pub fn due_slot(due_ms: u64) -> u64 {
    due_ms.div_ceil(1000).saturating_mul(1000)
}
/// Where a scheduled URL waits (kept only with `RecrawlConfig::locate_for_lastmod`, for
/// sitemaps' `lastmod`): `Y` + 128-bit hash of the canonical URL (BE) -> its due-index key's
/// second and id and when it was last fetched (`store::revisit::encode_locator`). A locator
/// whose due key is gone (the URL was moved to its queue) is stale, and harmless.
pub fn locator(hash: u128) -> Vec<u8> {
    tagged(b'Y', &[&hash.to_be_bytes()])
}
/// Present once any URL carried a recrawl record: completions then look for them.
pub const RECRAWL_IN_USE: &[u8] = b"M\0recrawl";
/// Next host id counter.
pub const NEXT_HOST_ID: &[u8] = b"M\0next_host_id";
/// Parse `tag + id + seq`.
pub fn parse_idseq(k: &[u8]) -> Option<(u64, u64)> {
    if k.len() != 17 {
        return None;
    }
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&k[1..9]);
    b.copy_from_slice(&k[9..17]);
    Some((u64::from_be_bytes(a), u64::from_be_bytes(b)))
}
/// A client's settings for a queue (url-frontier's SetDelay / BlockQueueUntil): `g` +
/// politeness key (empty: the default of every queue) -> [`crate::QueueControl`].
pub fn queue_control(key: &str) -> Vec<u8> {
    tagged(b'g', &[key.as_bytes()])
}
/// Crawl records (url-frontier's crawlID, see `crawl.rs`): `c` + kind byte + name (a
/// crawl, or `crawl \0 politeness key`) -> kind's value (a generation, a limit, a count;
/// u64 LE) or empty (a crawl's name).
pub fn crawl(kind: u8, name: &[u8]) -> Vec<u8> {
    tagged(b'c', &[&[kind], name])
}
/// A URL an external fetcher reported done for good (a lease completed with no next
/// fetch date: url-frontier's KnownURLItem with date 0): `e` + 128-bit hash of the stored
/// URL -> empty. A KnownURLItem with a date put later queues it again
/// ([`crate::Frontier::enqueue_again`], which deletes this key).
pub fn fetcher_done(hash: u128) -> Vec<u8> {
    tagged(b'e', &[&hash.to_be_bytes()])
}
/// The done-set's log (see `done.rs`): `E` + sequence (u64 BE) -> the hashes one
/// completion batch marked done (and those a re-queue unmarked), folded into
/// [`done_bucket`]s and deleted in batches.
pub fn done_log(seq: u64) -> Vec<u8> {
    tagged(b'E', &[&seq.to_be_bytes()])
}
/// A done-set bucket: `F` + the top 12 bits of the hashes it holds (u16 BE) -> their sorted
/// list (`packed::encode_bucket`).
pub fn done_bucket(index: u16) -> Vec<u8> {
    tagged(b'F', &[&index.to_be_bytes()])
}
/// A client's metadata for a URL: `m` + 128-bit hash of the canonical URL -> the bytes the
/// client gave (opaque to the frontier).
pub fn metadata(hash: u128) -> Vec<u8> {
    tagged(b'm', &[&hash.to_be_bytes()])
}

/// Pack: `p` + pack number (u32 BE, from the fold numbers' counter) -> the entries of
/// several hosts, each host's consecutive, in the intake-log record format (see
/// `pack.rs`).
pub fn pack(no: u32) -> Vec<u8> {
    tagged(b'p', &[&no.to_be_bytes()])
}
/// The pack number of a `p` key.
pub fn parse_pack(k: &[u8]) -> Option<u32> {
    match k {
        [b'p', a, b, c, d] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// The store key of a host's queue segment `seg`, for host `id` (a pack's if it is in one).
pub(crate) fn segment_key(seg: &crate::sched::hosts::SegRef, id: u64) -> Vec<u8> {
    if let Some(no) = seg.pack_no() {
        return pack(no);
    }
    match seg.fold {
        crate::sched::hosts::SegRef::LEGACY => queued(id, seg.first),
        fold => segment(fold, id, seg.first),
    }
}
