#![allow(dead_code)]
//! How every target cuts one fuzz input into a robots.txt body, an agent and URLs.
//!
//! Layout: `body NUL agent NUL url NUL url ...`. A plain robots.txt file (no NUL) is a body
//! on its own, checked as `googlebot` against `/`, so real files make good seeds as they are.

pub const MAX_URLS: usize = 4;

pub struct Input<'a> {
    pub body: &'a [u8],
    /// Raw agent bytes (also used as a glob pattern by the differential target).
    pub agent_bytes: &'a [u8],
    pub agent: String,
    pub urls: Vec<&'a [u8]>,
}

impl<'a> Input<'a> {
    pub fn split(data: &'a [u8], max_body: usize, max_url: usize) -> Input<'a> {
        let mut parts = data.split(|&b| b == 0);
        let body = parts.next().unwrap_or(&[]);
        let body = &body[..body.len().min(max_body)];
        let agent_bytes = parts.next().unwrap_or(b"googlebot");
        let agent_bytes = &agent_bytes[..agent_bytes.len().min(max_url)];
        let agent = String::from_utf8_lossy(agent_bytes).into_owned();
        let mut urls: Vec<&[u8]> = parts
            .take(MAX_URLS)
            .map(|u| &u[..u.len().min(max_url)])
            .collect();
        if urls.is_empty() {
            urls.push(b"/");
        }
        Input {
            body,
            agent_bytes,
            agent,
            urls,
        }
    }
}

/// A size limit somewhere inside `body`, chosen by its first byte (255 keeps it all), so the
/// "content past the size limit is ignored" path is exercised on small inputs too.
pub fn size_limit(body: &[u8]) -> usize {
    match body.first() {
        Some(&b) if b != 255 => usize::from(b) * body.len() / 255,
        _ => body.len(),
    }
}

pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
