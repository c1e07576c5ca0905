//! Issue 3, persistence: each origin's robots state lives in sled, and reopening the store
//! restores every origin exactly (state kind, `since`, copies, attempts, expiry).

use frontier::*;
use robots_policy::state::{decode, NetworkErrorKind, RobotsStateKind};

const T0: u64 = 1_700_000_000_000;
const DAY: u64 = 24 * 3600 * 1000;

fn open(dir: &std::path::Path) -> Frontier {
    let mut cfg = FrontierConfig::new(dir);
    cfg.seed = Some(3);
    Frontier::open(cfg).expect("open store")
}

#[test]
fn reopening_restores_every_origin_exactly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let origins = [
        "http://fresh.test",
        "http://notfound.test",
        "http://failing.test",
        "https://failing-with-copy.test",
        "http://redirects.test:8080",
    ];
    let before: Vec<Option<Vec<u8>>> = {
        let f = open(dir.path());
        f.set_robots(
            &[
                (
                    origins[0],
                    RobotsFetchOutcome::Success {
                        status: 200,
                        body: b"user-agent: *\ndisallow: /private\n".to_vec(),
                        max_age: None,
                    },
                ),
                (origins[1], RobotsFetchOutcome::ClientError { status: 404 }),
                (
                    origins[2],
                    RobotsFetchOutcome::ServerError {
                        status: 503,
                        retry_after: None,
                    },
                ),
                (
                    origins[3],
                    RobotsFetchOutcome::Success {
                        status: 200,
                        body: b"user-agent: *\ndisallow: /old\n".to_vec(),
                        max_age: None,
                    },
                ),
                (origins[4], RobotsFetchOutcome::RedirectLimitExceeded),
            ],
            T0,
        )
        .expect("set robots");
        // A second failure a day later must keep the first failure's `since`.
        f.set_robots(
            &[
                (
                    origins[2],
                    RobotsFetchOutcome::Network {
                        kind: NetworkErrorKind::Timeout,
                    },
                ),
                (
                    origins[3],
                    RobotsFetchOutcome::ServerError {
                        status: 500,
                        retry_after: None,
                    },
                ),
            ],
            T0 + DAY,
        )
        .expect("set robots");
        origins
            .iter()
            .map(|o| f.robots_record(o).expect("read record"))
            .collect()
        // Dropped without any explicit shutdown: what was acknowledged must be on disk.
    };
    let f = open(dir.path());
    for (origin, stored) in origins.iter().zip(&before) {
        let stored = stored.as_ref().expect("record written");
        let reopened = f
            .robots_record(origin)
            .expect("read record")
            .expect("record survives reopening");
        assert_eq!(&reopened, stored, "{origin}: bytes differ after reopening");
        let before_state = decode(stored).expect("decode before");
        let after_state = decode(&reopened).expect("decode after");
        assert_eq!(before_state, after_state, "{origin}");
    }
    let kinds: Vec<RobotsStateKind> = before
        .iter()
        .map(|b| decode(b.as_ref().expect("record")).expect("decode").kind())
        .collect();
    assert_eq!(
        kinds,
        [
            RobotsStateKind::Fresh,
            RobotsStateKind::Fresh,
            RobotsStateKind::ServerErrorDisallow,
            RobotsStateKind::ServerErrorDisallow,
            RobotsStateKind::Fresh,
        ]
    );
    // `since` of the unbroken failure run is the first failure, not the latest.
    let failing = decode(before[2].as_ref().expect("record")).expect("decode");
    let status = failing.status(
        &Default::default(),
        robots_policy::state::UnixMillis(T0 + DAY),
    );
    assert_eq!(status.since, Some(robots_policy::state::UnixMillis(T0)));
}
