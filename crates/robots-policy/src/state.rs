//! The per-origin robots.txt state machine.
//!
//! One [`OriginRobots`] value per origin (the key is the caller's business). It says whether
//! the origin's URLs may be fetched ([`OriginRobots::verdict`]), when robots.txt must be
//! fetched next ([`OriginRobots::next_fetch_at`]) and how a robots.txt fetch outcome changes
//! the state ([`OriginRobots::apply`]). It stores the last good robots.txt *body* as bytes and
//! never parses it: a [`Directive::ObeyRules`] hands the body to the caller, which compiles and
//! matches it.
//!
//! Everything here is pure: time is passed in as [`UnixMillis`], randomness (the retry jitter)
//! as [`Jitter`], and the configuration as [`StateConfig`]. Nothing reads a clock.
//!
//! States (see `docs/robots-state-machine.md` for the drawing and the full transition table):
//!
//! | state | verdict | next robots fetch |
//! | --- | --- | --- |
//! | [`RobotsState::Unknown`] | hold | now |
//! | [`RobotsState::Fresh`] | by the rules (allow-all after a 4xx or a redirect overflow) | at `expires_at` |
//! | [`RobotsState::Stale`] | hold until the refresh resolves | now |
//! | [`RobotsState::ServerErrorDisallow`] | hold | retry with back-off |
//! | [`RobotsState::Fallback`] | by the last good copy, or allow-all if none | slow cadence |
//!
//! Time-driven transitions (fresh -> stale at `expires_at`, 5xx-disallow -> fallback at
//! `since + fallback_after`) are evaluated lazily: every method that takes `now` answers for the
//! state in effect at `now`, whether or not [`OriginRobots::on_tick`] has stored it yet.
//!
//! The persistent encoding lives in [`encoding`] and is re-exported here as [`encode`] and
//! [`decode`].

use std::time::Duration;

pub mod encoding;

pub use encoding::{decode, encode, DecodeError, FORMAT_VERSION};

mod types;
pub use types::*;

/// Everything frontierd stores about one origin's robots.txt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OriginRobots {
    pub state: RobotsState,
    pub last_fetch: Option<LastFetch>,
}

impl OriginRobots {
    /// A never-fetched origin.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored kind (see [`Self::kind_at`] for the kind in effect at an instant).
    pub fn kind(&self) -> RobotsStateKind {
        self.state.kind()
    }

    /// The copy in force (fresh, stale) or the last good one (5xx-disallow, fallback), for
    /// showing an operator what the site last said (its sitemaps, its rules).
    pub fn copy(&self) -> Option<&RobotsCopy> {
        match &self.state {
            RobotsState::Unknown => None,
            RobotsState::Fresh { copy, .. } | RobotsState::Stale { copy, .. } => Some(copy),
            RobotsState::ServerErrorDisallow { last_good, .. }
            | RobotsState::Fallback { last_good, .. } => last_good.as_ref(),
        }
    }

    /// The kind in effect at `now`: a fresh copy past `expires_at` is stale, a 5xx-disallow
    /// past `since + fallback_after` is fallback.
    pub fn kind_at(&self, cfg: &StateConfig, now: UnixMillis) -> RobotsStateKind {
        match &self.state {
            RobotsState::Fresh { expires_at, .. } if now >= *expires_at => RobotsStateKind::Stale,
            RobotsState::ServerErrorDisallow { since, .. } if now >= fallback_at(cfg, *since) => {
                RobotsStateKind::Fallback
            }
            s => s.kind(),
        }
    }

    /// What may be done with the origin's URLs at `now`.
    pub fn verdict(&self, cfg: &StateConfig, now: UnixMillis) -> Directive<'_> {
        match &self.state {
            RobotsState::Unknown => Directive::Hold(HoldReason::NeverFetched),
            RobotsState::Fresh { copy, expires_at } => {
                if now >= *expires_at {
                    Directive::Hold(HoldReason::RefreshPending)
                } else {
                    copy.gate(RulesSource::Fresh)
                }
            }
            RobotsState::Stale { .. } => Directive::Hold(HoldReason::RefreshPending),
            RobotsState::ServerErrorDisallow {
                since, last_good, ..
            } => {
                if now >= fallback_at(cfg, *since) {
                    fallback_gate(last_good)
                } else {
                    Directive::Hold(HoldReason::ServerErrorDisallow { since: *since })
                }
            }
            RobotsState::Fallback { last_good, .. } => fallback_gate(last_good),
        }
    }

    /// When robots.txt should be fetched next. An instant at or before `now` means "due now"
    /// (unknown, stale: ahead of any page of the origin). The machine does not know about
    /// fetches in flight: the caller must not start a second one.
    pub fn next_fetch_at(&self, now: UnixMillis) -> UnixMillis {
        match &self.state {
            RobotsState::Unknown => now,
            RobotsState::Fresh { expires_at, .. } | RobotsState::Stale { expires_at, .. } => {
                *expires_at
            }
            RobotsState::ServerErrorDisallow { next_retry_at, .. }
            | RobotsState::Fallback { next_retry_at, .. } => *next_retry_at,
        }
    }

    /// Whether robots.txt is due at `now`.
    pub fn needs_fetch(&self, now: UnixMillis) -> bool {
        self.next_fetch_at(now) <= now
    }

    /// Apply the time-driven transitions due at `now` to the stored state: fresh -> stale at
    /// `expires_at`, 5xx-disallow -> fallback at `since + fallback_after`. Returns the change,
    /// if any (the caller persists it). Calling it is optional: every method taking `now`
    /// already answers for the state in effect at `now`.
    pub fn on_tick(&mut self, cfg: &StateConfig, now: UnixMillis) -> Option<Transition> {
        let from = self.kind();
        let to = self.kind_at(cfg, now);
        if from == to {
            return None;
        }
        let state = std::mem::take(&mut self.state);
        let (state, reason) = match state {
            RobotsState::Fresh { copy, expires_at } => (
                RobotsState::Stale { copy, expires_at },
                format!("robots.txt expired at {expires_at}: refresh before any page"),
            ),
            RobotsState::ServerErrorDisallow {
                since,
                last_good,
                attempt,
                next_retry_at,
            } => {
                let reason = format!(
                    "failing since {since} for {} or more: {}",
                    fmt_duration(cfg.fallback_after),
                    if last_good.is_some() {
                        "obey the last good copy"
                    } else {
                        "no good copy ever, allow all"
                    }
                );
                (
                    RobotsState::Fallback {
                        since,
                        last_good,
                        attempt,
                        next_retry_at,
                    },
                    reason,
                )
            }
            other => {
                // kind_at only differs from kind for the two arms above.
                self.state = other;
                return None;
            }
        };
        self.state = state;
        Some(Transition {
            from,
            to,
            at: now,
            reason,
        })
    }

    /// Apply the outcome of a robots.txt fetch that resolved at `now`.
    ///
    /// Time-driven transitions due at `now` are applied first, so the returned
    /// [`Transition::from`] is the kind in effect at `now`. `jitter` lengthens a retry delay
    /// (see [`Jitter`]); it is unused for successes and in fallback.
    pub fn apply(
        &mut self,
        cfg: &StateConfig,
        outcome: RobotsFetchResult,
        now: UnixMillis,
        jitter: Jitter,
    ) -> Transition {
        self.on_tick(cfg, now);
        let from = self.kind();
        self.last_fetch = Some(LastFetch {
            at: now,
            outcome: outcome.summary(),
        });
        let reason = match outcome {
            RobotsFetchResult::Success {
                status,
                body,
                max_age,
            } => {
                let lifetime = cfg.freshness_for(max_age);
                let len = body.len();
                self.become_fresh(CopyContent::Body(body), now, lifetime);
                format!(
                    "robots.txt {status} ({len} bytes): obey it, fresh for {}{}",
                    fmt_duration(lifetime),
                    match max_age {
                        Some(ma) => format!(" (max-age {})", fmt_duration(ma)),
                        None => String::new(),
                    }
                )
            }
            RobotsFetchResult::ClientError { status: 429 } => {
                self.fail(cfg, now, None, jitter, "robots.txt 429".to_string())
            }
            RobotsFetchResult::ClientError { status } => {
                let cause = AllowAllCause::ClientError { status };
                self.become_fresh(CopyContent::AllowAll(cause), now, cfg.freshness_default);
                format!(
                    "{cause}: no robots.txt, allow all for {}",
                    fmt_duration(cfg.freshness_default)
                )
            }
            RobotsFetchResult::RedirectLimitExceeded => {
                let cause = AllowAllCause::RedirectLimitExceeded;
                self.become_fresh(CopyContent::AllowAll(cause), now, cfg.freshness_default);
                format!(
                    "{cause}: treated as 404, allow all for {}",
                    fmt_duration(cfg.freshness_default)
                )
            }
            RobotsFetchResult::AddressRefused => {
                let cause = AllowAllCause::AddressRefused;
                let lifetime = cfg.freshness_default.min(ADDRESS_REFUSED_FRESHNESS);
                self.become_fresh(CopyContent::AllowAll(cause), now, lifetime);
                format!(
                    "{cause}: allow all for {} (its pages are refused the same way)",
                    fmt_duration(lifetime)
                )
            }
            RobotsFetchResult::TooManyRequests { retry_after } => self.fail(
                cfg,
                now,
                retry_after,
                jitter,
                format!("robots.txt 429{}", fmt_retry_after(retry_after)),
            ),
            RobotsFetchResult::ServerError {
                status,
                retry_after,
            } => self.fail(
                cfg,
                now,
                retry_after,
                jitter,
                format!("robots.txt {status}{}", fmt_retry_after(retry_after)),
            ),
            RobotsFetchResult::Network { kind } => self.fail(
                cfg,
                now,
                None,
                jitter,
                format!("robots.txt fetch failed ({})", kind.as_str()),
            ),
        };
        Transition {
            from,
            to: self.kind(),
            at: now,
            reason,
        }
    }

    fn become_fresh(&mut self, content: CopyContent, now: UnixMillis, lifetime: Duration) {
        self.state = RobotsState::Fresh {
            copy: RobotsCopy {
                content,
                fetched_at: now,
            },
            expires_at: now.saturating_add(lifetime),
        };
    }

    /// A server-class failure (5xx, 429, network). Assumes `on_tick(now)` already ran.
    fn fail(
        &mut self,
        cfg: &StateConfig,
        now: UnixMillis,
        retry_after: Option<Duration>,
        jitter: Jitter,
        what: String,
    ) -> String {
        let state = std::mem::take(&mut self.state);
        let (since, last_good, attempt) = match state {
            RobotsState::Unknown => (now, None, 0),
            RobotsState::Fresh { copy, .. } | RobotsState::Stale { copy, .. } => {
                (now, Some(copy), 0)
            }
            RobotsState::ServerErrorDisallow {
                since,
                last_good,
                attempt,
                ..
            } => (since, last_good, attempt),
            RobotsState::Fallback {
                since,
                last_good,
                attempt,
                ..
            } => {
                let attempt = attempt.saturating_add(1);
                let next_retry_at = now.saturating_add(cfg.fallback_retry_interval);
                self.state = RobotsState::Fallback {
                    since,
                    last_good,
                    attempt,
                    next_retry_at,
                };
                return format!(
                    "{what}: still failing since {since} (attempt {attempt}), stay in fallback, \
                     retry in {}",
                    fmt_duration(cfg.fallback_retry_interval)
                );
            }
        };
        let attempt = attempt.saturating_add(1);
        let delay = cfg.retry_delay(attempt, retry_after, jitter);
        let had_copy = last_good.is_some();
        self.state = RobotsState::ServerErrorDisallow {
            since,
            last_good,
            attempt,
            next_retry_at: now.saturating_add(delay),
        };
        format!(
            "{what}: whole site held (attempt {attempt}, failing since {since}{}), retry in {}",
            if had_copy {
                ", last good copy kept"
            } else {
                ""
            },
            fmt_duration(delay)
        )
    }

    /// The fields an operator's admin API shows, as in effect at `now`.
    pub fn status(&self, cfg: &StateConfig, now: UnixMillis) -> RobotsStatus {
        let (since, expires_at, attempt, copy) = match &self.state {
            RobotsState::Unknown => (None, None, 0, None),
            RobotsState::Fresh { copy, expires_at } | RobotsState::Stale { copy, expires_at } => {
                (None, Some(*expires_at), 0, Some(copy))
            }
            RobotsState::ServerErrorDisallow {
                since,
                last_good,
                attempt,
                ..
            }
            | RobotsState::Fallback {
                since,
                last_good,
                attempt,
                ..
            } => (Some(*since), None, *attempt, last_good.as_ref()),
        };
        RobotsStatus {
            kind: self.kind_at(cfg, now),
            since,
            fallback_at: since.map(|s| fallback_at(cfg, s)),
            expires_at,
            next_fetch_at: self.next_fetch_at(now),
            attempt,
            last_fetch: self.last_fetch,
            copy_fetched_at: copy.map(|c| c.fetched_at),
            copy_body_len: copy.and_then(|c| match &c.content {
                CopyContent::Body(b) => Some(b.len()),
                CopyContent::AllowAll(_) => None,
            }),
        }
    }
}

fn fallback_at(cfg: &StateConfig, since: UnixMillis) -> UnixMillis {
    since.saturating_add(cfg.fallback_after)
}

fn fallback_gate(last_good: &Option<RobotsCopy>) -> Directive<'_> {
    match last_good {
        Some(copy) => copy.gate(RulesSource::Fallback),
        None => Directive::AllowAll {
            source: RulesSource::Fallback,
            cause: None,
        },
    }
}

fn fmt_retry_after(ra: Option<Duration>) -> String {
    match ra {
        Some(d) => format!(" (Retry-After {})", fmt_duration(d)),
        None => String::new(),
    }
}

/// "1d2h", "1h", "2m30s", "45s", "250ms".
fn fmt_duration(d: Duration) -> String {
    let ms = duration_to_millis(d);
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = ms / 1000;
    let (days, hours, mins, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(days, "d"), (hours, "h"), (mins, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
