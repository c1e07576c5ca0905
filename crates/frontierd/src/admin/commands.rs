//! `frontierd stats` and `frontierd hosts [--ip]`: the admin API's typed answers
//! ([`frontierd_admin::client`]) printed as frontierd-cli's tables (`submit` is submit.rs).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use frontierd_admin::client::{self, Target};
use frontierd_cli::text;

use crate::stdout::out;

pub async fn stats(t: Target, watch: bool) -> Result<ExitCode> {
    loop {
        let v = client::stats(&t).await?;
        let clear = if watch { "\x1b[2J\x1b[H" } else { "" };
        out(&format!("{clear}{}", text::stats(&v)))?;
        if !watch {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

pub async fn hosts(
    t: Target,
    host: Option<String>,
    state: Option<String>,
    limit: usize,
) -> Result<ExitCode> {
    match host {
        Some(h) => {
            let v = client::host(&t, &h).await?;
            if let Some(key) = v.key.as_deref().filter(|k| *k != h) {
                eprintln!("frontierd: {h} is politeness key {key}");
            }
            // as a JSON value: its keys in order, as the daemon's answer had them printed
            let v = serde_json::to_value(&v)?;
            out(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
        }
        None => out(&text::hosts(
            client::hosts(&t, state.as_deref(), limit).await?,
        ))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `frontierd hosts --ip`: which hosts share an IP address, and the address's budget, from
/// `GET /v1/ip-groups`.
pub async fn ip_groups(t: Target, limit: usize) -> Result<ExitCode> {
    out(&text::ip_groups(client::ip_groups(&t).await?, limit))?;
    Ok(ExitCode::SUCCESS)
}
