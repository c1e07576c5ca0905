//! The one place where a fetcher outcome for `/robots.txt` becomes the robots state
//! machine's input. The two crates do not know each other; the binary joins them.

use fetcher::{FetchOutcome, NetworkErrorKind as FetchNetworkKind, RobotsFetch};
use robots_policy::state::{NetworkErrorKind, RobotsFetchResult};

/// Map a robots.txt fetch to the state machine's input (spec section 2):
/// 2xx obey the body; 3xx past the hop limit, or a 3xx that cannot be followed, is a 404;
/// 4xx other than 429 allow all; 429, 5xx and every network failure disallow the site
/// until a later fetch says otherwise.
pub fn robots_fetch_result(fetch: &RobotsFetch) -> RobotsFetchResult {
    outcome_to_result(&fetch.outcome)
}

/// A robots.txt URL that was not fetched (it does not parse, or the fetcher refused it
/// before any network activity: bad scheme, no host) is treated as a network failure: hold
/// the origin rather than guess.
pub fn refused_fetch_result() -> RobotsFetchResult {
    RobotsFetchResult::Network {
        kind: NetworkErrorKind::Other,
    }
}

/// A robots.txt fetch the address policy refused (nothing was sent): see
/// [`RobotsFetchResult::AddressRefused`].
pub fn address_refused_result() -> RobotsFetchResult {
    RobotsFetchResult::AddressRefused
}

fn outcome_to_result(outcome: &FetchOutcome) -> RobotsFetchResult {
    match outcome {
        FetchOutcome::Success {
            status,
            body,
            max_age,
            ..
        } => RobotsFetchResult::Success {
            status: status.as_u16(),
            body: body.to_vec(),
            max_age: *max_age,
        },
        // Past the limit, or a redirect with no usable target: "treat it as a 404".
        FetchOutcome::RedirectLimitExceeded { .. } | FetchOutcome::Redirect { .. } => {
            RobotsFetchResult::RedirectLimitExceeded
        }
        FetchOutcome::ClientError { status } => RobotsFetchResult::ClientError {
            status: status.as_u16(),
        },
        FetchOutcome::TooManyRequests { retry_after } => RobotsFetchResult::TooManyRequests {
            retry_after: *retry_after,
        },
        FetchOutcome::ServerError {
            status,
            retry_after,
        } => RobotsFetchResult::ServerError {
            status: status.as_u16(),
            retry_after: *retry_after,
        },
        FetchOutcome::Network { kind, .. } => RobotsFetchResult::Network {
            kind: network_kind(*kind),
        },
    }
}

fn network_kind(kind: FetchNetworkKind) -> NetworkErrorKind {
    match kind {
        FetchNetworkKind::Dns => NetworkErrorKind::Dns,
        FetchNetworkKind::Connect => NetworkErrorKind::Connect,
        FetchNetworkKind::Tls => NetworkErrorKind::Tls,
        FetchNetworkKind::Timeout => NetworkErrorKind::Timeout,
        FetchNetworkKind::Reset => NetworkErrorKind::Reset,
        FetchNetworkKind::InvalidResponse => NetworkErrorKind::InvalidResponse,
        FetchNetworkKind::BrokenChunking => NetworkErrorKind::BrokenChunking,
        FetchNetworkKind::Other => NetworkErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fetcher::{Fetcher, FetcherConfig, ResolveTable, Url};
    use robots_policy::state::{
        Directive, Jitter, OriginRobots, RobotsStateKind, StateConfig, UnixMillis,
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const NOW: UnixMillis = UnixMillis(1_700_000_000_000);

    /// The fetcher's and the state machine's network failure kinds are two enums (the
    /// crates do not know each other): the mapping keeps each kind's label, and the two
    /// lists of labels are the same, so metrics and logs name a failure alike on both sides.
    #[test]
    fn network_failure_kinds_map_one_to_one_with_the_same_labels() {
        let mapped: Vec<&str> = FetchNetworkKind::ALL
            .iter()
            .map(|&k| {
                assert_eq!(network_kind(k).as_str(), k.as_str(), "{k:?}");
                network_kind(k).as_str()
            })
            .collect();
        let robots: Vec<&str> = NetworkErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(mapped, robots);
    }

    /// A server whose `/robots.txt` redirects `/r1`, `/r2`, ... up to `/r{hops}`, which
    /// answers `final_status` with a disallow-everything body.
    async fn redirect_chain_server(hops: u32, final_status: u16) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&request);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let step: u32 = match path.as_str() {
                        "/robots.txt" => 0,
                        other => other.trim_start_matches("/r").parse().unwrap_or(0),
                    };
                    let response = if step < hops {
                        format!(
                            "HTTP/1.1 301 Moved\r\nLocation: /r{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                            step + 1
                        )
                    } else {
                        let body = "user-agent: *\ndisallow: /\n";
                        format!(
                            "HTTP/1.1 {final_status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        )
                    };
                    let _ = socket.write_all(response.as_bytes()).await;
                });
            }
        });
        addr
    }

    async fn state_after_fetch(hops: u32, final_status: u16) -> OriginRobots {
        let addr = redirect_chain_server(hops, final_status).await;
        let mut resolve = ResolveTable::new();
        resolve
            .insert("robots.test", vec![addr.ip()])
            .expect("resolve entry");
        let fetcher = Fetcher::new(FetcherConfig {
            resolve,
            total_timeout: Duration::from_secs(10),
            addresses: fetcher::AddressPolicy::allowing_loopback(),
            ..FetcherConfig::default()
        })
        .expect("fetcher");
        let origin = Url::parse(&format!("http://robots.test:{}/", addr.port())).expect("url");
        let fetch = fetcher.fetch_robots(&origin).await.expect("fetch");
        let mut state = OriginRobots::new();
        state.apply(
            &StateConfig::default(),
            robots_fetch_result(&fetch),
            NOW,
            Jitter::NONE,
        );
        state
    }

    #[tokio::test]
    async fn five_redirect_hops_are_followed_and_obeyed() {
        let state = state_after_fetch(5, 200).await;
        assert_eq!(state.kind(), RobotsStateKind::Fresh);
        assert!(matches!(
            state.verdict(&StateConfig::default(), NOW),
            Directive::ObeyRules { body, .. } if body.starts_with(b"user-agent: *")
        ));
    }

    #[tokio::test]
    async fn a_sixth_redirect_means_allow_all() {
        let state = state_after_fetch(6, 200).await;
        assert_eq!(state.kind(), RobotsStateKind::Fresh);
        assert!(matches!(
            state.verdict(&StateConfig::default(), NOW),
            Directive::AllowAll { .. }
        ));
    }

    #[tokio::test]
    async fn server_errors_and_429_hold_the_origin() {
        for status in [500, 503, 429] {
            let state = state_after_fetch(0, status).await;
            assert_eq!(
                state.kind(),
                RobotsStateKind::ServerErrorDisallow,
                "{status}"
            );
            assert!(matches!(
                state.verdict(&StateConfig::default(), NOW),
                Directive::Hold(_)
            ));
        }
    }

    #[tokio::test]
    async fn not_found_allows_all() {
        let state = state_after_fetch(0, 404).await;
        assert!(matches!(
            state.verdict(&StateConfig::default(), NOW),
            Directive::AllowAll { .. }
        ));
    }

    #[test]
    fn network_failures_are_server_errors() {
        for (kind, want) in [
            (FetchNetworkKind::Dns, NetworkErrorKind::Dns),
            (FetchNetworkKind::Timeout, NetworkErrorKind::Timeout),
            (
                FetchNetworkKind::BrokenChunking,
                NetworkErrorKind::BrokenChunking,
            ),
        ] {
            let result = outcome_to_result(&FetchOutcome::Network {
                kind,
                detail: String::new(),
            });
            assert_eq!(result, RobotsFetchResult::Network { kind: want });
        }
    }
}
