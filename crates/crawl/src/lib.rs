//! crawl: what a fetch means for the crawl.
//!
//! It owns the crawler's judgement between a fetch and the frontier: whether a page is
//! done, retried or throttles its host and which crawl log outcome it gets ([`page`]);
//! which kind of answer a fetch got ([`FetchClass`]); what a robots.txt answer means to the
//! robots state machine ([`robots_fetch`]); link extraction with META robots and
//! `X-Robots-Tag` ([`links`]); which links are in scope ([`scope`]); hop paths
//! ([`discovery`]); sitemaps.org sitemaps ([`sitemap`]); the head and truncation of an
//! archived response ([`archive`]); what a revisit found and how it is archived
//! ([`revisit`]); and the crawl log record with its JSON form ([`crawl_log`]).
//!
//! It must never do I/O, read the clock, log or count: every function takes what was
//! fetched and returns a decision, so each is unit-tested here. Fetching is the fetcher's,
//! storing and scheduling the frontier's, writing files the warc crate's and the daemon's.

pub mod archive;
pub mod class;
pub mod crawl_log;
pub mod discovery;
pub mod links;
pub mod page;
pub mod revisit;
pub mod robots_fetch;
pub mod scope;
pub mod sitemap;

pub use archive::{archive_response, robots_exchanges, ArchivedResponse};
pub use class::FetchClass;
pub use crawl_log::{media_type, Archived, Found, LogLine, Outcome};
pub use links::{extract_links, LinkConfig, PageLinks, RobotsDirectives};
pub use page::{judge_page, FollowRules, Page, PageVerdict, RedirectStopped};
pub use robots_fetch::{address_refused_result, refused_fetch_result, robots_fetch_result};
pub use scope::{Scope, ScopeMode};
