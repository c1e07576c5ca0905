//! `frontierd publish`'s input: a URL list file in the admin API's format (one URL a line,
//! blank lines and `#` comments skipped, bad lines rejected by number), read in parts as the
//! cluster crate's [`ListPublisher`](cluster::ListPublisher) asks for them.

use std::io::BufRead;

use cluster::{ListPart, ListRejection, ListSource};
use frontierd_admin::url_list::{read_batch, LineReader};

/// A URL list in the admin API's format, read in parts for [`ListPublisher`].
pub struct UrlList(pub LineReader<Box<dyn BufRead>>);

impl ListSource for UrlList {
    fn next_part(&mut self, max_urls: usize) -> std::io::Result<Option<ListPart>> {
        let Some(batch) = read_batch(&mut self.0, max_urls)? else {
            return Ok(None);
        };
        Ok(Some(ListPart {
            urls: batch.urls,
            rejected: batch
                .rejected
                .into_iter()
                .map(|r| ListRejection {
                    line: r.line,
                    input: r.input,
                    reason: r.reason,
                })
                .collect(),
            last_line: self.0.lines_read(),
        }))
    }
}
