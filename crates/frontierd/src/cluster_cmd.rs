//! `frontierd publish FILE` and `frontierd cluster status`: the broker-side clients of
//! `[cluster]` (docs/cluster.md). They read the same configuration as the nodes (the
//! `[cluster]` section must be enabled: it names the broker and the shard count). What they
//! do is the cluster crate's ([`cluster::ListPublisher`], [`cluster::cluster_status`]);
//! here, the list read in the URL list format, what is printed, and the exit status.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use cluster::{ClusterSettings, ListPublisher, Publisher, Retrying};
use frontierd_cli::list::UrlList;
use frontierd_cli::ClusterCommand;

use crate::admin::submit::EXIT_REJECTED;
use crate::url_list::LineReader;

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

/// Say what the cluster crate waits out.
fn show_retry(r: Retrying<'_>) {
    eprintln!("{}", frontierd_cli::text::retrying(&r));
}

/// `frontierd publish FILE`: publish a URL list to the owners' shard subjects. Exit 0 when
/// every URL is published (acknowledged by the broker), 1 when some lines were rejected
/// (listed on stdout), 2 on an error (the message says how many lines were published).
pub fn publish(file: String, config: Option<&Path>, retry_for: Duration) -> Result<ExitCode> {
    let (settings, max_url_len) = cluster_settings(config)?;
    runtime()?.block_on(async move {
        let js = cluster::connect_patiently(&settings, retry_for, &mut show_retry)
            .await
            .with_context(|| format!("publishing {file}: no line was published"))?;
        let publisher = Publisher::new(js, settings.shard_map, max_url_len);
        let input: Box<dyn BufRead> = if file == "-" {
            Box::new(BufReader::new(std::io::stdin()))
        } else {
            let f = std::fs::File::open(&file).with_context(|| format!("opening {file}"))?;
            Box::new(BufReader::new(f))
        };
        let list = UrlList(LineReader::new(input));
        let mut list = ListPublisher::new(publisher, list, file, retry_for);
        let mut stdout = std::io::stdout().lock();
        let mut rejected = 0usize;
        while let Some(part) = list.next_part(&mut show_retry).await? {
            rejected += part.rejected.len();
            for r in part.rejected {
                writeln!(stdout, "  line {}: {} ({})", r.line, r.input, r.reason)
                    .context("writing to stdout")?;
            }
        }
        writeln!(
            stdout,
            "published {}  rejected {rejected}",
            list.published()
        )
        .context("writing to stdout")?;
        Ok(if rejected > 0 {
            ExitCode::from(EXIT_REJECTED)
        } else {
            ExitCode::SUCCESS
        })
    })
}

/// How long `cluster status` waits for the streams of a cluster still electing leaders.
const STATUS_PATIENCE: Duration = Duration::from_secs(10);

/// `frontierd cluster status`.
pub fn run(command: ClusterCommand) -> Result<ExitCode> {
    let ClusterCommand::Status { config } = command;
    let (settings, _) = cluster_settings(config.as_deref())?;
    runtime()?.block_on(async move {
        let js = cluster::connect_patiently(&settings, STATUS_PATIENCE, &mut show_retry).await?;
        let shards = settings.shard_map.shards();
        let now = crate::daemon::shared::now_ms();
        let status = cluster::cluster_status(&js, shards).await?;
        let text = frontierd_cli::text::cluster_status(&status, shards, &settings.nats_url, now);
        crate::stdout::out(&text)?;
        Ok(ExitCode::SUCCESS)
    })
}
