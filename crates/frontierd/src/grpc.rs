//! `[grpc]`: serve crawler-commons' url-frontier API (crate frontier-grpc) next to the
//! fetch workers, or alone with `fetch.workers = 0`. robots.txt the frontier asks for while
//! serving GetURLs is fetched here, by the daemon, like a worker would.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use anyhow::{Context, Result};
use frontier::RobotsLease;
use frontier_grpc::{GrpcEvent, GrpcSettings, Hooks, LogLevel};

use crate::config::grpc::GrpcListen;
use crate::daemon::shared::Shared;
use crate::internal_events::grpc::GrpcServerFailed;
use crate::internal_events::InternalEvent;

/// What the service reports to, and asks of, the daemon.
struct DaemonHooks {
    shared: Weak<Shared>,
}

impl Hooks for DaemonHooks {
    fn intake_refusal(&self) -> Option<String> {
        let sh = self.shared.upgrade()?;
        crate::daemon::disk::refuse_intake(&sh, "grpc")
    }

    fn fetch_robots(&self, lease: RobotsLease) {
        let Some(sh) = self.shared.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            // the outcome goes to the completer, which applies it in its next batch and
            // then takes the frontier's events (the robots transition among them)
            crate::daemon::worker::robots_item(&sh, lease).await;
            sh.drain_events();
        });
    }

    fn frontier_changed(&self) {
        if let Some(sh) = self.shared.upgrade() {
            sh.drain_events();
        }
    }

    fn set_log_level(&self, target: &str, level: LogLevel) -> Result<String, String> {
        crate::log_filter::set_level(target, level.as_str())
    }

    fn event(&self, event: GrpcEvent<'_>) {
        if let Some(sh) = self.shared.upgrade() {
            event.emit(&sh.metrics);
        }
    }
}

/// Bind `[grpc] listen` and serve until the daemon stops. Returns the bound address and the
/// serving task.
pub async fn start(
    shared: &Arc<Shared>,
    cfg: &GrpcListen,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let token = match &cfg.token_file {
        None => None,
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("reading grpc.token_file {}", p.display()))?
                .trim()
                .to_string(),
        )
        .filter(|t| !t.is_empty()),
    };
    let tls = match &cfg.tls {
        None => None,
        Some((cert, key)) => {
            let pem = frontier_grpc::TlsPem {
                cert: std::fs::read(cert)
                    .with_context(|| format!("reading grpc.tls_cert_file {}", cert.display()))?,
                key: std::fs::read(key)
                    .with_context(|| format!("reading grpc.tls_key_file {}", key.display()))?,
            };
            frontier_grpc::check_tls(&pem).with_context(|| {
                format!(
                    "grpc.tls_cert_file {} / grpc.tls_key_file {}: not a usable certificate chain and key",
                    cert.display(),
                    key.display()
                )
            })?;
            Some(pem)
        }
    };
    if token.is_none() && tls.is_none() && !crate::config::exposure::is_loopback(cfg.listen) {
        // an empty token file: `config check` cannot see that
        anyhow::bail!(crate::config::grpc::unauthenticated(cfg.listen));
    }
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("binding grpc.listen {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    let settings = GrpcSettings {
        token,
        node_address: addr.to_string(),
        max_urls_per_call: cfg.max_urls_per_call,
        tls,
        ..GrpcSettings::default()
    };
    let hooks: Arc<dyn Hooks> = Arc::new(DaemonHooks {
        shared: Arc::downgrade(shared),
    });
    let (sh, sh2) = (shared.clone(), shared.clone());
    let frontier = shared.frontier.clone();
    let task = tokio::spawn(async move {
        let stop = async move { sh.shutdown.notified().await };
        if let Err(e) = frontier_grpc::serve(listener, frontier, hooks, settings, stop).await {
            GrpcServerFailed { error: &e }.emit(&sh2.metrics);
        }
    });
    Ok((addr, task))
}
