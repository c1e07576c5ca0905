//! Connecting for a command (`frontierd publish`, `cluster status`) with patience: a broker
//! that is down (restarting) when the command starts is waited for, and a JetStream cluster
//! that has just formed (or lost a server) answers "request timed out" until its leaders are
//! elected; neither is a reason to fail. A shard-count mismatch is never retried.

use std::time::{Duration, Instant};

use crate::broker::{connect, ensure_streams, jetstream, reconnect_delay, BrokerError};
use crate::config::ClusterSettings;
use crate::list::Retrying;

/// No broker, or no usable streams, within the patience given.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("no broker answered within {patience:?}")]
    NoBroker {
        patience: Duration,
        source: BrokerError,
    },
    /// Setting up the streams failed (the last error), or they were made for another
    /// shard count.
    #[error(transparent)]
    Streams(BrokerError),
}

/// Connect and check the streams' shard count, both retried with the broker's back-off
/// ([`reconnect_delay`]) for up to `patience`; each retry is reported to `on_retry` first.
pub async fn connect_patiently(
    settings: &ClusterSettings,
    patience: Duration,
    on_retry: &mut dyn FnMut(Retrying<'_>),
) -> Result<crate::JetStream, WaitError> {
    let mut waited = Patience::new(patience);
    let client = loop {
        match connect(settings).await {
            Ok((client, _)) => break client,
            Err(e) => {
                if !waited.again(&e, on_retry).await {
                    return Err(WaitError::NoBroker {
                        patience,
                        source: e,
                    });
                }
            }
        }
    };
    let js = jetstream(client);
    loop {
        match ensure_streams(&js, settings).await {
            Ok(()) => return Ok(js),
            Err(e @ BrokerError::ShardCountMismatch { .. }) => return Err(WaitError::Streams(e)),
            Err(e) => {
                if !waited.again(&e, on_retry).await {
                    return Err(WaitError::Streams(e));
                }
            }
        }
    }
}

/// Retrying with the broker's back-off for up to a limit.
struct Patience {
    started: Instant,
    limit: Duration,
    attempt: usize,
}

impl Patience {
    fn new(limit: Duration) -> Patience {
        Patience {
            started: Instant::now(),
            limit,
            attempt: 0,
        }
    }

    /// After `error`: report it, wait and say true, or false when the next wait would end
    /// past the limit.
    async fn again(&mut self, error: &BrokerError, on_retry: &mut dyn FnMut(Retrying<'_>)) -> bool {
        self.attempt += 1;
        let pause = reconnect_delay(self.attempt);
        if self.started.elapsed() + pause >= self.limit {
            return false;
        }
        on_retry(Retrying::Broker { error, pause });
        tokio::time::sleep(pause).await;
        true
    }
}
