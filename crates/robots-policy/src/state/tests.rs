//! Unit tests of the state machine, with an injected clock (plain `UnixMillis` values).

use super::*;

const MIN: u64 = 60_000;
const HOUR_MS: u64 = 60 * MIN;
const DAY_MS: u64 = 24 * HOUR_MS;
/// An arbitrary start instant (2024-01-01T00:00:00Z), so nothing relies on t = 0.
const T0: u64 = 1_704_067_200_000;

fn at(offset_ms: u64) -> UnixMillis {
    UnixMillis(T0 + offset_ms)
}

fn cfg() -> StateConfig {
    StateConfig::default()
}

const BODY: &[u8] = b"User-agent: *\nDisallow: /private\n";
const BODY2: &[u8] = b"User-agent: *\nDisallow: /\n";

fn ok(body: &[u8]) -> RobotsFetchResult {
    RobotsFetchResult::Success {
        status: 200,
        body: body.to_vec(),
        max_age: None,
    }
}

fn ok_max_age(body: &[u8], max_age: Duration) -> RobotsFetchResult {
    RobotsFetchResult::Success {
        status: 200,
        body: body.to_vec(),
        max_age: Some(max_age),
    }
}

fn s503() -> RobotsFetchResult {
    RobotsFetchResult::ServerError {
        status: 503,
        retry_after: None,
    }
}

fn s404() -> RobotsFetchResult {
    RobotsFetchResult::ClientError { status: 404 }
}

/// An origin that got `outcome` at `now` from the unknown state.
fn after(outcome: RobotsFetchResult, now: UnixMillis) -> OriginRobots {
    let mut o = OriginRobots::new();
    o.apply(&cfg(), outcome, now, Jitter::NONE);
    o
}

fn obey(body: &[u8], source: RulesSource) -> Directive<'_> {
    Directive::ObeyRules { body, source }
}

fn failures() -> Vec<RobotsFetchResult> {
    let mut v = vec![
        RobotsFetchResult::ServerError {
            status: 500,
            retry_after: None,
        },
        s503(),
        RobotsFetchResult::ServerError {
            status: 599,
            retry_after: None,
        },
        RobotsFetchResult::TooManyRequests { retry_after: None },
        RobotsFetchResult::ClientError { status: 429 },
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
        v.push(RobotsFetchResult::Network { kind });
    }
    v
}

// ---------------------------------------------------------------- names and defaults

#[test]
fn kind_names_are_stable() {
    let names: Vec<&str> = RobotsStateKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        names,
        ["unknown", "fresh", "stale", "5xx-disallow", "fallback"]
    );
    assert_eq!(
        RobotsStateKind::ServerErrorDisallow.to_string(),
        "5xx-disallow"
    );
}

#[test]
fn documented_defaults() {
    let c = StateConfig::default();
    assert_eq!(c.freshness_default, Duration::from_secs(24 * 3600));
    assert_eq!(c.freshness_min, Duration::from_secs(3600));
    assert_eq!(c.freshness_max, Duration::from_secs(24 * 3600));
    assert_eq!(c.retry_initial, Duration::from_secs(60));
    assert_eq!(c.retry_max, Duration::from_secs(3600));
    assert_eq!(c.retry_jitter_percent, 20);
    assert_eq!(c.fallback_after, Duration::from_secs(30 * 24 * 3600));
    assert_eq!(c.fallback_retry_interval, Duration::from_secs(24 * 3600));
}

// ---------------------------------------------------------------- unknown

#[test]
fn unknown_holds_and_fetches_now() {
    let o = OriginRobots::new();
    let now = at(5 * DAY_MS);
    assert_eq!(o.kind(), RobotsStateKind::Unknown);
    assert_eq!(o.kind_at(&cfg(), now), RobotsStateKind::Unknown);
    assert_eq!(
        o.verdict(&cfg(), now),
        Directive::Hold(HoldReason::NeverFetched)
    );
    assert!(o.needs_fetch(now));
    assert_eq!(o.next_fetch_at(now), now);
    assert_eq!(o.last_fetch, None);
}

// ---------------------------------------------------------------- fresh

#[test]
fn success_makes_fresh_with_the_body_for_24h() {
    let now = at(0);
    let mut o = OriginRobots::new();
    let tr = o.apply(&cfg(), ok(BODY), now, Jitter(u64::MAX));
    assert_eq!(tr.from, RobotsStateKind::Unknown);
    assert_eq!(tr.to, RobotsStateKind::Fresh);
    assert_eq!(tr.at, now);
    assert!(tr.reason.contains("200"), "{}", tr.reason);
    assert_eq!(o.verdict(&cfg(), now), obey(BODY, RulesSource::Fresh));
    assert_eq!(o.next_fetch_at(now), at(DAY_MS));
    assert!(!o.needs_fetch(at(DAY_MS - 1)));
    assert_eq!(
        o.last_fetch,
        Some(LastFetch {
            at: now,
            outcome: FetchSummary::Status(200)
        })
    );
}

#[test]
fn client_errors_make_fresh_allow_all() {
    for status in [400, 401, 403, 404, 410, 451, 499] {
        let now = at(HOUR_MS);
        let mut o = OriginRobots::new();
        let tr = o.apply(
            &cfg(),
            RobotsFetchResult::ClientError { status },
            now,
            Jitter::NONE,
        );
        assert_eq!(tr.to, RobotsStateKind::Fresh, "status {status}");
        assert_eq!(
            o.verdict(&cfg(), now),
            Directive::AllowAll {
                source: RulesSource::Fresh,
                cause: Some(AllowAllCause::ClientError { status })
            }
        );
        assert_eq!(o.next_fetch_at(now), at(HOUR_MS + DAY_MS));
    }
}

#[test]
fn redirect_overflow_is_like_a_404() {
    let now = at(0);
    let o = after(RobotsFetchResult::RedirectLimitExceeded, now);
    assert_eq!(o.kind(), RobotsStateKind::Fresh);
    assert_eq!(
        o.verdict(&cfg(), now),
        Directive::AllowAll {
            source: RulesSource::Fresh,
            cause: Some(AllowAllCause::RedirectLimitExceeded)
        }
    );
    assert_eq!(o.next_fetch_at(now), at(DAY_MS));
    assert_eq!(
        o.last_fetch.unwrap().outcome,
        FetchSummary::RedirectLimitExceeded
    );
}

#[test]
fn address_refused_allows_all_for_ten_minutes_then_asks_again() {
    let now = at(0);
    let o = after(RobotsFetchResult::AddressRefused, now);
    assert_eq!(o.kind(), RobotsStateKind::Fresh);
    assert_eq!(
        o.verdict(&cfg(), now),
        Directive::AllowAll {
            source: RulesSource::Fresh,
            cause: Some(AllowAllCause::AddressRefused)
        }
    );
    // a name that now points at an allowed address has its real robots.txt read soon
    assert_eq!(o.next_fetch_at(now), at(10 * 60 * 1000));
    assert_eq!(o.last_fetch.unwrap().outcome, FetchSummary::AddressRefused);
}

#[test]
fn max_age_within_bounds_is_used() {
    let o = after(ok_max_age(BODY, Duration::from_secs(6 * 3600)), at(0));
    assert_eq!(o.next_fetch_at(at(0)), at(6 * HOUR_MS));
}

#[test]
fn max_age_shorter_than_the_minimum_gives_the_minimum() {
    for short in [
        Duration::ZERO,
        Duration::from_secs(1),
        Duration::from_secs(59 * 60),
    ] {
        let o = after(ok_max_age(BODY, short), at(0));
        assert_eq!(o.next_fetch_at(at(0)), at(HOUR_MS), "max-age {short:?}");
        assert_eq!(
            o.verdict(&cfg(), at(HOUR_MS - 1)),
            obey(BODY, RulesSource::Fresh)
        );
        assert!(o.verdict(&cfg(), at(HOUR_MS)).is_hold());
    }
}

#[test]
fn max_age_longer_than_the_maximum_gives_the_maximum() {
    for long in [
        Duration::from_secs(24 * 3600 + 1),
        Duration::from_secs(365 * 24 * 3600),
        Duration::MAX,
    ] {
        let o = after(ok_max_age(BODY, long), at(0));
        assert_eq!(o.next_fetch_at(at(0)), at(DAY_MS), "max-age {long:?}");
    }
}

#[test]
fn custom_freshness_bounds_apply() {
    let c = StateConfig {
        freshness_default: Duration::from_secs(7200),
        freshness_min: Duration::from_secs(1800),
        freshness_max: Duration::from_secs(3 * 3600),
        ..StateConfig::default()
    };
    assert_eq!(c.freshness_for(None), Duration::from_secs(7200));
    assert_eq!(
        c.freshness_for(Some(Duration::from_secs(60))),
        Duration::from_secs(1800)
    );
    assert_eq!(
        c.freshness_for(Some(Duration::from_secs(99_999))),
        Duration::from_secs(10_800)
    );
    let mut o = OriginRobots::new();
    o.apply(&c, ok(BODY), at(0), Jitter::NONE);
    assert_eq!(o.next_fetch_at(at(0)), at(2 * HOUR_MS));
    // 4xx uses the default lifetime too.
    o.apply(&c, s404(), at(0), Jitter::NONE);
    assert_eq!(o.next_fetch_at(at(0)), at(2 * HOUR_MS));
}

#[test]
fn inverted_freshness_bounds_do_not_panic() {
    let c = StateConfig {
        freshness_min: Duration::from_secs(10 * 3600),
        freshness_max: Duration::from_secs(3600),
        ..StateConfig::default()
    };
    assert_eq!(
        c.freshness_for(Some(Duration::from_secs(5))),
        Duration::from_secs(3600)
    );
}

// ---------------------------------------------------------------- fresh -> stale

#[test]
fn fresh_expiring_becomes_stale_holds_and_fetches_now() {
    let c = cfg();
    let mut o = after(ok(BODY), at(0));
    let expiry = at(DAY_MS);
    // One millisecond before: still fresh.
    assert_eq!(o.kind_at(&c, at(DAY_MS - 1)), RobotsStateKind::Fresh);
    assert_eq!(
        o.verdict(&c, at(DAY_MS - 1)),
        obey(BODY, RulesSource::Fresh)
    );
    assert!(!o.needs_fetch(at(DAY_MS - 1)));
    // At expires_at, lazily (no tick yet): stale, hold, fetch now.
    assert_eq!(o.kind(), RobotsStateKind::Fresh);
    assert_eq!(o.kind_at(&c, expiry), RobotsStateKind::Stale);
    assert_eq!(
        o.verdict(&c, expiry),
        Directive::Hold(HoldReason::RefreshPending)
    );
    assert!(o.needs_fetch(expiry));
    assert!(o.next_fetch_at(expiry) <= expiry);
    // A tick stores it, and the answers do not change.
    let later = at(DAY_MS + 5 * MIN);
    let tr = o.on_tick(&c, later).expect("fresh -> stale");
    assert_eq!(
        (tr.from, tr.to),
        (RobotsStateKind::Fresh, RobotsStateKind::Stale)
    );
    assert_eq!(o.kind(), RobotsStateKind::Stale);
    assert_eq!(
        o.verdict(&c, later),
        Directive::Hold(HoldReason::RefreshPending)
    );
    assert!(o.needs_fetch(later));
    // A second tick is a no-op.
    assert_eq!(o.on_tick(&c, later), None);
}

#[test]
fn tick_before_expiry_changes_nothing() {
    let mut o = after(ok(BODY), at(0));
    let before = o.clone();
    assert_eq!(o.on_tick(&cfg(), at(DAY_MS - 1)), None);
    assert_eq!(o, before);
}

#[test]
fn stale_refreshed_by_success_is_fresh_with_the_new_body() {
    let c = cfg();
    let mut o = after(ok(BODY), at(0));
    o.on_tick(&c, at(DAY_MS));
    let now = at(DAY_MS + 2 * MIN);
    let tr = o.apply(&c, ok(BODY2), now, Jitter::NONE);
    assert_eq!(
        (tr.from, tr.to),
        (RobotsStateKind::Stale, RobotsStateKind::Fresh)
    );
    assert_eq!(o.verdict(&c, now), obey(BODY2, RulesSource::Fresh));
    assert_eq!(o.next_fetch_at(now), at(2 * DAY_MS + 2 * MIN));
}

#[test]
fn lazily_stale_reports_stale_as_from() {
    let mut o = after(ok(BODY), at(0));
    let tr = o.apply(&cfg(), ok(BODY), at(DAY_MS + 1), Jitter::NONE);
    assert_eq!(tr.from, RobotsStateKind::Stale);
}

#[test]
fn stale_refreshed_by_404_allows_all() {
    let c = cfg();
    let mut o = after(ok(BODY), at(0));
    o.apply(&c, s404(), at(DAY_MS), Jitter::NONE);
    assert_eq!(
        o.verdict(&c, at(DAY_MS)),
        Directive::AllowAll {
            source: RulesSource::Fresh,
            cause: Some(AllowAllCause::ClientError { status: 404 })
        }
    );
}

// ---------------------------------------------------------------- into 5xx-disallow

#[test]
fn every_failure_class_from_unknown_enters_5xx_disallow_without_a_copy() {
    let c = cfg();
    for outcome in failures() {
        let now = at(3 * HOUR_MS);
        let mut o = OriginRobots::new();
        let tr = o.apply(&c, outcome.clone(), now, Jitter::NONE);
        assert_eq!(
            (tr.from, tr.to),
            (
                RobotsStateKind::Unknown,
                RobotsStateKind::ServerErrorDisallow
            ),
            "{outcome:?}"
        );
        assert_eq!(
            o.state,
            RobotsState::ServerErrorDisallow {
                since: now,
                last_good: None,
                attempt: 1,
                next_retry_at: at(3 * HOUR_MS + MIN),
            },
            "{outcome:?}"
        );
        assert_eq!(
            o.verdict(&c, now),
            Directive::Hold(HoldReason::ServerErrorDisallow { since: now })
        );
        assert_eq!(o.last_fetch.unwrap().outcome, outcome.summary());
    }
}

#[test]
fn failure_summaries() {
    assert_eq!(s503().summary(), FetchSummary::Status(503));
    assert_eq!(
        RobotsFetchResult::TooManyRequests { retry_after: None }.summary(),
        FetchSummary::Status(429)
    );
    assert_eq!(
        RobotsFetchResult::Network {
            kind: NetworkErrorKind::Tls
        }
        .summary(),
        FetchSummary::Network(NetworkErrorKind::Tls)
    );
}

#[test]
fn failure_from_fresh_keeps_the_rules_as_last_good_copy() {
    let c = cfg();
    for outcome in failures() {
        let mut o = after(ok(BODY), at(0));
        let now = at(2 * HOUR_MS); // still fresh: e.g. a forced refresh
        let tr = o.apply(&c, outcome.clone(), now, Jitter::NONE);
        assert_eq!(
            (tr.from, tr.to),
            (RobotsStateKind::Fresh, RobotsStateKind::ServerErrorDisallow)
        );
        match &o.state {
            RobotsState::ServerErrorDisallow {
                since, last_good, ..
            } => {
                assert_eq!(*since, now);
                assert_eq!(
                    last_good.as_ref(),
                    Some(&RobotsCopy {
                        content: CopyContent::Body(BODY.to_vec()),
                        fetched_at: at(0)
                    })
                );
            }
            other => panic!("{outcome:?} gave {other:?}"),
        }
        // Held, not obeyed, before the fallback window.
        assert!(o.verdict(&c, now).is_hold());
    }
}

#[test]
fn failure_from_stale_keeps_the_expired_rules_as_last_good_copy() {
    let c = cfg();
    let mut o = after(ok(BODY), at(0));
    o.on_tick(&c, at(DAY_MS));
    let tr = o.apply(&c, s503(), at(DAY_MS + 1), Jitter::NONE);
    assert_eq!(
        (tr.from, tr.to),
        (RobotsStateKind::Stale, RobotsStateKind::ServerErrorDisallow)
    );
    assert!(matches!(
        &o.state,
        RobotsState::ServerErrorDisallow { last_good: Some(RobotsCopy { content: CopyContent::Body(b), .. }), since, .. }
            if b == BODY && *since == at(DAY_MS + 1)
    ));
}

#[test]
fn failure_after_a_404_keeps_allow_all_as_last_good_copy() {
    let c = cfg();
    let mut o = after(s404(), at(0));
    o.apply(&c, s503(), at(DAY_MS), Jitter::NONE);
    match &o.state {
        RobotsState::ServerErrorDisallow { last_good, .. } => assert_eq!(
            last_good.as_ref().map(|c| &c.content),
            Some(&CopyContent::AllowAll(AllowAllCause::ClientError {
                status: 404
            }))
        ),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------- back-off

fn next_retry(o: &OriginRobots) -> UnixMillis {
    match &o.state {
        RobotsState::ServerErrorDisallow { next_retry_at, .. }
        | RobotsState::Fallback { next_retry_at, .. } => *next_retry_at,
        other => panic!("no retry in {other:?}"),
    }
}

fn attempt(o: &OriginRobots) -> u32 {
    o.status(&cfg(), UnixMillis(0)).attempt
}

#[test]
fn backoff_doubles_to_the_cap_and_keeps_since() {
    let c = cfg();
    let mut o = OriginRobots::new();
    let first = at(0);
    let mut now = first;
    let expected_minutes = [1, 2, 4, 8, 16, 32, 60, 60, 60];
    for (i, minutes) in expected_minutes.iter().enumerate() {
        o.apply(&c, s503(), now, Jitter::NONE);
        let next = next_retry(&o);
        assert_eq!(
            next.saturating_duration_since(now),
            Duration::from_secs(minutes * 60),
            "attempt {}",
            i + 1
        );
        assert_eq!(attempt(&o), i as u32 + 1);
        assert_eq!(o.status(&c, now).since, Some(first));
        assert!(!o.needs_fetch(UnixMillis(next.0 - 1)));
        assert!(o.needs_fetch(next));
        assert_eq!(o.next_fetch_at(now), next);
        now = next;
    }
}

#[test]
fn backoff_jitter_stays_within_bounds() {
    let c = cfg();
    for attempt in 1..=12u32 {
        let nominal = c.nominal_retry_delay(attempt, None);
        assert_eq!(c.retry_delay(attempt, None, Jitter(0)), nominal);
        let top = c.retry_delay(attempt, None, Jitter(u64::MAX));
        let upper = nominal.mul_f64(1.2);
        assert!(top >= nominal && top < upper, "attempt {attempt}: {top:?}");
        // The top of the range is really used (more than 19% added).
        assert!(top > nominal.mul_f64(1.19), "attempt {attempt}: {top:?}");
        let mid = c.retry_delay(attempt, None, Jitter(u64::MAX / 2));
        let diff = mid.as_millis().abs_diff(nominal.mul_f64(1.1).as_millis());
        assert!(diff <= 1, "attempt {attempt}: {mid:?}");
    }
    // Applied through the machine too.
    let mut o = OriginRobots::new();
    o.apply(&c, s503(), at(0), Jitter(u64::MAX));
    let d = next_retry(&o).saturating_duration_since(at(0));
    assert!(
        d > Duration::from_secs(60) && d < Duration::from_secs(72),
        "{d:?}"
    );
}

#[test]
fn jitter_percent_is_configurable() {
    let none = StateConfig {
        retry_jitter_percent: 0,
        ..cfg()
    };
    assert_eq!(
        none.retry_delay(3, None, Jitter(u64::MAX)),
        Duration::from_secs(4 * 60)
    );
    let double = StateConfig {
        retry_jitter_percent: 100,
        ..cfg()
    };
    let d = double.retry_delay(1, None, Jitter(u64::MAX));
    assert!(
        d > Duration::from_millis(119_000) && d < Duration::from_secs(120),
        "{d:?}"
    );
}

#[test]
fn huge_attempt_counts_do_not_overflow() {
    let c = cfg();
    assert_eq!(
        c.nominal_retry_delay(u32::MAX, None),
        Duration::from_secs(3600)
    );
    assert_eq!(c.nominal_retry_delay(0, None), Duration::from_secs(60));
    let big = StateConfig {
        retry_initial: Duration::MAX,
        retry_max: Duration::MAX,
        retry_jitter_percent: u32::MAX,
        ..cfg()
    };
    let _ = big.retry_delay(u32::MAX, None, Jitter(u64::MAX));
}

#[test]
fn retry_after_is_honoured_within_bounds() {
    let c = cfg();
    let cases = [
        (Duration::ZERO, 60),
        (Duration::from_secs(10), 60),
        (Duration::from_secs(300), 300),
        (Duration::from_secs(3600), 3600),
        (Duration::from_secs(2 * 3600), 3600),
        (Duration::from_secs(86_400 * 400), 3600),
    ];
    for (ra, expected_secs) in cases {
        for outcome in [
            RobotsFetchResult::ServerError {
                status: 503,
                retry_after: Some(ra),
            },
            RobotsFetchResult::TooManyRequests {
                retry_after: Some(ra),
            },
        ] {
            let mut o = OriginRobots::new();
            let tr = o.apply(&c, outcome.clone(), at(0), Jitter::NONE);
            assert_eq!(
                next_retry(&o),
                at(expected_secs * 1000),
                "{outcome:?} -> {tr}"
            );
        }
    }
}

#[test]
fn retry_after_replaces_the_doubling_at_any_attempt() {
    let c = cfg();
    let mut o = OriginRobots::new();
    let mut now = at(0);
    for _ in 0..6 {
        o.apply(&c, s503(), now, Jitter::NONE);
        now = next_retry(&o);
    }
    // attempt 7 would be 60 min; the server asks for 2 min.
    o.apply(
        &c,
        RobotsFetchResult::ServerError {
            status: 503,
            retry_after: Some(Duration::from_secs(120)),
        },
        now,
        Jitter::NONE,
    );
    assert_eq!(next_retry(&o), UnixMillis(now.0 + 2 * MIN));
    assert_eq!(attempt(&o), 7);
}

#[test]
fn jitter_lengthens_retry_after_never_shortens_it() {
    let c = cfg();
    let ra = Some(Duration::from_secs(600));
    let d = c.retry_delay(1, ra, Jitter(u64::MAX));
    assert!(
        d >= Duration::from_secs(600) && d < Duration::from_secs(720),
        "{d:?}"
    );
}

// ---------------------------------------------------------------- 5xx-disallow -> fallback

/// An origin in an unbroken run of 503s from `since`, retried on schedule up to `until`.
fn failing_run(
    start: OriginRobots,
    since: UnixMillis,
    until: UnixMillis,
) -> (OriginRobots, UnixMillis) {
    let c = cfg();
    let mut o = start;
    let mut now = since;
    let mut last = since;
    while now < until {
        o.apply(&c, s503(), now, Jitter(12345));
        last = now;
        now = o.next_fetch_at(now);
    }
    (o, last)
}

#[test]
fn five_xx_disallow_holds_until_30_days_then_falls_back_to_the_last_good_copy() {
    let c = cfg();
    let since = at(DAY_MS);
    let (mut o, _) = failing_run(after(ok(BODY), at(0)), since, at(DAY_MS + 29 * DAY_MS));
    let deadline = at(31 * DAY_MS);
    assert_eq!(
        o.verdict(&c, UnixMillis(deadline.0 - 1)),
        Directive::Hold(HoldReason::ServerErrorDisallow { since })
    );
    assert_eq!(
        o.kind_at(&c, UnixMillis(deadline.0 - 1)),
        RobotsStateKind::ServerErrorDisallow
    );
    // At since + 30 days, lazily: fallback obeys the last good copy.
    assert_eq!(o.kind_at(&c, deadline), RobotsStateKind::Fallback);
    assert_eq!(o.verdict(&c, deadline), obey(BODY, RulesSource::Fallback));
    assert_eq!(o.status(&c, deadline).fallback_at, Some(deadline));
    // The tick stores it.
    let tr = o.on_tick(&c, deadline).expect("5xx-disallow -> fallback");
    assert_eq!(
        (tr.from, tr.to),
        (
            RobotsStateKind::ServerErrorDisallow,
            RobotsStateKind::Fallback
        )
    );
    assert_eq!(o.kind(), RobotsStateKind::Fallback);
    assert_eq!(o.verdict(&c, deadline), obey(BODY, RulesSource::Fallback));
}

#[test]
fn fallback_without_any_good_copy_allows_all() {
    let c = cfg();
    let since = at(0);
    let (mut o, _) = failing_run(OriginRobots::new(), since, at(30 * DAY_MS - HOUR_MS));
    assert!(o.verdict(&c, at(30 * DAY_MS - 1)).is_hold());
    let expected = Directive::AllowAll {
        source: RulesSource::Fallback,
        cause: None,
    };
    assert_eq!(o.verdict(&c, at(30 * DAY_MS)), expected);
    o.on_tick(&c, at(30 * DAY_MS + 7));
    assert_eq!(o.verdict(&c, at(30 * DAY_MS + 7)), expected);
}

#[test]
fn fallback_after_a_404_copy_allows_all_by_that_copy() {
    let c = cfg();
    let (o, _) = failing_run(after(s404(), at(0)), at(DAY_MS), at(31 * DAY_MS - HOUR_MS));
    assert_eq!(
        o.verdict(&c, at(31 * DAY_MS)),
        Directive::AllowAll {
            source: RulesSource::Fallback,
            cause: Some(AllowAllCause::ClientError { status: 404 })
        }
    );
}

#[test]
fn a_failure_past_the_window_lands_in_fallback_with_the_slow_cadence() {
    let c = cfg();
    let mut o = OriginRobots::new();
    o.apply(&c, s503(), at(0), Jitter::NONE);
    // No tick, no retries for 31 days (e.g. the daemon was down); then a failure.
    let now = at(31 * DAY_MS);
    let tr = o.apply(
        &c,
        RobotsFetchResult::ServerError {
            status: 503,
            retry_after: Some(Duration::from_secs(60)),
        },
        now,
        Jitter(u64::MAX),
    );
    assert_eq!(
        (tr.from, tr.to),
        (RobotsStateKind::Fallback, RobotsStateKind::Fallback)
    );
    // Retry-After and jitter do not speed up (or stretch) the slow cadence.
    assert_eq!(next_retry(&o), at(32 * DAY_MS));
    assert_eq!(o.status(&c, now).since, Some(at(0)));
    assert_eq!(attempt(&o), 2);
}

#[test]
fn fallback_plus_failure_stays_fallback_and_retries_daily() {
    let c = cfg();
    let (mut o, _) = failing_run(after(ok(BODY), at(0)), at(DAY_MS), at(30 * DAY_MS));
    o.on_tick(&c, at(31 * DAY_MS));
    let before = attempt(&o);
    for (i, outcome) in failures().into_iter().enumerate() {
        let now = at(31 * DAY_MS + i as u64 * DAY_MS);
        let tr = o.apply(&c, outcome.clone(), now, Jitter(777));
        assert_eq!(
            (tr.from, tr.to),
            (RobotsStateKind::Fallback, RobotsStateKind::Fallback),
            "{outcome:?}"
        );
        assert_eq!(o.next_fetch_at(now), UnixMillis(now.0 + DAY_MS));
        assert_eq!(o.verdict(&c, now), obey(BODY, RulesSource::Fallback));
        assert_eq!(o.status(&c, now).since, Some(at(DAY_MS)));
        assert_eq!(attempt(&o), before + i as u32 + 1);
    }
}

#[test]
fn fallback_retry_interval_is_configurable() {
    let c = StateConfig {
        fallback_retry_interval: Duration::from_secs(6 * 3600),
        ..cfg()
    };
    let mut o = OriginRobots::new();
    o.apply(&c, s503(), at(0), Jitter::NONE);
    o.apply(&c, s503(), at(40 * DAY_MS), Jitter::NONE);
    assert_eq!(o.kind(), RobotsStateKind::Fallback);
    assert_eq!(next_retry(&o), at(40 * DAY_MS + 6 * HOUR_MS));
}

#[test]
fn success_ends_fallback() {
    let c = cfg();
    let (mut o, _) = failing_run(after(ok(BODY), at(0)), at(DAY_MS), at(31 * DAY_MS));
    let now = at(35 * DAY_MS);
    assert_eq!(o.kind_at(&c, now), RobotsStateKind::Fallback);
    let tr = o.apply(&c, ok(BODY2), now, Jitter::NONE);
    assert_eq!(
        (tr.from, tr.to),
        (RobotsStateKind::Fallback, RobotsStateKind::Fresh)
    );
    assert_eq!(o.verdict(&c, now), obey(BODY2, RulesSource::Fresh));
    assert_eq!(o.next_fetch_at(now), at(36 * DAY_MS));
    let st = o.status(&c, now);
    assert_eq!((st.since, st.attempt), (None, 0));
}

#[test]
fn client_error_ends_fallback_with_allow_all() {
    let c = cfg();
    let (mut o, _) = failing_run(after(ok(BODY), at(0)), at(DAY_MS), at(31 * DAY_MS));
    let now = at(35 * DAY_MS);
    let tr = o.apply(
        &c,
        RobotsFetchResult::ClientError { status: 410 },
        now,
        Jitter::NONE,
    );
    assert_eq!(
        (tr.from, tr.to),
        (RobotsStateKind::Fallback, RobotsStateKind::Fresh)
    );
    assert_eq!(
        o.verdict(&c, now),
        Directive::AllowAll {
            source: RulesSource::Fresh,
            cause: Some(AllowAllCause::ClientError { status: 410 })
        }
    );
}

#[test]
fn success_ends_5xx_disallow_and_a_new_run_starts_a_new_since() {
    let c = cfg();
    let mut o = OriginRobots::new();
    o.apply(&c, s503(), at(0), Jitter::NONE);
    o.apply(&c, s503(), at(MIN), Jitter::NONE);
    let tr = o.apply(&c, ok(BODY), at(3 * MIN), Jitter::NONE);
    assert_eq!(
        (tr.from, tr.to),
        (RobotsStateKind::ServerErrorDisallow, RobotsStateKind::Fresh)
    );
    assert_eq!(o.verdict(&c, at(3 * MIN)), obey(BODY, RulesSource::Fresh));
    // The next failure starts a new run: since is reset, attempt is 1, fallback 30 days later.
    let restart = at(10 * DAY_MS);
    o.apply(&c, s503(), restart, Jitter::NONE);
    let st = o.status(&c, restart);
    assert_eq!((st.since, st.attempt), (Some(restart), 1));
    assert_eq!(st.fallback_at, Some(at(40 * DAY_MS)));
    assert!(o.verdict(&c, at(40 * DAY_MS - 1)).is_hold());
    assert_eq!(
        o.verdict(&c, at(40 * DAY_MS)),
        obey(BODY, RulesSource::Fallback)
    );
}

#[test]
fn custom_fallback_window() {
    let c = StateConfig {
        fallback_after: Duration::from_secs(7 * 24 * 3600),
        ..cfg()
    };
    let mut o = OriginRobots::new();
    o.apply(&c, s503(), at(0), Jitter::NONE);
    assert!(o.verdict(&c, at(7 * DAY_MS - 1)).is_hold());
    assert!(!o.verdict(&c, at(7 * DAY_MS)).is_hold());
}

// ---------------------------------------------------------------- restart (persistence)

#[test]
fn restart_in_5xx_disallow_keeps_since() {
    let c = cfg();
    let since = at(DAY_MS);
    // Fails from day 1 to day 29 (the last attempt is at most an hour before day 30).
    let (o, _) = failing_run(after(ok(BODY), at(0)), since, at(29 * DAY_MS));
    let attempts = attempt(&o);
    assert!(attempts > 600, "{attempts}");
    // The daemon stops; the state is stored and read back on restart.
    let bytes = encode(&o);
    let mut r = decode(&bytes).expect("decode");
    assert_eq!(r, o);
    // Day 29 + a bit after the restart: a failure continues the same run.
    let now = at(29 * DAY_MS + 2 * HOUR_MS);
    let tr = r.apply(&c, s503(), now, Jitter::NONE);
    assert_eq!(
        (tr.from, tr.to),
        (
            RobotsStateKind::ServerErrorDisallow,
            RobotsStateKind::ServerErrorDisallow
        )
    );
    let st = r.status(&c, now);
    assert_eq!(st.since, Some(since));
    assert_eq!(st.attempt, attempts + 1);
    // Fallback on day 31 = since + 30 days, not 30 days after the restart.
    let deadline = at(31 * DAY_MS);
    assert!(r.verdict(&c, UnixMillis(deadline.0 - 1)).is_hold());
    assert_eq!(r.verdict(&c, deadline), obey(BODY, RulesSource::Fallback));
    let again = decode(&encode(&r)).unwrap();
    assert_eq!(
        again.verdict(&c, deadline),
        obey(BODY, RulesSource::Fallback)
    );
}

// ---------------------------------------------------------------- admin view

#[test]
fn status_shows_the_operator_fields() {
    let c = cfg();
    let mut o = after(ok(BODY), at(0));
    let st = o.status(&c, at(HOUR_MS));
    assert_eq!(st.kind, RobotsStateKind::Fresh);
    assert_eq!(st.expires_at, Some(at(DAY_MS)));
    assert_eq!(st.next_fetch_at, at(DAY_MS));
    assert_eq!(st.copy_fetched_at, Some(at(0)));
    assert_eq!(st.copy_body_len, Some(BODY.len()));
    assert_eq!(st.since, None);
    assert_eq!(st.attempt, 0);
    assert_eq!(st.last_fetch.unwrap().at, at(0));
    // Lazily stale.
    assert_eq!(o.status(&c, at(DAY_MS)).kind, RobotsStateKind::Stale);

    o.apply(
        &c,
        RobotsFetchResult::Network {
            kind: NetworkErrorKind::Timeout,
        },
        at(DAY_MS),
        Jitter::NONE,
    );
    let st = o.status(&c, at(DAY_MS));
    assert_eq!(st.kind, RobotsStateKind::ServerErrorDisallow);
    assert_eq!(st.since, Some(at(DAY_MS)));
    assert_eq!(st.fallback_at, Some(at(31 * DAY_MS)));
    assert_eq!(st.expires_at, None);
    assert_eq!(st.attempt, 1);
    assert_eq!(st.next_fetch_at, at(DAY_MS + MIN));
    assert_eq!(
        st.last_fetch,
        Some(LastFetch {
            at: at(DAY_MS),
            outcome: FetchSummary::Network(NetworkErrorKind::Timeout)
        })
    );
    assert_eq!(st.copy_fetched_at, Some(at(0)));
    assert_eq!(st.copy_body_len, Some(BODY.len()));
}

#[test]
fn transitions_and_gates_read_well() {
    let c = cfg();
    let mut o = OriginRobots::new();
    let tr = o.apply(
        &c,
        RobotsFetchResult::ServerError {
            status: 503,
            retry_after: Some(Duration::from_secs(120)),
        },
        at(0),
        Jitter::NONE,
    );
    let line = tr.to_string();
    assert!(line.starts_with("unknown -> 5xx-disallow: "), "{line}");
    assert!(line.contains("503") && line.contains("2m"), "{line}");
    let g = o.verdict(&c, at(0)).to_string();
    assert!(g.starts_with("hold"), "{g}");
    let tr = o.apply(&c, s404(), at(MIN), Jitter::NONE);
    assert!(tr.reason.contains("404"), "{}", tr.reason);
    assert_eq!(fmt_duration(Duration::from_secs(90_061)), "1d1h1m1s");
    assert_eq!(fmt_duration(Duration::from_millis(5)), "5ms");
}

#[test]
fn extreme_instants_do_not_panic() {
    let c = cfg();
    let end = UnixMillis(u64::MAX - 1);
    let mut o = OriginRobots::new();
    o.apply(&c, ok(BODY), end, Jitter(u64::MAX));
    assert_eq!(o.next_fetch_at(end), UnixMillis(u64::MAX));
    o.apply(&c, s503(), UnixMillis(u64::MAX), Jitter(u64::MAX));
    let _ = o.verdict(&c, UnixMillis(u64::MAX));
    let _ = o.status(&c, UnixMillis(0));
    assert_eq!(decode(&encode(&o)).unwrap(), o);
}
