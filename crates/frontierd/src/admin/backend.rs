//! The daemon as the admin API's backend: what each route reads or asks for, and every
//! event the server reports, through this daemon's internal events.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use frontier::Frontier;
use frontierd_admin::url_list::Batch;
use frontierd_admin::{Backend, BoxFuture, IntakeRefusal, ServerEvent, Tally};

use crate::daemon::shared::{now_ms, Shared};
use crate::daemon::{disk, intake};

/// The daemon's shared state, serving the admin API.
pub struct DaemonBackend(pub Arc<Shared>);

impl Backend for DaemonBackend {
    fn frontier(&self) -> &Frontier {
        &self.0.frontier
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn unhealthy(&self) -> Option<String> {
        self.0.disk.refusal()
    }

    fn intake_refusal(&self) -> Option<IntakeRefusal> {
        if self.0.stopping.load(Ordering::SeqCst) {
            return Some(IntakeRefusal::Stopping);
        }
        disk::refuse_intake(&self.0, "api").map(IntakeRefusal::Storage)
    }

    fn sitemaps_enabled(&self) -> bool {
        self.0.settings.sitemaps.enabled
    }

    fn submit(&self, batch: Batch) -> BoxFuture<'_, Result<Tally, String>> {
        Box::pin(async move {
            intake::submit_batch(&self.0, batch)
                .await
                .map_err(|e| format!("{e:#}"))
        })
    }

    fn recent(&self) -> frontierd_admin::answers::RecentAnswer {
        frontierd_admin::answers::RecentAnswer {
            fetches: self.0.crawl_log.recent(),
        }
    }

    fn stats(&self) -> serde_json::Value {
        self.0.snapshot().to_json()
    }

    fn refresh_gauges(&self) {
        self.0.snapshot();
    }

    fn metrics(&self, accept: Option<&str>) -> (String, Vec<u8>) {
        let format = crate::metrics::Format::negotiate(accept);
        (
            format.content_type().to_string(),
            self.0.metrics.encode(format).into(),
        )
    }

    fn wake(&self) {
        self.0.pipeline.kick();
    }

    fn event(&self, event: ServerEvent<'_>) {
        crate::internal_events::admin::server_event(event, &self.0.metrics);
    }
}
