//! `frontierd.v1.FrontierdQueues`: a queue's politeness state, which url-frontier's API
//! cannot tell (robots.txt state of its origins, delay, block, back-off).

use std::sync::Arc;

use frontier::Frontier;
use tonic::{Request, Response, Status};

use crate::pb_frontierd as pb;
use crate::pb_frontierd::frontierd_queues_server::FrontierdQueues;

/// The extras service.
#[derive(Clone)]
pub struct QueuesService {
    frontier: Arc<Frontier>,
}

impl QueuesService {
    /// On `frontier`.
    pub fn new(frontier: Arc<Frontier>) -> Self {
        QueuesService { frontier }
    }
}

#[tonic::async_trait]
impl FrontierdQueues for QueuesService {
    async fn get_queue_state(
        &self,
        request: Request<pb::QueueStateRequest>,
    ) -> Result<Response<pb::QueueState>, Status> {
        let key = request.into_inner().key;
        let f = self.frontier.clone();
        tokio::task::spawn_blocking(move || {
            let now = frontierd_clock::now_ms();
            let internal = |e: frontier::FrontierError| Status::internal(format!("frontier: {e}"));
            let rec = f.host_record(&key).map_err(internal)?;
            let control = f.queue_control(&key);
            let client_delay_ms = f.client_delay(&key);
            let origins = f
                .origins_of(&key, now)
                .map_err(internal)?
                .into_iter()
                .map(|o| pb::OriginRobots {
                    origin: o.origin,
                    state: o.status.kind.as_str().to_string(),
                })
                .collect();
            let mut state = pb::QueueState {
                key: key.clone(),
                known: rec.is_some(),
                origins,
                client_delay_ms,
                blocked_until_ms: control.blocked_until_ms,
                ..Default::default()
            };
            if let Some(rec) = rec {
                let own = f.config().gap_ms(&rec);
                state.delay_ms = own.max(client_delay_ms);
                state.crawl_delay_ms = rec.crawl_delay_ms.into();
                state.backoff_until_ms = rec.backoff_until_ms;
                state.backoff_level = rec.backoff_level.into();
                state.next_allowed_ms = rec.next_allowed_ms.max(control.blocked_until_ms);
                state.queued = rec.counters.queued;
                state.in_flight = rec.in_flight.into();
            }
            Ok(Response::new(state))
        })
        .await
        .map_err(|e| Status::internal(format!("task failed: {e}")))?
    }
}
