//! Property tests of the stored-record codecs (`frontier::store::codec`, `frontier::store::packed`):
//! round trips of host records, queue entries, segments, intake records and seen buckets;
//! the bucket operations against a `BTreeSet` model; and cut (truncated) values, which
//! must be errors (or, for an intake record, a prefix of its entries), never a panic.
//! `crates/frontier/fuzz` (target `decode_records`) feeds the same decoders arbitrary bytes.

use std::collections::BTreeSet;

use frontier::store::packed::{
    bucket_contains, decode_bucket, encode_bucket, encode_segment, intake_entries, merge_sorted,
    split_bucket, IntakeWriter, Segment, BUCKET_MAX, SEGMENT_MAX_ENTRIES,
};
use frontier::{DropReason, DropRecord, HostCounters, HostRecord, QueueEntry};
use proptest::prelude::*;

// ------------------------------------------------------------------- strategies

/// A u64 field: any value, often a small one (most stored fields are small, and varints
/// change length at 7-bit boundaries).
fn field() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..300,
        (0u32..64).prop_map(|b| 1u64 << b),
        (1u32..64).prop_map(|b| (1u64 << b) - 1),
        Just(u64::MAX),
    ]
}

fn host_record() -> impl Strategy<Value = HostRecord> {
    prop::collection::vec(field(), 19).prop_map(|f| HostRecord {
        id: f[0],
        next_allowed_ms: f[1],
        // (a u32 in memory: every value of it)
        in_flight: f[2] as u32,
        backoff_level: f[3] as u16,
        backoff_until_ms: f[4],
        crawl_delay_ms: f[5] as u32,
        last_response_ms: f[6] as u32,
        skipped: f[7] != 0,
        counters: HostCounters {
            enqueued: f[8] as u32,
            queued: f[9],
            dispatched: f[10] as u32,
            completed: f[11] as u32,
            dropped: f[12] as u32,
            given_up: f[13] as u32,
            retried: f[14] as u32,
            crawl_delay_clamped: f[15] as u32,
            crawl_delay_skipped: f[16] as u32,
            robots_fetches: f[17] as u32,
        },
        head_seq: f[18],
    })
}

fn queue_entry() -> impl Strategy<Value = QueueEntry> {
    (
        any::<u32>(),
        any::<u32>(),
        prop::option::of(prop_oneof![
            any::<String>(),
            "https?://[a-z.]{1,12}/[a-z0-9/?=&%-]{0,40}"
        ]),
        prop_oneof![any::<String>(), "([0-9]{1,3}\\+)?[LR]{0,50}"],
        prop_oneof![
            any::<String>(),
            "https?://[a-z.]{1,12}/[a-z0-9/?=&%-]{0,40}"
        ],
        prop_oneof![Just(0u8), 0u8..4],
    )
        .prop_map(|(attempts, depth, via, hops, url, kind)| QueueEntry {
            attempts,
            depth,
            // an empty via is stored as none
            via: via.filter(|v| !v.is_empty()),
            hops,
            kind: frontier::EntryKind::from_code(kind).unwrap_or_default(),
            url,
            recrawl: None,
        })
}

/// A URL hash: anything, or one of a few small values so that sets overlap.
fn hash() -> impl Strategy<Value = u128> {
    prop_oneof![any::<u128>(), 0u128..64, Just(u128::MAX)]
}

fn hash_set(max: usize) -> impl Strategy<Value = BTreeSet<u128>> {
    prop::collection::btree_set(hash(), 0..max)
}

/// Sorted unique hashes, `n` of them from `first` with gaps in `1..=gap`, so sizes around
/// and well past [`BUCKET_MAX`] are cheap to generate.
fn sorted_run() -> impl Strategy<Value = (u128, Vec<u128>)> {
    let sizes = prop_oneof![
        0usize..8,
        Just(BUCKET_MAX - 1),
        Just(BUCKET_MAX),
        Just(BUCKET_MAX + 1),
        Just(BUCKET_MAX / 2 * 3),
        Just(2 * BUCKET_MAX + 1),
        0usize..6 * BUCKET_MAX,
    ];
    (sizes, any::<u128>(), any::<u64>(), 1u64..1 << 40).prop_map(|(n, first, seed, gap)| {
        // room for n gaps of at most `gap` above `first`
        let span = (n as u128 + 1) * u128::from(gap);
        let mut h = first.min(u128::MAX - span);
        let mut x = seed;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(h);
            // splitmix64 step for the next gap
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            h += 1 + u128::from(z % gap);
        }
        let start = out
            .first()
            .map_or(first, |&f| f.saturating_sub(u128::from(seed % 3)));
        (start, out)
    })
}

// ------------------------------------------------------------------- host records

proptest! {
    #[test]
    fn host_record_stamped_round_trip(
        rec in host_record(),
        leases in prop::collection::vec(field(), 0..40),
        stamp in field(),
    ) {
        let enc = rec.encode_stamped(&leases, stamp);
        prop_assert_eq!(HostRecord::decode(&enc), Ok(rec));
        prop_assert_eq!(HostRecord::decode_leases(&enc), leases.clone());
        prop_assert_eq!(HostRecord::decode_stamp(&enc), stamp);

        let with = rec.encode_with_leases(&leases);
        prop_assert_eq!(HostRecord::decode(&with), Ok(rec));
        prop_assert_eq!(HostRecord::decode_leases(&with), leases);
        prop_assert_eq!(HostRecord::decode_stamp(&with), 0);

        let plain = rec.encode();
        prop_assert_eq!(HostRecord::decode(&plain), Ok(rec));
        prop_assert!(HostRecord::decode_leases(&plain).is_empty());
        prop_assert_eq!(HostRecord::decode_stamp(&plain), 0);
        // the record without the list is a prefix of the record with it
        prop_assert!(enc.starts_with(&plain) && enc.starts_with(&with));
        prop_assert_eq!(HostRecord::decode_address(&enc), None);
    }

    /// A host's address after the stamp round-trips, and leaves what decoders without it
    /// read (record, leases, stamp) as it was; cut short, it reads as no address.
    #[test]
    fn host_record_address_round_trip(
        rec in host_record(),
        leases in prop::collection::vec(field(), 0..8),
        stamp in field(),
        v6 in any::<bool>(),
        octets in any::<[u8; 16]>(),
    ) {
        let ip = if v6 {
            std::net::IpAddr::from(octets)
        } else {
            std::net::IpAddr::from([octets[0], octets[1], octets[2], octets[3]])
        };
        let enc = rec.encode_with_address(&leases, stamp, ip);
        prop_assert_eq!(HostRecord::decode(&enc), Ok(rec));
        prop_assert_eq!(HostRecord::decode_leases(&enc), leases.clone());
        prop_assert_eq!(HostRecord::decode_stamp(&enc), stamp);
        prop_assert_eq!(HostRecord::decode_address(&enc), Some(ip));
        let stamped = rec.encode_stamped(&leases, stamp);
        prop_assert!(enc.starts_with(&stamped));
        for cut in stamped.len()..enc.len() {
            prop_assert_eq!(HostRecord::decode_address(&enc[..cut]), None);
        }
    }

    /// A host record (no lease list) cut anywhere is an error: never a panic, never a
    /// half-read record.
    #[test]
    fn host_record_every_strict_prefix_is_an_error(rec in host_record()) {
        let enc = rec.encode();
        for cut in 0..enc.len() {
            let p = &enc[..cut];
            prop_assert!(HostRecord::decode(p).is_err(), "cut at {} of {}", cut, enc.len());
            prop_assert!(HostRecord::decode_leases(p).is_empty());
            prop_assert_eq!(HostRecord::decode_stamp(p), 0);
        }
    }

    /// A stamped record cut anywhere decodes or errors without panicking; whatever it
    /// gives is never more than what was written.
    #[test]
    fn host_record_stamped_prefixes_do_not_panic(
        rec in host_record(),
        leases in prop::collection::vec(field(), 0..8),
        stamp in field(),
    ) {
        let enc = rec.encode_stamped(&leases, stamp);
        for cut in 0..enc.len() {
            let p = &enc[..cut];
            if let Ok(d) = HostRecord::decode(p) {
                prop_assert_eq!(d, rec);
                prop_assert!(HostRecord::decode_leases(p).len() <= leases.len());
            }
            let _ = HostRecord::decode_stamp(p);
        }
    }
}

// ------------------------------------------------------------------- queue entries

proptest! {
    #[test]
    fn queue_entry_v3_round_trip(e in queue_entry()) {
        let enc = e.encode();
        let via_len = e.via.as_deref().map_or(0, str::len);
        // version, attempts, depth, then hop path and via with a varint length each
        let varint = |n: usize| if n < 128 { 1 } else if n < 16384 { 2 } else { 3 };
        let page = e.kind == frontier::EntryKind::Page;
        let url_at = 9 + varint(e.hops.len()) + e.hops.len() + varint(via_len) + via_len
            + usize::from(!page);
        prop_assert_eq!(enc.len(), url_at + e.url.len());
        prop_assert_eq!(enc[0], if page { 3 } else { 5 });
        let mut into = vec![0xAA];
        e.encode_into(&mut into);
        prop_assert_eq!(&into[1..], &enc[..]);
        prop_assert_eq!(QueueEntry::decode(&enc), Ok(e.clone()));
        // cut before the URL: an error (the URL runs to the end, so a cut inside it is a
        // shorter URL)
        for cut in 0..url_at {
            prop_assert!(QueueEntry::decode(&enc[..cut]).is_err(), "cut at {}", cut);
        }
        // version 2 (no via, no hop path) reads with neither
        let mut v2 = vec![2u8];
        v2.extend_from_slice(&e.attempts.to_le_bytes());
        v2.extend_from_slice(&e.depth.to_le_bytes());
        v2.extend_from_slice(e.url.as_bytes());
        prop_assert_eq!(
            QueueEntry::decode(&v2),
            Ok(QueueEntry { via: None, hops: String::new(), kind: Default::default(), ..e.clone() })
        );
        // version 1 (no depth either) reads as depth 0
        let mut v1 = vec![1u8];
        v1.extend_from_slice(&e.attempts.to_le_bytes());
        v1.extend_from_slice(e.url.as_bytes());
        prop_assert_eq!(
            QueueEntry::decode(&v1),
            Ok(QueueEntry { depth: 0, via: None, hops: String::new(), kind: Default::default(), ..e })
        );
    }
}

// ------------------------------------------------------------------- drop records

proptest! {
    #[test]
    fn drop_record_round_trip(
        reason in prop::sample::select(vec![
            DropReason::RobotsDisallowed,
            DropReason::CrawlDelayTooLong,
            DropReason::GaveUp,
        ]),
        at_ms in field(),
        detail in any::<String>(),
        entry in queue_entry(),
    ) {
        // version, reason, at_ms (u64 LE), detail length (u32 LE), detail, depth (u32 LE),
        // hop path and via (varint length each), URL
        let detail_end = 14 + detail.len();
        let d = DropRecord::of(entry.clone(), reason, detail, at_ms);
        prop_assert_eq!(
            (d.depth, &d.via, &d.hops, &d.url),
            (entry.depth, &entry.via, &entry.hops, &entry.url)
        );
        let enc = d.encode();
        prop_assert_eq!(enc[0], 2);
        prop_assert_eq!(DropRecord::decode(&enc), Ok(d.clone()));
        // cut inside the fixed fields, the detail or the discovery fields: an error
        let url_at = enc.len() - d.url.len();
        prop_assert!(url_at > detail_end + 4);
        for cut in 0..url_at {
            prop_assert!(DropRecord::decode(&enc[..cut]).is_err(), "cut at {}", cut);
        }
        // version 1 (no depth, via or hop path) still reads
        let mut v1 = enc[..detail_end].to_vec();
        v1[0] = 1;
        v1.extend_from_slice(d.url.as_bytes());
        prop_assert_eq!(
            DropRecord::decode(&v1),
            Ok(DropRecord { depth: 0, via: None, hops: String::new(), ..d })
        );
    }
}

// ------------------------------------------------------------------- segments

proptest! {
    #[test]
    fn segment_round_trip(entries in prop::collection::vec(queue_entry(), 0..40)) {
        let encoded: Vec<Vec<u8>> = entries.iter().map(QueueEntry::encode).collect();
        let v = encode_segment(encoded.iter().map(Vec::as_slice));
        let s = Segment::parse(&v).unwrap();
        prop_assert_eq!(s.len(), entries.len());
        prop_assert_eq!(s.is_empty(), entries.is_empty());
        for (i, e) in entries.iter().enumerate() {
            prop_assert_eq!(s.raw(i).unwrap(), &encoded[i][..]);
            prop_assert_eq!(&s.entry(i).unwrap(), e);
        }
        prop_assert!(s.raw(entries.len()).is_err());
        prop_assert!(s.entry(entries.len()).is_err());
    }

    /// Any byte strings (empty ones too) come back through `raw`.
    #[test]
    fn segment_of_raw_entries_round_trip(
        entries in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..SEGMENT_MAX_ENTRIES + 2),
    ) {
        let v = encode_segment(entries.iter().map(Vec::as_slice));
        prop_assert_eq!(v.len(), 5 + 4 * entries.len() + entries.iter().map(Vec::len).sum::<usize>());
        let s = Segment::parse(&v).unwrap();
        prop_assert_eq!(s.len(), entries.len());
        for (i, e) in entries.iter().enumerate() {
            prop_assert_eq!(s.raw(i).unwrap(), &e[..]);
        }
        prop_assert!(s.raw(entries.len()).is_err());
    }

    /// A segment cut anywhere is an error: never a panic, never a shorter segment.
    #[test]
    fn segment_every_strict_prefix_is_an_error(
        entries in prop::collection::vec(queue_entry(), 0..12),
        raw_entries in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..4), 0..12),
    ) {
        let encoded: Vec<Vec<u8>> = entries.iter().map(QueueEntry::encode).collect();
        for v in [
            encode_segment(encoded.iter().map(Vec::as_slice)),
            encode_segment(raw_entries.iter().map(Vec::as_slice)),
        ] {
            for cut in 0..v.len() {
                prop_assert!(Segment::parse(&v[..cut]).is_err(), "cut at {} of {}", cut, v.len());
            }
        }
    }

    /// Bytes after a segment's last entry (or after the header of an empty segment) make
    /// it an error, not a segment that ignores them.
    #[test]
    fn segment_with_bytes_after_it_is_an_error(
        entries in prop::collection::vec(queue_entry(), 0..6),
        extra in prop::collection::vec(any::<u8>(), 1..20),
    ) {
        let encoded: Vec<Vec<u8>> = entries.iter().map(QueueEntry::encode).collect();
        let mut v = encode_segment(encoded.iter().map(Vec::as_slice));
        v.extend_from_slice(&extra);
        prop_assert!(Segment::parse(&v).is_err());
    }

    /// A single queue entry, as older stores kept one per key, reads as a one-entry segment.
    #[test]
    fn legacy_entry_is_a_one_entry_segment(e in queue_entry()) {
        // older stores wrote version-2 entries (no via, no hop path)
        let mut enc = vec![2u8];
        enc.extend_from_slice(&e.attempts.to_le_bytes());
        enc.extend_from_slice(&e.depth.to_le_bytes());
        enc.extend_from_slice(e.url.as_bytes());
        let s = Segment::parse(&enc).unwrap();
        prop_assert_eq!(s.len(), 1);
        prop_assert_eq!(s.raw(0).unwrap(), &enc[..]);
        prop_assert_eq!(s.entry(0).unwrap(), QueueEntry { via: None, hops: String::new(), kind: Default::default(), ..e });
        prop_assert!(s.raw(1).is_err());
    }
}

// ------------------------------------------------------------------- intake records

type Intake = Vec<(u64, u64, Vec<u8>)>;

fn intake_items() -> impl Strategy<Value = Intake> {
    prop::collection::vec(
        (
            field(),
            field(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..40),
                queue_entry().prop_map(|e| e.encode()),
            ],
        ),
        0..24,
    )
}

/// The one record of `items` (they stay under a record's target size) and its entry ends;
/// None when nothing was added (no record is written then).
fn write_intake(items: &Intake) -> Option<(Vec<u8>, Vec<usize>)> {
    let mut w = IntakeWriter::default();
    assert!(w.is_empty());
    // record lengths after 0, 1, 2, ... entries
    let mut ends = vec![1];
    for (host, seq, e) in items {
        w.push(*host, *seq, e);
        ends.push(ends.last().unwrap() + 20 + e.len());
    }
    assert_eq!(w.is_empty(), items.is_empty());
    let mut records = w.finish();
    assert_eq!(records.len(), usize::from(!items.is_empty()));
    records.pop().map(|v| (v, ends))
}

fn as_refs(items: &[(u64, u64, Vec<u8>)]) -> Vec<(u64, u64, &[u8])> {
    items
        .iter()
        .map(|(h, s, e)| (*h, *s, e.as_slice()))
        .collect()
}

proptest! {
    #[test]
    fn intake_round_trip(items in intake_items()) {
        let Some((v, ends)) = write_intake(&items) else {
            return Ok(());
        };
        prop_assert_eq!(v.len(), *ends.last().unwrap());
        prop_assert_eq!(intake_entries(&v).unwrap(), as_refs(&items));
    }

    /// An intake record cut anywhere is an error, except at an entry boundary, where it
    /// reads as the entries before the cut.
    #[test]
    fn intake_strict_prefix_is_an_error_or_a_prefix_of_the_entries(items in intake_items()) {
        let Some((v, ends)) = write_intake(&items) else {
            return Ok(());
        };
        let all = as_refs(&items);
        for cut in 0..v.len() {
            match intake_entries(&v[..cut]) {
                Ok(got) => {
                    prop_assert!(got.len() < items.len());
                    prop_assert_eq!(&got[..], &all[..got.len()]);
                    prop_assert_eq!(cut, ends[got.len()], "read a prefix at a cut inside an entry");
                }
                Err(_) => prop_assert!(!ends.contains(&cut), "error at entry boundary {}", cut),
            }
        }
    }
}

// ------------------------------------------------------------------- seen buckets

proptest! {
    #[test]
    fn merge_sorted_is_set_union(old in hash_set(64), new in hash_set(64)) {
        let o: Vec<u128> = old.iter().copied().collect();
        let n: Vec<u128> = new.iter().copied().collect();
        let model: Vec<u128> = old.union(&new).copied().collect();
        prop_assert_eq!(merge_sorted(&o, &n), model.clone());
        prop_assert_eq!(merge_sorted(&n, &o), model);
        prop_assert_eq!(merge_sorted(&o, &[]), o.clone());
        prop_assert_eq!(merge_sorted(&[], &n), n);
    }

    #[test]
    fn bucket_round_trip_and_contains_agrees_with_model(
        set in hash_set(200),
        probes in prop::collection::vec(hash(), 0..32),
    ) {
        let hashes: Vec<u128> = set.iter().copied().collect();
        let v = encode_bucket(&hashes);
        prop_assert_eq!(v.len(), 1 + 16 * hashes.len());
        prop_assert_eq!(decode_bucket(&v).unwrap(), hashes.clone());
        for h in hashes.iter().chain(&probes) {
            prop_assert_eq!(bucket_contains(&v, *h).unwrap(), set.contains(h), "hash {}", h);
        }
        for h in &hashes {
            // neighbours of members, which binary search must tell apart
            for n in [h.wrapping_sub(1), h.wrapping_add(1)] {
                prop_assert_eq!(bucket_contains(&v, n).unwrap(), set.contains(&n));
            }
        }
    }

    /// A bucket cut anywhere is an error, or (cut between hashes) the hashes before the cut.
    #[test]
    fn bucket_strict_prefix_is_an_error_or_a_prefix(set in hash_set(24), probe in hash()) {
        let hashes: Vec<u128> = set.iter().copied().collect();
        let v = encode_bucket(&hashes);
        for cut in 0..v.len() {
            let p = &v[..cut];
            let whole = cut >= 1 && (cut - 1) % 16 == 0;
            match decode_bucket(p) {
                Ok(got) => {
                    prop_assert!(whole, "decoded a cut inside a hash at {}", cut);
                    prop_assert_eq!(&got[..], &hashes[..(cut - 1) / 16]);
                    prop_assert_eq!(bucket_contains(p, probe).unwrap(), got.contains(&probe));
                }
                Err(_) => {
                    prop_assert!(!whole, "error at hash boundary {}", cut);
                    prop_assert!(bucket_contains(p, probe).is_err());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `split_bucket` keeps every hash, in order, in pieces of at most `BUCKET_MAX` (half
    /// that when it splits, so the pieces have room to grow); the first piece keeps the
    /// bucket's start key and every other piece starts at its lowest hash.
    #[test]
    fn split_bucket_preserves_hashes_in_bounded_pieces((start, hashes) in sorted_run()) {
        prop_assert!(hashes.windows(2).all(|w| w[0] < w[1]));
        let parts = split_bucket(start, hashes.clone());
        prop_assert!(!parts.is_empty());
        prop_assert_eq!(parts[0].0, start);
        if hashes.len() <= BUCKET_MAX {
            prop_assert_eq!(parts.len(), 1);
        } else {
            prop_assert!(parts.len() >= 2);
            for (_, p) in &parts {
                prop_assert!(!p.is_empty());
                prop_assert!(p.len() <= BUCKET_MAX / 2, "piece of {}", p.len());
            }
        }
        for (s, p) in &parts[1..] {
            prop_assert_eq!(Some(s), p.first());
        }
        // each piece's hashes lie at or above its start key
        for (s, p) in &parts {
            if let Some(f) = p.first() {
                prop_assert!(f >= s);
            }
        }
        let back: Vec<u128> = parts.iter().flat_map(|(_, p)| p.iter().copied()).collect();
        prop_assert_eq!(back, hashes);
    }
}

// ------------------------------------------------------------------- arbitrary bytes

proptest! {
    /// Every decoder takes any bytes without panicking (the fuzz target does this at scale).
    #[test]
    fn decoders_never_panic(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            (prop::sample::select(vec![1u8, 2, 3, 0x10, 0x20, 0x30]), prop::collection::vec(any::<u8>(), 0..300))
                .prop_map(|(v, mut b)| { b.insert(0, v); b }),
        ],
        probe in hash(),
    ) {
        if let Ok(s) = Segment::parse(&bytes) {
            for i in 0..s.len() {
                let _ = s.raw(i);
                let _ = s.entry(i);
            }
        }
        let _ = intake_entries(&bytes);
        let _ = decode_bucket(&bytes);
        let _ = bucket_contains(&bytes, probe);
        let _ = HostRecord::decode(&bytes);
        prop_assert!(HostRecord::decode_leases(&bytes).len() <= bytes.len());
        let _ = HostRecord::decode_stamp(&bytes);
        let _ = QueueEntry::decode(&bytes);
        let _ = DropRecord::decode(&bytes);
    }
}
