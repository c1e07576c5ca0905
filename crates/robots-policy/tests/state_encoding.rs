//! The persistent encoding of the robots state: round trips, a hand-written v1 record,
//! extensibility (unknown fields skipped) and robustness (errors, never panics).

use std::time::Duration;

use proptest::prelude::*;
use robots_policy::state::{
    decode, encode, AllowAllCause, CopyContent, DecodeError, Directive, FetchSummary, Jitter,
    LastFetch, NetworkErrorKind, OriginRobots, RobotsCopy, RobotsFetchResult, RobotsState,
    RobotsStateKind, RulesSource, StateConfig, UnixMillis, FORMAT_VERSION,
};

const BODY: &[u8] = b"User-agent: *\nDisallow: /x\n";

fn copy(content: CopyContent, at: u64) -> RobotsCopy {
    RobotsCopy {
        content,
        fetched_at: UnixMillis(at),
    }
}

fn contents() -> Vec<CopyContent> {
    vec![
        CopyContent::Body(BODY.to_vec()),
        CopyContent::Body(Vec::new()),
        CopyContent::Body((0..=255u8).cycle().take(70_000).collect()),
        CopyContent::AllowAll(AllowAllCause::ClientError { status: 404 }),
        CopyContent::AllowAll(AllowAllCause::ClientError { status: 403 }),
        CopyContent::AllowAll(AllowAllCause::RedirectLimitExceeded),
    ]
}

fn last_fetches() -> Vec<Option<LastFetch>> {
    let mut v = vec![
        None,
        Some(FetchSummary::Status(200)),
        Some(FetchSummary::Status(503)),
        Some(FetchSummary::RedirectLimitExceeded),
    ];
    for kind in [
        NetworkErrorKind::Dns,
        NetworkErrorKind::Connect,
        NetworkErrorKind::Tls,
        NetworkErrorKind::Timeout,
        NetworkErrorKind::Reset,
        NetworkErrorKind::InvalidResponse,
        NetworkErrorKind::BrokenChunking,
        NetworkErrorKind::Other,
    ] {
        v.push(Some(FetchSummary::Network(kind)));
    }
    v.into_iter()
        .map(|o| {
            o.map(|outcome| LastFetch {
                at: UnixMillis(1_700_000_000_123),
                outcome,
            })
        })
        .collect()
}

/// At least one value of every state kind, with every copy variant and every last outcome.
fn samples() -> Vec<OriginRobots> {
    let mut states = vec![RobotsState::Unknown];
    for c in contents() {
        states.push(RobotsState::Fresh {
            copy: copy(c.clone(), 10),
            expires_at: UnixMillis(20),
        });
        states.push(RobotsState::Stale {
            copy: copy(c.clone(), 11),
            expires_at: UnixMillis(u64::MAX),
        });
    }
    let mut last_goods: Vec<Option<RobotsCopy>> = vec![None];
    last_goods.extend(contents().into_iter().map(|c| Some(copy(c, 5))));
    for last_good in last_goods {
        states.push(RobotsState::ServerErrorDisallow {
            since: UnixMillis(1_000),
            last_good: last_good.clone(),
            attempt: 1,
            next_retry_at: UnixMillis(61_000),
        });
        states.push(RobotsState::Fallback {
            since: UnixMillis(0),
            last_good,
            attempt: u32::MAX,
            next_retry_at: UnixMillis(u64::MAX),
        });
    }
    let mut out = Vec::new();
    for (i, state) in states.into_iter().enumerate() {
        let lf = last_fetches();
        out.push(OriginRobots {
            state,
            last_fetch: lf[i % lf.len()],
        });
    }
    out
}

#[test]
fn every_state_kind_round_trips() {
    let samples = samples();
    for kind in RobotsStateKind::ALL {
        assert!(
            samples.iter().any(|o| o.kind() == kind),
            "no sample of {kind}"
        );
    }
    for o in samples {
        let bytes = encode(&o);
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(decode(&bytes), Ok(o.clone()), "{:?}", o.state.kind());
        // Deterministic.
        assert_eq!(encode(&decode(&bytes).unwrap()), bytes);
    }
}

#[test]
fn every_last_outcome_round_trips() {
    for lf in last_fetches() {
        let o = OriginRobots {
            state: RobotsState::Unknown,
            last_fetch: lf,
        };
        assert_eq!(decode(&encode(&o)), Ok(o));
    }
}

#[test]
fn a_state_produced_by_the_machine_round_trips_with_its_verdict() {
    let cfg = StateConfig::default();
    let mut o = OriginRobots::new();
    let t = |h: u64| UnixMillis(1_700_000_000_000 + h * 3_600_000);
    o.apply(
        &cfg,
        RobotsFetchResult::Success {
            status: 200,
            body: BODY.to_vec(),
            max_age: Some(Duration::from_secs(7200)),
        },
        t(0),
        Jitter::NONE,
    );
    o.apply(
        &cfg,
        RobotsFetchResult::Network {
            kind: NetworkErrorKind::Reset,
        },
        t(3),
        Jitter(99),
    );
    let r = decode(&encode(&o)).unwrap();
    assert_eq!(r, o);
    assert!(r.verdict(&cfg, t(4)).is_hold());
    assert_eq!(
        r.verdict(&cfg, t(3 + 30 * 24)),
        Directive::ObeyRules {
            body: BODY,
            source: RulesSource::Fallback
        }
    );
}

/// A v1 record written out by hand: it must decode the same forever.
fn handwritten_fresh_v1() -> Vec<u8> {
    assert_eq!(BODY.len(), 27);
    let mut b = vec![
        1, // format version
        1, 1, 1, // state kind = fresh
        2, 1, 1, // copy kind = body
        3, 27, // copy body, 27 bytes
    ];
    b.extend_from_slice(BODY);
    b.extend_from_slice(&[
        5, 8, 0, 0, 0, 0, 0, 0, 0x03, 0xe8, // copy fetched at = 1000
        6, 8, 0, 0, 0, 0, 0x05, 0x26, 0x5f, 0xe8, // expires at = 86_401_000
        10, 8, 0, 0, 0, 0, 0, 0, 0x03, 0xe8, // last fetch at = 1000
        11, 3, 1, 0, 200, // last outcome = status 200
    ]);
    b
}

#[test]
fn a_handwritten_v1_fresh_record_decodes() {
    let o = decode(&handwritten_fresh_v1()).unwrap();
    assert_eq!(
        o,
        OriginRobots {
            state: RobotsState::Fresh {
                copy: copy(CopyContent::Body(BODY.to_vec()), 1000),
                expires_at: UnixMillis(86_401_000),
            },
            last_fetch: Some(LastFetch {
                at: UnixMillis(1000),
                outcome: FetchSummary::Status(200)
            }),
        }
    );
    // And this build writes exactly those bytes for it.
    assert_eq!(encode(&o), handwritten_fresh_v1());
}

#[test]
fn a_handwritten_v1_5xx_disallow_record_decodes() {
    let bytes = [
        1, // version
        1, 1, 3, // state kind = 5xx-disallow
        2, 1, 2, // copy kind = allow-all after a 4xx
        4, 2, 0x01, 0x94, // copy status = 404
        5, 8, 0, 0, 0, 0, 0, 0, 0, 7, // copy fetched at = 7
        7, 8, 0, 0, 0, 0, 0, 0, 0x27, 0x10, // since = 10_000
        8, 4, 0, 0, 0, 5, // attempt = 5
        9, 8, 0, 0, 0, 0, 0, 0, 0x4e, 0x20, // next retry at = 20_000
        10, 8, 0, 0, 0, 0, 0, 0, 0x27, 0x10, // last fetch at = 10_000
        11, 2, 3, 4, // last outcome = network timeout
    ];
    let o = decode(&bytes).unwrap();
    assert_eq!(
        o,
        OriginRobots {
            state: RobotsState::ServerErrorDisallow {
                since: UnixMillis(10_000),
                last_good: Some(copy(
                    CopyContent::AllowAll(AllowAllCause::ClientError { status: 404 }),
                    7
                )),
                attempt: 5,
                next_retry_at: UnixMillis(20_000),
            },
            last_fetch: Some(LastFetch {
                at: UnixMillis(10_000),
                outcome: FetchSummary::Network(NetworkErrorKind::Timeout)
            }),
        }
    );
}

#[test]
fn a_minimal_unknown_record_decodes() {
    assert_eq!(decode(&[1, 1, 1, 0]), Ok(OriginRobots::new()));
    assert_eq!(encode(&OriginRobots::new()), vec![1, 1, 1, 0]);
}

#[test]
fn fields_may_come_in_any_order() {
    // since, attempt, next retry, then the kind last; no copy (never had one).
    let bytes = [
        1, 9, 8, 0, 0, 0, 0, 0, 0, 0, 9, 8, 4, 0, 0, 0, 1, 7, 8, 0, 0, 0, 0, 0, 0, 0, 3, 1, 1, 4,
    ];
    assert_eq!(
        decode(&bytes).unwrap().state,
        RobotsState::Fallback {
            since: UnixMillis(3),
            last_good: None,
            attempt: 1,
            next_retry_at: UnixMillis(9),
        }
    );
}

#[test]
fn unknown_fields_from_a_later_build_are_skipped() {
    let base = handwritten_fresh_v1();
    let expected = decode(&base).unwrap();
    // A later build adds tag 12 (empty), tag 200 (3 bytes) and tag 77 with a 300-byte value
    // (a two-byte varint length), before, between and after the known fields.
    let mut big = vec![77, 0xac, 0x02]; // 300 = 0b10_0101100
    big.extend_from_slice(&[0xee; 300]);
    let mut with_extras = vec![1, 12, 0];
    with_extras.extend_from_slice(&base[1..4]);
    with_extras.extend_from_slice(&[200, 3, 9, 9, 9]);
    with_extras.extend_from_slice(&big);
    with_extras.extend_from_slice(&base[4..]);
    with_extras.extend_from_slice(&[255, 1, 0]);
    assert_eq!(decode(&with_extras), Ok(expected));
}

#[test]
fn an_unknown_network_kind_from_a_later_build_decodes_as_other() {
    let bytes = [1, 1, 1, 0, 10, 8, 0, 0, 0, 0, 0, 0, 0, 1, 11, 2, 3, 250];
    assert_eq!(
        decode(&bytes).unwrap().last_fetch.unwrap().outcome,
        FetchSummary::Network(NetworkErrorKind::Other)
    );
}

#[test]
fn every_truncation_is_an_error_except_at_an_optional_field_boundary() {
    let full = handwritten_fresh_v1();
    // Cutting off both last-fetch fields (15 bytes) leaves a complete record without them.
    let complete_without_last_fetch = full.len() - 15;
    for len in 0..full.len() {
        let r = decode(&full[..len]);
        if len == complete_without_last_fetch {
            assert_eq!(r.unwrap().last_fetch, None);
        } else {
            assert!(r.is_err(), "prefix of {len} bytes decoded: {r:?}");
        }
    }
    // Cut inside the body: reported as truncated.
    assert!(matches!(
        decode(&full[..20]),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn malformed_records_give_the_right_errors() {
    use DecodeError::*;
    let cases: Vec<(&[u8], DecodeError)> = vec![
        (&[], Empty),
        (&[0, 1, 1, 0], UnsupportedVersion(0)),
        (&[2, 1, 1, 0], UnsupportedVersion(2)),
        (&[1], MissingField("state kind")),
        (&[1, 1, 0x80], Truncated { at: 3 }),
        (&[1, 1, 5, 0], Truncated { at: 3 }),
        (
            &[
                1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ],
            BadLength { at: 2 },
        ),
        (
            &[1, 1, 1, 9],
            InvalidValue {
                field: "state kind",
                value: 9,
            },
        ),
        (
            &[1, 1, 2, 0, 0],
            FieldLength {
                tag: 1,
                len: 2,
                expected: "1",
            },
        ),
        (&[1, 1, 1, 0, 1, 1, 0], DuplicateField { tag: 1 }),
        (&[1, 1, 1, 1, 2, 1, 3], MissingField("copy fetched at")),
        (&[1, 1, 1, 1], MissingField("copy kind")),
        (&[1, 1, 1, 1, 2, 1, 1], MissingField("copy body")),
        (&[1, 1, 1, 1, 2, 1, 2], MissingField("copy status")),
        (
            &[1, 1, 1, 1, 2, 1, 9],
            InvalidValue {
                field: "copy kind",
                value: 9,
            },
        ),
        (
            &[1, 1, 1, 2, 2, 1, 3, 5, 8, 0, 0, 0, 0, 0, 0, 0, 0],
            MissingField("expires at"),
        ),
        (&[1, 1, 1, 3], MissingField("since")),
        (
            &[1, 1, 1, 4, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0],
            MissingField("attempt"),
        ),
        (
            &[1, 1, 1, 0, 10, 8, 0, 0, 0, 0, 0, 0, 0, 0],
            MissingField("last outcome"),
        ),
        (&[1, 1, 1, 0, 11, 1, 2], MissingField("last fetch at")),
    ];
    for (bytes, expected) in cases {
        assert_eq!(decode(bytes), Err(expected.clone()), "{bytes:?}");
        // Every error has a message.
        assert!(!expected.to_string().is_empty());
    }
}

fn arb_instant() -> impl Strategy<Value = UnixMillis> {
    prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()].prop_map(UnixMillis)
}

fn arb_copy() -> impl Strategy<Value = RobotsCopy> {
    let content = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(CopyContent::Body),
        any::<u16>()
            .prop_map(|status| CopyContent::AllowAll(AllowAllCause::ClientError { status })),
        Just(CopyContent::AllowAll(AllowAllCause::RedirectLimitExceeded)),
        Just(CopyContent::AllowAll(AllowAllCause::AddressRefused)),
    ];
    (content, arb_instant()).prop_map(|(content, fetched_at)| RobotsCopy {
        content,
        fetched_at,
    })
}

fn arb_origin() -> impl Strategy<Value = OriginRobots> {
    let state = prop_oneof![
        Just(RobotsState::Unknown),
        (arb_copy(), arb_instant())
            .prop_map(|(copy, expires_at)| RobotsState::Fresh { copy, expires_at }),
        (arb_copy(), arb_instant())
            .prop_map(|(copy, expires_at)| RobotsState::Stale { copy, expires_at }),
        (
            arb_instant(),
            proptest::option::of(arb_copy()),
            any::<u32>(),
            arb_instant()
        )
            .prop_map(|(since, last_good, attempt, next_retry_at)| {
                RobotsState::ServerErrorDisallow {
                    since,
                    last_good,
                    attempt,
                    next_retry_at,
                }
            }),
        (
            arb_instant(),
            proptest::option::of(arb_copy()),
            any::<u32>(),
            arb_instant()
        )
            .prop_map(|(since, last_good, attempt, next_retry_at)| {
                RobotsState::Fallback {
                    since,
                    last_good,
                    attempt,
                    next_retry_at,
                }
            }),
    ];
    let outcome = prop_oneof![
        any::<u16>().prop_map(FetchSummary::Status),
        Just(FetchSummary::RedirectLimitExceeded),
        Just(FetchSummary::AddressRefused),
        Just(FetchSummary::Network(NetworkErrorKind::BrokenChunking)),
    ];
    let last = proptest::option::of(
        (arb_instant(), outcome).prop_map(|(at, outcome)| LastFetch { at, outcome }),
    );
    (state, last).prop_map(|(state, last_fetch)| OriginRobots { state, last_fetch })
}

/// Random field lists that look like records: valid framing, random tags and values.
fn arb_framed() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (0u8..16, proptest::collection::vec(any::<u8>(), 0..10)),
        0..12,
    )
    .prop_map(|fields| {
        let mut b = vec![1u8];
        for (tag, value) in fields {
            b.push(tag);
            b.push(value.len() as u8);
            b.extend(value);
        }
        b
    })
}

proptest! {
    #[test]
    fn random_states_round_trip(o in arb_origin()) {
        prop_assert_eq!(decode(&encode(&o)), Ok(o));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(o) = decode(&bytes) {
            prop_assert_eq!(decode(&encode(&o)), Ok(o));
        }
    }

    #[test]
    fn random_framed_records_never_panic(bytes in arb_framed()) {
        if let Ok(o) = decode(&bytes) {
            prop_assert_eq!(decode(&encode(&o)), Ok(o));
        }
    }

    #[test]
    fn corrupting_a_valid_record_never_panics(
        o in arb_origin(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        cut in any::<usize>(),
    ) {
        let mut bytes = encode(&o);
        for (i, b) in flips {
            let n = bytes.len();
            bytes[i % n] = b;
        }
        let cut = cut % (bytes.len() + 1);
        let _ = decode(&bytes[..cut]);
        let _ = decode(&bytes);
    }
}
