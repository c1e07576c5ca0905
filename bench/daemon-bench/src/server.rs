//! The HTTP server of many hosts: nginx (Debian's `nginx-light`) as a foreground child, or
//! this binary's own hyper server (`daemon-bench serve`, a child process too) when every
//! response must wait a fixed latency, which nginx-light cannot do cheaply.
//!
//! Either answers any Host: `/robots.txt` allows everything, every other path is the same
//! ~9.7 KB HTML page.

use std::convert::Infallible;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};

pub const ROBOTS_TXT: &str = "User-agent: *\nAllow: /\n";

/// A deterministic HTML page of about 9.7 KB (the size the issue measured with).
pub fn page_html() -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bench page</title></head>\n<body>\n<h1>bench page</h1>\n",
    );
    let mut i = 0;
    while s.len() < 9_600 {
        s.push_str(&format!(
            "<p>Paragraph {i}: the quick brown fox jumps over the lazy dog. <a href=\"/p/{i}\">link {i}</a></p>\n"
        ));
        i += 1;
    }
    s.push_str("</body></html>\n");
    s
}

/// Which server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServerKind {
    /// nginx when the latency is 0 and nginx is installed, else hyper.
    Auto,
    Nginx,
    Hyper,
}

/// A running server child; killed on drop.
pub struct Server {
    pub kind: &'static str,
    /// The first of `ports`: the one the bench's own requests (readiness, counters) use.
    pub port: u16,
    /// Every port it listens on (127.0.0.1); host `k` is served on `ports[k % len]`.
    pub ports: Vec<u16>,
    /// With TLS: the CA whose certificate the daemon must trust.
    pub ca_pem: Option<PathBuf>,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM: nginx's master stops its workers ("fast shutdown")
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` distinct free loopback ports (all bound at once, then released).
pub fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n.max(1))
        .map(|_| TcpListener::bind("127.0.0.1:0").context("binding a loopback port"))
        .collect::<Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// The port host `host` (`h<host>.test`) is served on.
pub fn port_of(ports: &[u16], host: u64) -> u16 {
    ports[(host % ports.len() as u64) as usize]
}

pub fn find_nginx() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// How nginx serves: what it compresses the page with (each once at start, for requests
/// that accept it), TLS, how long it keeps an idle connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct NginxOptions {
    /// gzip level 6 (`gzip_static`).
    pub gzip: bool,
    /// brotli at this quality, preferred to gzip when a request accepts both.
    pub br_quality: Option<u32>,
    /// HTTPS only, with a certificate for `*.bench.test` under a CA made at start
    /// ([`Server::ca_pem`]).
    pub tls: bool,
    /// With `tls`: HTTP/2 offered by ALPN as well as HTTP/1.1 (the daemon speaks it with
    /// `[fetch] http2 = true`).
    pub h2: bool,
    /// `keepalive_timeout` (300 s when unset; 0 closes after each answer).
    pub keepalive: Option<Duration>,
}

/// Start the chosen server on `n_ports` loopback ports and wait until it answers.
pub fn start(
    kind: ServerKind,
    latency: Duration,
    threads: usize,
    n_ports: usize,
    options: NginxOptions,
    page: Option<&Path>,
) -> Result<Server> {
    let kind = match kind {
        ServerKind::Auto if latency.is_zero() && find_nginx().is_some() => ServerKind::Nginx,
        ServerKind::Auto => ServerKind::Hyper,
        k => k,
    };
    if kind == ServerKind::Nginx && !latency.is_zero() {
        bail!("nginx-light cannot add a per-response latency: use --server hyper (or auto)");
    }
    let nginx_only =
        options.gzip || options.br_quality.is_some() || options.tls || options.keepalive.is_some();
    if nginx_only && kind != ServerKind::Nginx {
        bail!("--server-gzip, --server-br, --server-tls and --server-keepalive need nginx");
    }
    if page.is_some() && kind != ServerKind::Nginx {
        bail!("--page needs nginx");
    }
    let page = match page {
        Some(p) => fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        None => page_html().into_bytes(),
    };
    let dir = tempfile::Builder::new()
        .prefix("daemon-bench-server-")
        .tempdir()
        .context("creating the server's temp dir")?;
    let ports = free_ports(n_ports)?;
    let port = ports[0];
    let port_list = ports
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (name, child) = match kind {
        ServerKind::Nginx => (
            "nginx",
            start_nginx(dir.path(), &ports, threads, options, &page)?,
        ),
        _ => {
            let exe = std::env::current_exe().context("finding this binary")?;
            let child = Command::new(exe)
                .args([
                    "serve",
                    "--ports",
                    &port_list,
                    "--latency",
                    &humantime::format_duration(latency).to_string(),
                    "--threads",
                    &threads.to_string(),
                ])
                .stdin(Stdio::null())
                .spawn()
                .context("starting `daemon-bench serve`")?;
            ("hyper", child)
        }
    };
    let ca_pem = options.tls.then(|| dir.path().join("ca.pem"));
    let server = Server {
        kind: name,
        port,
        ports,
        ca_pem,
        child,
        _dir: dir,
    };
    wait_ready(port, Duration::from_secs(10), options.tls)
        .with_context(|| format!("{name} did not answer on 127.0.0.1:{port}"))?;
    Ok(server)
}

fn start_nginx(
    dir: &Path,
    ports: &[u16],
    workers: usize,
    options: NginxOptions,
    page: &[u8],
) -> Result<Child> {
    let nginx = find_nginx().context("nginx not found: apt-get install -y nginx-light")?;
    let www = dir.join("www");
    fs::create_dir_all(&www)?;
    fs::create_dir_all(dir.join("tmp"))?;
    fs::write(www.join("page.html"), page)?;
    let gzip_static = if options.gzip {
        use std::io::Write as _;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        gz.write_all(page)?;
        fs::write(www.join("page.html.gz"), gz.finish()?)?;
        "gzip_static on;"
    } else {
        ""
    };
    // brotli: a request whose Accept-Encoding names br is rewritten to the .br file, served
    // with its Content-Encoding (nginx-light has no brotli module)
    let (br_map, br_rewrite, br_location) = match options.br_quality {
        Some(quality) => {
            use std::io::Write as _;
            let mut br = Vec::new();
            {
                let mut w = brotli::CompressorWriter::new(&mut br, 4096, quality, 22);
                w.write_all(page)?;
            }
            fs::write(www.join("page.html.br"), br)?;
            (
                "map $http_accept_encoding $accepts_br { \"~*\\bbr\\b\" 1; default \"\"; }",
                "if ($accepts_br) { rewrite ^ /page.br last; }",
                "location = /page.br { internal; default_type text/html; gzip_static off; \
                 add_header Content-Encoding br; add_header Vary Accept-Encoding; \
                 try_files /page.html.br =404; }",
            )
        }
        None => ("", "", ""),
    };
    fs::write(www.join("robots.txt"), ROBOTS_TXT)?;
    let d = dir.display();
    let (ssl, tls) = match options.tls {
        true => {
            write_certificates(dir)?;
            (
                if options.h2 { " ssl http2" } else { " ssl" },
                format!(
                    "ssl_certificate {d}/chain.pem; ssl_certificate_key {d}/key.pem; \
                     ssl_protocols TLSv1.2 TLSv1.3;"
                ),
            )
        }
        false => ("", String::new()),
    };
    let keepalive = match options.keepalive {
        Some(k) => format!("{}ms", k.as_millis()),
        None => "300s".to_string(),
    };
    let listen: String = ports
        .iter()
        .map(|port| format!("        listen 127.0.0.1:{port}{ssl} backlog=4096;\n"))
        .collect();
    let conf = format!(
        r#"daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile 65536;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 65536; multi_accept on; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    keepalive_requests 10000000;
    keepalive_timeout {keepalive};
    sendfile on;
    tcp_nopush on;
    open_file_cache max=16;
    {gzip_static}
    {br_map}
    {tls}
    server {{
{listen}        server_name _;
        root {d}/www;
        location = /robots.txt {{ default_type text/plain; }}
        location / {{ default_type text/html; {br_rewrite} try_files /page.html =404; }}
        {br_location}
    }}
}}
"#
    );
    let conf_path = dir.join("nginx.conf");
    fs::write(&conf_path, conf)?;
    let child = Command::new(&nginx)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf_path)
        .arg("-e")
        .arg(dir.join("error.log"))
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", nginx.display()))?;
    Ok(child)
}

/// A CA and a certificate it signs for `*.bench.test` (ECDSA P-256, as most sites'):
/// `ca.pem` for the daemon to trust, `chain.pem` and `key.pem` for nginx.
fn write_certificates(dir: &Path) -> Result<()> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "daemon-bench CA");
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let ca = ca_params.self_signed(&ca_key)?;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let leaf = rcgen::CertificateParams::new(vec![format!("*.{TLS_DOMAIN}")])?
        .signed_by(&key, &rcgen::Issuer::from_params(&ca_params, &ca_key))?;
    fs::write(dir.join("ca.pem"), ca.pem())?;
    fs::write(dir.join("chain.pem"), format!("{}{}", leaf.pem(), ca.pem()))?;
    fs::write(dir.join("key.pem"), key.serialize_pem())?;
    Ok(())
}

/// With --server-tls, host k is `h<k>.bench.test` (the certificate's wildcard).
pub const TLS_DOMAIN: &str = "bench.test";

/// Ready when a plain request for /robots.txt gets a 200, or over TLS the 400 nginx gives
/// a plain request on a TLS port.
fn wait_ready(port: u16, limit: Duration, tls: bool) -> Result<()> {
    let ready: &[u8] = match tls {
        true => b"HTTP/1.1 400",
        false => b"HTTP/1.1 200",
    };
    let deadline = Instant::now() + limit;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    loop {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.write_all(b"GET /robots.txt HTTP/1.1\r\nHost: h0.test\r\nConnection: close\r\n\r\n")?;
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            if buf.starts_with(ready) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("no 200 for /robots.txt within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Requests the hyper server answered (all but [`REQUESTS_PATH`]).
static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// The hyper server answers this path with [`REQUESTS`] (the daemon never asks for it).
const REQUESTS_PATH: &str = "/__daemon_bench_requests";

/// Requests the hyper server has received and not yet answered (waiting out the latency).
static IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// The hyper server answers this path with [`IN_FLIGHT`].
const IN_FLIGHT_PATH: &str = "/__daemon_bench_in_flight";

/// How many requests the hyper server on `port` has answered (its own count).
pub fn requests(port: u16) -> Result<u64> {
    counter(port, REQUESTS_PATH)
}

/// How many requests the hyper server on `port` holds right now (received, not answered):
/// what the client has in flight, as the server sees it.
pub fn in_flight(port: u16) -> Result<u64> {
    counter(port, IN_FLIGHT_PATH)
}

fn counter(port: u16, path: &str) -> Result<u64> {
    let mut s = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: h0.test\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    text.split_once("\r\n\r\n")
        .and_then(|(_, b)| b.trim().parse().ok())
        .with_context(|| format!("no request count from the server: {text:.200}"))
}

/// `daemon-bench serve`: the hyper server (runs in its own process, like nginx), one
/// accept loop a port.
pub fn serve(ports: &[u16], latency: Duration, threads: usize) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut loops = tokio::task::JoinSet::new();
        for &port in ports {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .with_context(|| format!("binding 127.0.0.1:{port}"))?;
            loops.spawn(accept_loop(listener, latency));
        }
        while let Some(done) = loops.join_next().await {
            done?;
        }
        Ok(())
    })
}

async fn accept_loop(listener: tokio::net::TcpListener, latency: Duration) {
    let page = Bytes::from(page_html());
    let robots = Bytes::from_static(ROBOTS_TXT.as_bytes());
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and the like: back off instead of spinning
                eprintln!("daemon-bench serve: accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (page, robots) = (page.clone(), robots.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let (page, robots) = (page.clone(), robots.clone());
                async move {
                    if req.uri().path() == REQUESTS_PATH {
                        let n = REQUESTS.load(Ordering::Relaxed).to_string();
                        return Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(n))));
                    }
                    if req.uri().path() == IN_FLIGHT_PATH {
                        let n = IN_FLIGHT.load(Ordering::Relaxed).to_string();
                        return Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(n))));
                    }
                    REQUESTS.fetch_add(1, Ordering::Relaxed);
                    IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
                    let (body, ctype) = if req.uri().path() == "/robots.txt" {
                        (robots, "text/plain")
                    } else {
                        (page, "text/html")
                    };
                    let resp = Response::builder()
                        .header("content-type", ctype)
                        .body(Full::new(body))
                        .unwrap_or_default();
                    Ok::<_, Infallible>(resp)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(io, svc)
                .await;
        });
    }
}

/// Requests/s of `wrk -t1 -cN -d3s` against one host of the server, if wrk is installed.
pub fn wrk(port: u16, connections: usize) -> Option<f64> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{connections}"),
            "-d3s",
            "-H",
            "Host: h0.test",
            &format!("http://127.0.0.1:{port}/p/1"),
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Samples the hyper server's [`in_flight`] every 100 ms on a thread, until [`Self::stop`]:
/// how many requests the client under test really has out at once (a client that waits on
/// itself shows it here, whatever its worker count).
pub struct InFlightSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<u64>>,
}

/// What [`InFlightSampler`] saw.
pub struct InFlightSummary {
    /// mean over the samples from the first busy one to the last busy one
    pub mean: f64,
    pub max: u64,
    /// the mean of each second, in order
    pub per_second: Vec<u64>,
}

impl InFlightSampler {
    pub fn start(port: u16) -> InFlightSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            let mut next = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                samples.push(in_flight(port).unwrap_or(0));
                next += Duration::from_millis(100);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            samples
        });
        InFlightSampler { stop, thread }
    }

    pub fn stop(self) -> InFlightSummary {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().unwrap_or_default();
        let first = samples.iter().position(|&n| n > 0).unwrap_or(0);
        let last = samples.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
        let busy = &samples[first..last.max(first)];
        InFlightSummary {
            mean: busy.iter().sum::<u64>() as f64 / busy.len().max(1) as f64,
            max: busy.iter().copied().max().unwrap_or(0),
            per_second: busy
                .chunks(10)
                .map(|c| c.iter().sum::<u64>() / c.len() as u64)
                .collect(),
        }
    }
}

impl std::fmt::Display for InFlightSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs: Vec<String> = self.per_second.iter().map(u64::to_string).collect();
        write!(
            f,
            "requests in flight at the server (100 ms samples): mean {:.0}, max {}; by second: {}",
            self.mean,
            self.max,
            secs.join(" ")
        )
    }
}
