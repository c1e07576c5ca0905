//! Which kind of answer a fetch got: one classification of a [`FetchOutcome`], from which
//! every label (metrics, logs) is derived.

use fetcher::FetchOutcome;

/// The kind of answer a fetch got, or `Refused` when the fetcher refused the URL before any
/// network activity (bad scheme, no host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchClass {
    /// 2xx.
    Success,
    /// 3xx.
    Redirect,
    /// robots.txt only: redirected once more than the hop limit.
    RedirectLimit,
    /// 4xx other than 429.
    ClientError,
    /// 429.
    TooManyRequests,
    /// 5xx.
    ServerError,
    /// No usable response.
    Network,
    /// Not fetched: the fetcher refused the URL.
    Refused,
}

impl FetchClass {
    /// The class of a fetch that ended with `outcome`.
    pub fn of(outcome: &FetchOutcome) -> FetchClass {
        match outcome {
            FetchOutcome::Success { .. } => FetchClass::Success,
            FetchOutcome::Redirect { .. } => FetchClass::Redirect,
            FetchOutcome::RedirectLimitExceeded { .. } => FetchClass::RedirectLimit,
            FetchOutcome::ClientError { .. } => FetchClass::ClientError,
            FetchOutcome::TooManyRequests { .. } => FetchClass::TooManyRequests,
            FetchOutcome::ServerError { .. } => FetchClass::ServerError,
            FetchOutcome::Network { .. } => FetchClass::Network,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fetcher::{NetworkErrorKind, StatusCode};

    use super::*;

    #[test]
    fn every_outcome_has_its_class() {
        let cases = [
            (
                FetchOutcome::ClientError {
                    status: StatusCode::NOT_FOUND,
                },
                FetchClass::ClientError,
            ),
            (
                FetchOutcome::TooManyRequests {
                    retry_after: Some(Duration::from_secs(3)),
                },
                FetchClass::TooManyRequests,
            ),
            (
                FetchOutcome::ServerError {
                    status: StatusCode::BAD_GATEWAY,
                    retry_after: None,
                },
                FetchClass::ServerError,
            ),
            (
                FetchOutcome::Redirect {
                    status: StatusCode::FOUND,
                    location: None,
                },
                FetchClass::Redirect,
            ),
            (
                FetchOutcome::Network {
                    kind: NetworkErrorKind::Dns,
                    detail: String::new(),
                },
                FetchClass::Network,
            ),
        ];
        for (outcome, class) in cases {
            assert_eq!(FetchClass::of(&outcome), class, "{outcome:?}");
        }
    }
}
