//! The url-frontier gRPC API's events: what the service reports through its hooks
//! (`frontier_grpc::GrpcEvent`), counted here, and the server failing.

use std::fmt::Display;

use frontier_grpc::GrpcEvent;

use super::InternalEvent;
use crate::metrics::Metrics;

/// The service logs most of its events where they happen (frontier-grpc); the daemon counts
/// them, and logs what the operator must see.
impl InternalEvent for GrpcEvent<'_> {
    fn emit(self, m: &Metrics) {
        match self {
            GrpcEvent::Served { urls, queues } => {
                tracing::debug!(urls, queues, "GetURLs served");
                m.grpc_urls_served.inc_by(urls);
            }
            GrpcEvent::Acked { status, count } => {
                m.grpc_acks
                    .get_or_create(&crate::metrics::l("status", status))
                    .inc_by(count);
            }
            GrpcEvent::LeasesExpired { count } => {
                m.grpc_leases_expired.inc_by(count);
            }
            GrpcEvent::RpcFailed { rpc, code } => {
                m.grpc_rpc_errors
                    .get_or_create(&vec![
                        ("rpc".to_string(), rpc.to_string()),
                        ("code".to_string(), code.to_string()),
                    ])
                    .inc();
            }
            GrpcEvent::Deleted { rpc, urls } => {
                m.grpc_urls_deleted
                    .get_or_create(&crate::metrics::l("rpc", rpc))
                    .inc_by(urls);
            }
            GrpcEvent::LogLevelSet => {
                m.grpc_log_level_changes.inc();
            }
            GrpcEvent::Unauthenticated => {
                tracing::warn!("gRPC call refused: missing or wrong bearer token");
                m.grpc_unauthenticated.inc();
            }
        }
    }
}

/// The gRPC server ended with an error (its listener failed): external fetchers cannot reach
/// the frontier until a restart.
pub struct GrpcServerFailed<'a> {
    pub error: &'a dyn Display,
}

impl InternalEvent for GrpcServerFailed<'_> {
    fn emit(self, _: &Metrics) {
        tracing::error!(error = %self.error, "gRPC server failed");
    }
}
