//! Every decoder of stored frontier bytes gives Ok or Err for any input, never a panic or
//! an allocation out of proportion to the input; what a decoder accepts re-encodes to the
//! same value (to the same bytes, for the formats without slack).
#![no_main]

use frontier::store::packed::{bucket_contains, decode_bucket, encode_bucket, intake_entries, Segment};
use frontier::store::packed::{encode_segment, IntakeWriter};
use frontier::{DropRecord, HostRecord, QueueEntry};
use libfuzzer_sys::fuzz_target;

/// A hash to look up: the input's last 16 bytes (big-endian, as buckets store them), or the
/// whole input zero-padded when shorter.
fn probe_hash(data: &[u8]) -> u128 {
    let mut a = [0u8; 16];
    let tail = &data[data.len().saturating_sub(16)..];
    a[16 - tail.len()..].copy_from_slice(tail);
    u128::from_be_bytes(a)
}

fn segment(data: &[u8]) {
    let Ok(seg) = Segment::parse(data) else {
        return;
    };
    // a parsed segment's count is bounded by its bytes (4 per offset), or is 1 (legacy)
    assert!(seg.len() <= data.len() / 4 || seg.len() == 1);
    assert_eq!(seg.is_empty(), seg.len() == 0);
    let mut raws = Vec::with_capacity(seg.len());
    for i in 0..seg.len() {
        let raw = seg.raw(i);
        let entry = seg.entry(i);
        match &raw {
            Ok(r) => {
                assert!(r.len() <= data.len());
                assert_eq!(entry, QueueEntry::decode(r));
                raws.push(*r);
            }
            Err(_) => assert!(entry.is_err(), "entry({i}) decoded but raw({i}) failed"),
        }
    }
    assert!(seg.raw(seg.len()).is_err());
    // every entry readable and not a legacy single entry: the segment is the canonical
    // encoding of its entries (an empty one too: nothing may follow its header)
    if raws.len() == seg.len() && data.first() == Some(&0x10) {
        assert_eq!(
            encode_segment(raws.iter().copied()),
            data,
            "segment re-encodes differently"
        );
    }
}

fn intake(data: &[u8]) {
    let Ok(entries) = intake_entries(data) else {
        return;
    };
    // each entry takes at least 20 bytes
    assert!(entries.len() <= data.len() / 20);
    let mut w = IntakeWriter::default();
    for &(host, seq, e) in &entries {
        w.push(host, seq, e);
    }
    assert_eq!(w.is_empty(), entries.is_empty());
    assert_eq!(w.finish(), data, "intake record re-encodes differently");
}

fn bucket(data: &[u8]) {
    let hash = probe_hash(data);
    let contains = bucket_contains(data, hash);
    let decoded = decode_bucket(data);
    assert_eq!(contains.is_ok(), decoded.is_ok());
    let (Ok(contains), Ok(hashes)) = (contains, decoded) else {
        return;
    };
    assert_eq!(hashes.len(), data.len() / 16);
    assert_eq!(
        encode_bucket(&hashes),
        data,
        "bucket re-encodes differently"
    );
    // binary search is only meaningful over a sorted bucket (as the store writes them)
    if hashes.windows(2).all(|w| w[0] < w[1]) {
        assert_eq!(contains, hashes.binary_search(&hash).is_ok());
        for h in hashes.iter().take(8) {
            assert!(bucket_contains(data, *h).unwrap());
        }
    }
}

fn host(data: &[u8]) {
    let rec = HostRecord::decode(data);
    let leases = HostRecord::decode_leases(data);
    let stamp = HostRecord::decode_stamp(data);
    // a lease list is never longer than the bytes it came from
    assert!(leases.len() <= data.len());
    let Ok(rec) = rec else {
        assert!(leases.is_empty() && stamp == 0);
        return;
    };
    let again = rec.encode_stamped(&leases, stamp);
    assert_eq!(HostRecord::decode(&again), Ok(rec));
    assert_eq!(HostRecord::decode_leases(&again), leases);
    assert_eq!(HostRecord::decode_stamp(&again), stamp);
    assert_eq!(HostRecord::decode(&rec.encode()), Ok(rec));
    if let Some(ip) = HostRecord::decode_address(data) {
        let with = rec.encode_with_address(&leases, stamp, ip);
        assert_eq!(HostRecord::decode_address(&with), Some(ip));
        assert_eq!(HostRecord::decode_stamp(&with), stamp);
    }
}

fn queue(data: &[u8]) {
    let Ok(e) = QueueEntry::decode(data) else {
        return;
    };
    // every string came out of the input
    let via = e.via.as_deref().map_or(0, str::len);
    assert!(e.url.len() + e.hops.len() + via <= data.len());
    assert_eq!(QueueEntry::decode(&e.encode()), Ok(e));
}

fn drop_record(data: &[u8]) {
    let Ok(d) = DropRecord::decode(data) else {
        return;
    };
    let via = d.via.as_deref().map_or(0, str::len);
    assert!(d.detail.len() + d.url.len() + d.hops.len() + via <= 3 * data.len());
    // detail and URL are read lossily, so the re-encoding is only compared decoded
    assert_eq!(DropRecord::decode(&d.encode()), Ok(d));
}

fuzz_target!(|data: &[u8]| {
    segment(data);
    intake(data);
    bucket(data);
    host(data);
    queue(data);
    drop_record(data);
});
