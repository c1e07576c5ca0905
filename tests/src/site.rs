//! [`Site`]: an HTTP/1.1 server on a 127.0.0.1 ephemeral port that serves any host name,
//! records every request (time, host, path, when the answer was fully sent) and answers
//! through a handler, well or badly ([`Reply`]: delayed, stalled, dripping, endless, a gzip
//! bomb, garbage, a reset mid-body).

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Hit {
    /// Host header without the port.
    pub host: String,
    pub path: String,
    /// When the request head was fully read (stamped by the server task: it may lag the
    /// arrival, never precede it).
    pub start: Instant,
    /// When the server began writing the answer (None: no HTTP answer). The client cannot
    /// have had the answer before this instant, so "next start - sent" is a sound lower
    /// bound of a client's pause between two requests.
    pub sent: Option<Instant>,
    /// When the answer was fully written (None: never finished, e.g. stall or reset).
    pub end: Option<Instant>,
    /// Requests to this host in flight at the server (read, answer not begun), this one
    /// included, at `start`.
    pub in_flight: usize,
}

/// A parsed request.
#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    pub host: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// How many earlier requests for the same host and path this server saw.
    pub nth: usize,
}

impl Req {
    /// The node that made the request, `n` of a User-Agent `frontierd-n<n>/...` (the cluster
    /// tests give each node its own product token); `usize::MAX` for any other.
    pub fn node(&self) -> usize {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
            .and_then(|(_, v)| v.strip_prefix("frontierd-n"))
            .and_then(|r| r.split('/').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(usize::MAX)
    }
}

/// What the server does with a request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A whole answer with Content-Length.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Wait, then answer.
    Delayed(Duration, Box<Reply>),
    /// Read the request, never answer, hold the connection until the client goes.
    Stall,
    /// A 200 promising 1 MB, then one byte per interval.
    Drip(Duration),
    /// A 200 with a chunked body that never ends.
    Endless,
    /// A 200 `Content-Encoding: gzip` body that decodes to this many zero bytes.
    GzipBomb(usize),
    /// Bytes that are not HTTP, then close.
    Garbage,
    /// A 200 promising 1 MB, 16 KiB of it, then a TCP reset.
    ResetMidBody,
}

impl Reply {
    pub fn status(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply::Full {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }
    pub fn html(body: impl AsRef<str>) -> Reply {
        Reply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), "text/html; charset=utf-8".into())],
            body: format!("<!doctype html><html><body>{}</body></html>", body.as_ref())
                .into_bytes(),
        }
    }
    pub fn text(body: impl Into<Vec<u8>>) -> Reply {
        Reply::Full {
            status: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: body.into(),
        }
    }
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::Full {
            status,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }
    pub fn not_found() -> Reply {
        Reply::status(404, "not found")
    }
    /// Add a header to a `Full` reply (others unchanged).
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Full { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
    pub fn delayed(self, d: Duration) -> Reply {
        Reply::Delayed(d, Box::new(self))
    }
}

pub type Handler = Arc<dyn Fn(&Req) -> Reply + Send + Sync>;

struct SiteState {
    hits: Mutex<Vec<Hit>>,
    seen: Mutex<HashMap<(String, String), usize>>,
    in_flight: Mutex<HashMap<String, usize>>,
    handler: Mutex<Handler>,
    connections: AtomicUsize,
}

/// The background runtime the sites run on (tests themselves are synchronous).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("site runtime")
    })
}

/// An HTTP server on 127.0.0.1 that records every request. Name it `<anything>.site.test`
/// with its port: the daemon's `[resolve]` maps the name to 127.0.0.1.
pub struct Site {
    pub port: u16,
    /// With [`Site::start_tls`]: the PEM certificate of the CA that signed the site's
    /// certificate (for `*.site.test`), for `[fetch] extra_root_certificates`.
    pub ca_pem: Option<String>,
    state: Arc<SiteState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Site {
    pub fn start(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Site {
        Site::start_on("127.0.0.1", handler)
    }

    /// A site listening on another loopback address (`127.0.0.x`), for hosts that must not
    /// share 127.0.0.1's IP group: map their names to it in `[resolve]`.
    pub fn start_on(ip: &str, handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Site {
        Site::serve(ip, None, handler)
    }

    /// A site that speaks HTTPS only (TLS 1.3 or 1.2), with a certificate for `*.site.test`
    /// signed by a CA made here ([`Site::ca_pem`]); [`Site::base`] then gives `https://`.
    pub fn start_tls(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Site {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "frontierd e2e CA");
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let key = rcgen::KeyPair::generate().expect("site key");
        let leaf = rcgen::CertificateParams::new(vec!["*.site.test".to_string()])
            .expect("site certificate")
            .signed_by(&key, &rcgen::Issuer::from_params(&ca_params, &ca_key))
            .expect("site certificate signed");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone(), ca.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let mut site = Site::serve("127.0.0.1", Some(acceptor), handler);
        site.ca_pem = Some(ca.pem());
        site
    }

    fn serve(
        ip: &str,
        tls: Option<tokio_rustls::TlsAcceptor>,
        handler: impl Fn(&Req) -> Reply + Send + Sync + 'static,
    ) -> Site {
        let state = Arc::new(SiteState {
            hits: Mutex::new(Vec::new()),
            seen: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            handler: Mutex::new(Arc::new(handler)),
            connections: AtomicUsize::new(0),
        });
        let listener = runtime()
            .block_on(tokio::net::TcpListener::bind((ip, 0)))
            .expect("bind a site");
        let port = listener.local_addr().expect("addr").port();
        let st = state.clone();
        let task = runtime().spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                st.connections.fetch_add(1, Ordering::Relaxed);
                let st = st.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => {
                            let _ = serve_connection(st, stream).await;
                        }
                        // a client that refuses the certificate ends it here
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                let _ = serve_connection(st, stream).await;
                            }
                        }
                    }
                });
            }
        });
        Site {
            port,
            ca_pem: None,
            state,
            task,
        }
    }

    /// Replace the handler (for sites that change their mind).
    pub fn set_handler(&self, handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) {
        *self.state.handler.lock().unwrap() = Arc::new(handler);
    }

    /// `http://<name>:<port>` (`https://` for a TLS site) for a name under `.site.test`.
    pub fn base(&self, name: &str) -> String {
        let scheme = match self.ca_pem {
            Some(_) => "https",
            None => "http",
        };
        format!("{scheme}://{name}:{}", self.port)
    }

    /// Every request so far, in arrival order.
    pub fn hits(&self) -> Vec<Hit> {
        self.state.hits.lock().unwrap().clone()
    }

    /// Requests to one host, in arrival order.
    pub fn hits_for(&self, host: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.host == host).collect()
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::Relaxed)
    }
}

struct InFlight {
    st: Arc<SiteState>,
    host: String,
    idx: usize,
    counted: bool,
    done: bool,
}

impl InFlight {
    /// The answer begins: stamp `sent`, and the request no longer counts as in flight.
    fn responding(&mut self) {
        self.st.hits.lock().unwrap()[self.idx].sent = Some(Instant::now());
        self.uncount();
    }
    fn uncount(&mut self) {
        if self.counted {
            self.counted = false;
            let mut m = self.st.in_flight.lock().unwrap();
            if let Some(n) = m.get_mut(&self.host) {
                *n = n.saturating_sub(1);
            }
        }
    }
    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.st.hits.lock().unwrap()[self.idx].end = Some(Instant::now());
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.uncount();
    }
}

/// A connection the site answers on: plain TCP, or TLS over it.
trait SiteStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {
    /// The TCP socket's descriptor (to reset it).
    fn socket_fd(&self) -> std::os::fd::RawFd;
}

impl SiteStream for tokio::net::TcpStream {
    fn socket_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(self)
    }
}

impl SiteStream for tokio_rustls::server::TlsStream<tokio::net::TcpStream> {
    fn socket_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(self.get_ref().0)
    }
}

async fn serve_connection(st: Arc<SiteState>, mut stream: impl SiteStream) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        // read one request head
        let head_end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if buf.len() > 1 << 20 {
                return Ok(());
            }
            let mut chunk = [0u8; 8192];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split_whitespace();
        let method = first.next().unwrap_or("").to_string();
        let target = first.next().unwrap_or("/").to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let host_header = headers
            .iter()
            .find(|(k, _)| k == "host")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let host = host_header
            .rsplit_once(':')
            .map(|(h, _)| h.to_string())
            .unwrap_or(host_header)
            .to_ascii_lowercase();
        let path = if let Some(rest) = target.strip_prefix("http://") {
            rest.find('/')
                .map(|i| rest[i..].to_string())
                .unwrap_or("/".into())
        } else {
            target
        };
        let close = headers
            .iter()
            .any(|(k, v)| k == "connection" && v.eq_ignore_ascii_case("close"));
        let nth = {
            let mut seen = st.seen.lock().unwrap();
            let n = seen.entry((host.clone(), path.clone())).or_insert(0);
            *n += 1;
            *n - 1
        };
        let in_flight = {
            let mut m = st.in_flight.lock().unwrap();
            let n = m.entry(host.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let idx = {
            let mut hits = st.hits.lock().unwrap();
            hits.push(Hit {
                host: host.clone(),
                path: path.clone(),
                start: Instant::now(),
                sent: None,
                end: None,
                in_flight,
            });
            hits.len() - 1
        };
        let mut guard = InFlight {
            st: st.clone(),
            host: host.clone(),
            idx,
            counted: true,
            done: false,
        };
        let req = Req {
            method,
            host,
            path,
            headers,
            nth,
        };
        let handler = st.handler.lock().unwrap().clone();
        let mut reply = handler(&req);
        while let Reply::Delayed(d, inner) = reply {
            tokio::time::sleep(d).await;
            reply = *inner;
        }
        match reply {
            Reply::Full {
                status,
                headers,
                body,
            } => {
                let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
                for (k, v) in &headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str(&format!("Content-Length: {}\r\n", body.len()));
                if close {
                    out.push_str("Connection: close\r\n");
                }
                out.push_str("\r\n");
                let mut bytes = out.into_bytes();
                if req.method != "HEAD" {
                    bytes.extend_from_slice(&body);
                }
                guard.responding();
                stream.write_all(&bytes).await?;
                stream.flush().await?;
                guard.finish();
                if close {
                    let _ = stream.shutdown().await;
                    return Ok(());
                }
            }
            Reply::Stall => {
                // hold until the client hangs up
                let mut chunk = [0u8; 1024];
                while stream.read(&mut chunk).await? > 0 {}
                return Ok(());
            }
            Reply::Drip(every) => {
                guard.responding();
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000\r\n\r\n")
                    .await?;
                loop {
                    stream.write_all(b"x").await?;
                    stream.flush().await?;
                    tokio::time::sleep(every).await;
                }
            }
            Reply::Endless => {
                guard.responding();
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
                    .await?;
                let mut chunk = format!("{:x}\r\n", 65536).into_bytes();
                chunk.extend_from_slice(&[b'a'; 65536]);
                chunk.extend_from_slice(b"\r\n");
                loop {
                    stream.write_all(&chunk).await?;
                }
            }
            Reply::GzipBomb(decoded) => {
                let body = gzip_zeros(decoded);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                guard.responding();
                stream.write_all(head.as_bytes()).await?;
                stream.write_all(&body).await?;
                stream.flush().await?;
                guard.finish();
                let _ = stream.shutdown().await;
                return Ok(());
            }
            Reply::Garbage => {
                let mut junk = Vec::with_capacity(4096);
                let mut x: u32 = 0x9e37_79b9;
                for _ in 0..4096 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    junk.push((x & 0xff) as u8);
                }
                stream.write_all(b"\x00\x01GARBAGE ").await?;
                stream.write_all(&junk).await?;
                stream.flush().await?;
                let _ = stream.shutdown().await;
                return Ok(());
            }
            Reply::ResetMidBody => {
                guard.responding();
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000\r\n\r\n")
                    .await?;
                stream.write_all(&[b'y'; 16384]).await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                reset(stream.socket_fd());
                drop(stream);
                return Ok(());
            }
            Reply::Delayed(..) => unreachable!(),
        }
    }
}

/// Drop a connection with a TCP RST (SO_LINGER 0).
fn reset(fd: std::os::fd::RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

fn gzip_zeros(n: usize) -> Vec<u8> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Vec<u8>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut c = cache.lock().unwrap();
    c.entry(n)
        .or_insert_with(|| {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            let zeros = vec![0u8; 1 << 20];
            let mut left = n;
            while left > 0 {
                let k = left.min(zeros.len());
                enc.write_all(&zeros[..k]).unwrap();
                left -= k;
            }
            enc.finish().unwrap()
        })
        .clone()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Whatever",
    }
}
