//! The admin API's client: one HTTP/1.1 request at a time on a new connection
//! ([`request`]), the typed reads the `stats` and `hosts` commands make, and the
//! submission of a URL list of any size in parts (`client/submit.rs`). It prints nothing:
//! what it read and what went wrong are returned, and the caller shows them.

mod submit;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;

use crate::answers::{HostView, HostsAnswer, IpGroupsAnswer};

pub use submit::{PartAnswered, ReadError, Submission, SubmitError, BATCH_BYTES, BATCH_LINES};

/// Where a running daemon listens, and its token.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: String,
    pub token: Option<String>,
}

/// A request that got no usable answer, naming the request and the reason.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to the admin API at {addr} (is frontierd running?)")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("HTTP handshake with {addr}")]
    Handshake { addr: String, source: hyper::Error },
    #[error("building {method} {path}")]
    Build {
        method: String,
        path: String,
        source: hyper::http::Error,
    },
    #[error("{method} {path} to {addr}")]
    Send {
        method: String,
        path: String,
        addr: String,
        source: hyper::Error,
    },
    #[error("reading the answer to {method} {path}")]
    Read {
        method: String,
        path: String,
        source: hyper::Error,
    },
    /// An answer other than 200 to a read.
    #[error("GET {path}: HTTP {status}: {body}")]
    Status {
        path: String,
        status: u16,
        body: String,
    },
    #[error("GET {path}: not JSON")]
    NotJson {
        path: String,
        source: serde_json::Error,
    },
    /// JSON, but not the answer's type.
    #[error("reading the answer of GET {path}")]
    Unexpected {
        path: String,
        source: serde_json::Error,
    },
}

/// An error and its causes on one line, `outer: inner: ...`, as the command line shows
/// errors.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// One HTTP/1.1 request to the admin API (a new connection each time); returns (status,
/// body). Any answer is returned, a 413 included, even one sent before the body was read.
pub async fn request(
    t: &Target,
    method: &str,
    path: &str,
    body: impl Into<Bytes>,
) -> Result<(u16, String), ClientError> {
    let stream = tokio::net::TcpStream::connect(&t.addr)
        .await
        .map_err(|source| ClientError::Connect {
            addr: t.addr.clone(),
            source,
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|source| ClientError::Handshake {
            addr: t.addr.clone(),
            source,
        })?;
    let conn = tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, &t.addr)
        .header(hyper::header::CONTENT_TYPE, "text/plain");
    if let Some(tok) = &t.token {
        req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {tok}"));
    }
    let req = req
        .body(Full::new(body.into()))
        .map_err(|source| ClientError::Build {
            method: method.to_string(),
            path: path.to_string(),
            source,
        })?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|source| ClientError::Send {
            method: method.to_string(),
            path: path.to_string(),
            addr: t.addr.clone(),
            source,
        })?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|source| ClientError::Read {
            method: method.to_string(),
            path: path.to_string(),
            source,
        })?
        .to_bytes();
    conn.abort();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// `GET path`, its 200 answer as JSON.
pub async fn get_json(t: &Target, path: &str) -> Result<serde_json::Value, ClientError> {
    let (status, body) = request(t, "GET", path, Bytes::new()).await?;
    if status != 200 {
        return Err(ClientError::Status {
            path: path.to_string(),
            status,
            body: body.trim().to_string(),
        });
    }
    serde_json::from_str(&body).map_err(|source| ClientError::NotJson {
        path: path.to_string(),
        source,
    })
}

/// `GET path`, its 200 answer as the type `T`.
async fn get<T: DeserializeOwned>(t: &Target, path: &str) -> Result<T, ClientError> {
    serde_json::from_value(get_json(t, path).await?).map_err(|source| ClientError::Unexpected {
        path: path.to_string(),
        source,
    })
}

/// `GET /v1/stats`: every counter by name (the daemon's snapshot).
pub async fn stats(t: &Target) -> Result<serde_json::Value, ClientError> {
    get_json(t, "/v1/stats").await
}

/// `GET /v1/hosts`: up to `limit` hosts, only those in robots `state` when given.
pub async fn hosts(
    t: &Target,
    state: Option<&str>,
    limit: usize,
) -> Result<HostsAnswer, ClientError> {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("limit", &limit.to_string());
    if let Some(state) = state {
        query.append_pair("state", state);
    }
    get(t, &format!("/v1/hosts?{}", query.finish())).await
}

/// `GET /v1/hosts/{host}`: one host in detail (`key` says which politeness key `host`
/// named).
pub async fn host(t: &Target, host: &str) -> Result<HostView, ClientError> {
    let segment = percent_encoding::utf8_percent_encode(host, percent_encoding::NON_ALPHANUMERIC);
    get(t, &format!("/v1/hosts/{segment}")).await
}

/// `GET /v1/ip-groups`.
pub async fn ip_groups(t: &Target) -> Result<IpGroupsAnswer, ClientError> {
    get(t, "/v1/ip-groups").await
}

#[cfg(test)]
mod tests;
