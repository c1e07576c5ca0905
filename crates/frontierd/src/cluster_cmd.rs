//! `frontierd publish FILE` and `frontierd cluster status`: the broker-side clients of
//! `[cluster]` (docs/cluster.md). They read the same configuration as the nodes (the
//! `[cluster]` section must be enabled: it names the broker and the shard count).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cluster::{ClusterSettings, Publisher, ShardSet, UrlRecord};

use crate::admin::submit::EXIT_REJECTED;
use crate::url_list::{read_batch, LineReader};

/// URLs per publish call.
const PUBLISH_LINES: usize = 10_000;

#[derive(clap::Subcommand)]
pub enum ClusterCommand {
    /// Shards, their owners and backlogs, and each node's rates, as the broker has them.
    Status {
        /// Configuration file with the [cluster] section (default: the embedded default).
        #[arg(long)]
        config: Option<std::path::PathBuf>,
    },
}

/// The `[cluster]` settings of a configuration file, or exit status 2.
fn cluster_settings(config: Option<&Path>) -> Result<(ClusterSettings, usize)> {
    let settings = crate::config::Config::load(config)
        .and_then(|c| c.check(std::env::var("STATE_DIRECTORY").ok().as_deref()))
        .map_err(|e| anyhow::anyhow!("config error: {e}"))?;
    let max_url_len = settings.frontier_config().max_url_len;
    match settings.cluster {
        Some(c) => Ok((c.lib, max_url_len)),
        None => bail!(
            "{}: [cluster] is not enabled: set enabled = true with nats_url, shards and node_id",
            config.map_or("the embedded default configuration".into(), |p| p
                .display()
                .to_string())
        ),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Connect and check the streams' shard count, both retried for up to `patience`: a broker
/// that is down (restarting) when the command starts is waited for, and a JetStream cluster
/// that has just formed (or lost a server) answers "request timed out" until its leaders
/// are elected; neither is a reason to fail a publish. A shard-count mismatch is never
/// retried.
async fn connect(settings: &ClusterSettings, patience: Duration) -> Result<cluster::JetStream> {
    let mut waited = Patience::new(patience);
    let client = loop {
        match cluster::connect(settings).await {
            Ok((client, _)) => break client,
            Err(e) => {
                if !waited.again(&e).await {
                    return Err(anyhow::Error::new(e)
                        .context(format!("no broker answered within {patience:?}")));
                }
            }
        }
    };
    let js = cluster::jetstream(client);
    loop {
        match cluster::ensure_streams(&js, settings).await {
            Ok(()) => return Ok(js),
            Err(e @ cluster::BrokerError::ShardCountMismatch { .. }) => return Err(e.into()),
            Err(e) => {
                if !waited.again(&e).await {
                    return Err(e.into());
                }
            }
        }
    }
}

/// Retrying with the broker's back-off ([`cluster::reconnect_delay`]) for up to a limit.
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

    /// After `error`: wait and say true, or false when the next wait would end past the
    /// limit.
    async fn again(&mut self, error: &dyn std::fmt::Display) -> bool {
        self.attempt += 1;
        let pause = cluster::reconnect_delay(self.attempt);
        if self.started.elapsed() + pause >= self.limit {
            return false;
        }
        eprintln!("frontierd: {error}; trying again in {pause:?}");
        tokio::time::sleep(pause).await;
        true
    }
}

/// `frontierd publish FILE`: publish a URL list to the owners' shard subjects. Exit 0 when
/// every URL is published (acknowledged by the broker), 1 when some lines were rejected
/// (listed on stdout), 2 on an error (the message says how many lines were published).
pub fn publish(file: String, config: Option<&Path>, retry_for: Duration) -> Result<ExitCode> {
    let (settings, max_url_len) = cluster_settings(config)?;
    runtime()?.block_on(async move {
        let js = connect(&settings, retry_for)
            .await
            .with_context(|| format!("publishing {file}: no line was published"))?;
        let publisher = Publisher::new(js, settings.shard_map, max_url_len);
        let input: Box<dyn BufRead> = if file == "-" {
            Box::new(BufReader::new(std::io::stdin()))
        } else {
            let f = std::fs::File::open(&file).with_context(|| format!("opening {file}"))?;
            Box::new(BufReader::new(f))
        };
        let mut reader = LineReader::new(input);
        let mut stdout = std::io::stdout().lock();
        let (mut published, mut rejected, mut lines_done) = (0usize, 0usize, 0usize);
        loop {
            let read_so_far = reader.lines_read();
            let Some(batch) = read_batch(&mut reader, PUBLISH_LINES)
                .with_context(|| format!("reading {file} after line {read_so_far}"))?
            else {
                break;
            };
            let mut out: Vec<(usize, String)> = batch
                .rejected
                .iter()
                .map(|r| (r.line, format!("  line {}: {} ({})", r.line, r.input, r.reason)))
                .collect();
            let line_of: HashMap<&str, usize> =
                batch.urls.iter().map(|(n, u)| (u.as_str(), *n)).collect();
            let mut todo: Vec<UrlRecord> = batch
                .urls
                .iter()
                .map(|(_, u)| UrlRecord::seed(u.clone()))
                .collect();
            let started = Instant::now();
            let mut attempt = 0;
            loop {
                match publisher.publish(std::mem::take(&mut todo)).await {
                    Ok(report) => {
                        published += report.published;
                        for e in report.unroutable {
                            let n = line_of.get(e.url.as_str()).copied().unwrap_or(0);
                            out.push((n, format!("  line {n}: {} ({})", e.url, e.reason)));
                        }
                        break;
                    }
                    Err(failure) => {
                        published += failure.report.published;
                        attempt += 1;
                        if started.elapsed() >= retry_for {
                            bail!(
                                "{} URL(s) of lines {}-{} not acknowledged after {:?}: {} (lines 1-{lines_done} and {published} URLs in all were published)",
                                failure.unacked.len(),
                                lines_done + 1,
                                reader.lines_read(),
                                retry_for,
                                failure.error
                            );
                        }
                        eprintln!(
                            "frontierd: {} URL(s) not acknowledged ({}); retrying",
                            failure.unacked.len(),
                            failure.error
                        );
                        for e in failure.report.unroutable {
                            let n = line_of.get(e.url.as_str()).copied().unwrap_or(0);
                            out.push((n, format!("  line {n}: {} ({})", e.url, e.reason)));
                        }
                        todo = failure.unacked;
                        tokio::time::sleep(cluster::reconnect_delay(attempt)).await;
                    }
                }
            }
            rejected += out.len();
            out.sort_by_key(|(n, _)| *n);
            for (_, l) in out {
                writeln!(stdout, "{l}").context("writing to stdout")?;
            }
            lines_done = reader.lines_read();
        }
        writeln!(stdout, "published {published}  rejected {rejected}")
            .context("writing to stdout")?;
        Ok(if rejected > 0 {
            ExitCode::from(EXIT_REJECTED)
        } else {
            ExitCode::SUCCESS
        })
    })
}

/// A node's status as it last published it.
struct NodeView {
    id: String,
    owned: Option<ShardSet>,
    status: serde_json::Value,
}

/// How long `cluster status` waits for the streams of a cluster still electing leaders.
const STATUS_PATIENCE: Duration = Duration::from_secs(10);

/// `frontierd cluster status`.
pub fn run(command: ClusterCommand) -> Result<ExitCode> {
    let ClusterCommand::Status { config } = command;
    let (settings, _) = cluster_settings(config.as_deref())?;
    runtime()?.block_on(async move {
        let js = connect(&settings, STATUS_PATIENCE).await?;
        let shards = settings.shard_map.shards();
        let now = crate::daemon::shared::now_ms();
        let nodes: Vec<NodeView> = cluster::node_statuses(&js)
            .await?
            .into_iter()
            .map(|(id, body)| {
                let status: serde_json::Value =
                    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                let owned = status["owned_shards"]
                    .as_str()
                    .and_then(|s| ShardSet::parse(s, shards).ok());
                NodeView { id, owned, status }
            })
            .collect();
        let mut out = String::new();
        out.push_str(&format!(
            "cluster: {shards} shards, broker {}\n\nshard  owner            pending  ack_pending  redelivered\n",
            settings.nats_url
        ));
        for shard in 0..shards {
            let owners: Vec<&str> = nodes
                .iter()
                .filter(|n| n.owned.as_ref().is_some_and(|o| o.contains(shard)))
                .map(|n| n.id.as_str())
                .collect();
            let owner = match owners.as_slice() {
                [] => "(none)".to_string(),
                [one] => one.to_string(),
                many => format!("CONFLICT:{}", many.join(",")),
            };
            let backlog = cluster::shard_backlog(&js, shard).await?;
            match backlog {
                Some(b) => out.push_str(&format!(
                    "{shard:<5}  {owner:<15}  {:>7}  {:>11}  {:>11}\n",
                    b.pending, b.ack_pending, b.redelivered
                )),
                None => {
                    let stored = cluster::shard_stored(&js, shard).await?;
                    out.push_str(&format!(
                        "{shard:<5}  {owner:<15}  {stored:>7}  {:>11}  {:>11}\n",
                        "-", "-"
                    ))
                }
            }
        }
        out.push_str("\nnode             seen_s_ago  connected  owned        urls_in/s  links_out/s  pages/s  outbox\n");
        for n in &nodes {
            let s = &n.status;
            let ago = now.saturating_sub(s["time_ms"].as_u64().unwrap_or(0)) as f64 / 1000.0;
            out.push_str(&format!(
                "{:<15}  {:>10.1}  {:>9}  {:<11}  {:>9.1}  {:>11.1}  {:>7.1}  {:>6}\n",
                n.id,
                ago,
                s["connected"].as_bool().unwrap_or(false),
                s["owned_shards"].as_str().unwrap_or("?"),
                s["urls_received_per_s"].as_f64().unwrap_or(0.0),
                s["links_published_per_s"].as_f64().unwrap_or(0.0),
                s["pages_per_s"].as_f64().unwrap_or(0.0),
                s["outbox"].as_u64().unwrap_or(0),
            ));
        }
        crate::stdout::out(&out)?;
        Ok(ExitCode::SUCCESS)
    })
}
