//! `daemon-bench`: how fast the frontierd binary crawls and ingests, next to what a bare
//! hyper client fetches from the same local server in the same run. See
//! docs/benchmarks.md ("Daemon throughput") for how to run it and the results.

mod client;
mod daemon;
mod peer;
mod procfs;
mod rounds;
mod scheduled;
mod server;

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::daemon::DaemonConfig;
use crate::server::ServerKind;

/// Crawl N URLs over H local hosts with a bare hyper client and with frontierd, and print
/// both rates, their ratio, frontierd's CPU per page and peak RSS; or (--ingest) time
/// `frontierd submit` of a URL list to a fresh daemon; or (--scheduled) submit URLs with a
/// `refetch_at` a month ahead and compare the daemon's memory with its idle baseline.
#[derive(Parser)]
#[command(name = "daemon-bench")]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    /// Host names h0.test .. h<N-1>.test; URL k goes to host k mod N.
    #[arg(long, default_value_t = 1000)]
    hosts: u64,
    /// URLs in the list (each fetched once).
    #[arg(long, default_value_t = 30_000)]
    urls: u64,
    /// frontierd `fetch.workers`, one crawl per value (the bare client runs as many
    /// requests at once, unless --concurrency is given).
    #[arg(long, value_delimiter = ',', default_value = "16,64,256")]
    workers: Vec<usize>,
    /// Requests at once of the bare client (default: each --workers value).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Hold the bare client to this many pages a second (URL i asked for no sooner than
    /// i / PACE seconds after the start).
    #[arg(long)]
    pace: Option<f64>,
    /// nginx answers a request that accepts gzip with the page gzip-compressed
    /// (`gzip_static`, compressed once at start), as most servers do, and the bare clients
    /// ask for it as frontierd does: frontierd then reads a content-encoded body, decodes
    /// it for its links and archives it as received; the bare clients take it as received.
    #[arg(long)]
    server_gzip: bool,
    /// As --server-gzip, and a request that accepts br gets the page brotli-compressed at
    /// this quality (0-11; servers compressing on the fly use 4-6, pre-compressed files 11),
    /// compressed once at start.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=11))]
    server_br: Option<u32>,
    /// nginx serves HTTPS only (TLS 1.3 or 1.2, an ECDSA P-256 certificate for
    /// `*.bench.test` under a CA made at start, which the daemon is told to trust); the
    /// hosts are `h<k>.bench.test`. The bare clients speak plain HTTP: with --no-client.
    #[arg(long)]
    server_tls: bool,
    /// With --server-tls: nginx offers HTTP/2 by ALPN as well, which the daemon speaks
    /// when asked to (`--fetch-toml 'http2 = true'`).
    #[arg(long, requires = "server_tls")]
    server_h2: bool,
    /// nginx's `keepalive_timeout` (default 300s): `0s` closes every connection after its
    /// answer, as servers whose idle timeout is shorter than a polite crawler's gap do.
    #[arg(long, value_parser = humantime::parse_duration)]
    server_keepalive: Option<Duration>,
    /// nginx serves this file as every page instead of the generated 9 689-byte one (e.g. a
    /// real HTML page, whose gzip ratio the generated page's 10:1 over-states).
    #[arg(long)]
    page: Option<PathBuf>,
    /// After frontierd in each round, run the bare client again (and, with --warc-anchor,
    /// the bare client archiving) held to frontierd's pages/s of that round: what a fetch
    /// costs at the daemon's rate, where the server and the client sleep and are woken
    /// between requests instead of never idling.
    #[arg(long)]
    paced_anchor: bool,
    /// Per-response latency of the server (e.g. 100ms); needs the hyper server.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    latency: Duration,
    /// Which server: auto = nginx when --latency is 0 and nginx is installed, else hyper.
    #[arg(long, value_enum, default_value_t = ServerKind::Auto)]
    server: ServerKind,
    /// nginx worker processes / hyper server threads.
    #[arg(long, default_value_t = 1)]
    server_threads: usize,
    /// Loopback ports the server listens on; host k is served on port k mod N. On one
    /// port every connection has the same destination address and port, and once some
    /// 10 000 are open or in TIME_WAIT the kernel spends most of a connect() looking for
    /// a free source port among its 28 000: a real crawl's hosts are on many addresses.
    #[arg(long, default_value_t = 64)]
    server_ports: usize,
    /// Threads of the bare client's runtime.
    #[arg(long, default_value_t = 2)]
    client_threads: usize,
    /// The frontierd binary (default: next to this binary, i.e. target/release/frontierd).
    #[arg(long)]
    frontierd: Option<PathBuf>,
    /// TOML appended to the generated frontierd config (e.g. a [warc] or [store] table).
    #[arg(long)]
    daemon_config: Option<PathBuf>,
    /// `key = value` lines for the generated `[store]` table (e.g. "cache_bytes = 8388608");
    /// --daemon-config cannot add keys to a table the generated config already has.
    #[arg(long, default_value = "")]
    store_toml: String,
    /// `key = value` lines for the generated `[fetch]` table (e.g.
    /// "max_pooled_connections = 16384").
    #[arg(long, default_value = "")]
    fetch_toml: String,
    /// Skip the bare client.
    #[arg(long)]
    no_client: bool,
    /// Crawls at each --workers value: the bare client, the bare client + WARC and
    /// frontierd, in turn, this many times (every second round in the reverse order, so a
    /// machine whose speed drifts favours neither side). With more than one, a table of
    /// each ratio's median and range over the rounds follows the rounds' own. --spider
    /// runs in the first round only; --perf records every round into the same file (the
    /// last round's stays).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Also run the bare client archiving every answer as WARC with the daemon's writer
    /// (`warc` crate, the default level), and compare frontierd with it too: what the
    /// daemon costs beyond fetching and archiving.
    #[arg(long)]
    warc_anchor: bool,
    /// Also crawl with spider-peer (bench/spider-peer: the spider crate), after frontierd at
    /// each --workers value: one spider crawl per host of --hosts, --urls / --hosts pages
    /// each, that many requests at once.
    #[arg(long)]
    spider: Option<PathBuf>,
    /// Skip frontierd.
    #[arg(long)]
    no_daemon: bool,
    /// Also measure `wrk -t1 -c64 -d3s` against one host of the server (if wrk is installed).
    #[arg(long)]
    wrk: bool,
    /// Ingest mode: `frontierd submit` of the list to a fresh daemon (first --workers
    /// value), instead of the crawls.
    #[arg(long)]
    ingest: bool,
    /// Ingest mode: after the submit, crawl on until every host's robots.txt was fetched
    /// and a checkpoint of the host journal has ended (or this long passed), and report
    /// memory then (the "while crawling, robots.txt known for all of them").
    #[arg(long, value_parser = humantime::parse_duration)]
    then_crawl: Option<Duration>,
    /// With --then-crawl: crawl on at least this long, even once robots.txt is known for
    /// every host (memory over a longer crawl: more checkpoints, more hosts done).
    #[arg(long, value_parser = humantime::parse_duration)]
    crawl_at_least: Option<Duration>,
    /// With --then-crawl: delete each completed WARC file as it is rotated (as an
    /// operator's shipper would), so that a crawl of tens of millions of pages fits on the
    /// disk.
    #[arg(long)]
    ship_warc: bool,
    /// Scheduled mode: POST the N URLs to a fresh daemon (first --workers value) as JSON
    /// objects with `refetch_at` 30 days ahead, and report VmHWM/VmRSS idle (baseline),
    /// after the submit and after --after more seconds, with the fetches seen meanwhile
    /// (none expected). Uses the hyper server, which counts its requests.
    #[arg(long)]
    scheduled: bool,
    /// Scheduled mode: URLs per POST /v1/urls.
    #[arg(long, default_value_t = 10_000)]
    batch: u64,
    /// Scheduled mode: POST requests at once.
    #[arg(long, default_value_t = 4)]
    submit_conns: usize,
    /// Scheduled mode: how long the daemon runs idle before the baseline is taken.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    idle: Duration,
    /// Scheduled mode: how long the daemon runs on after the submit (the due scan runs).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    after: Duration,
    /// Run `perf <--perf-args> -o DIR/perf-<workers>.data -p <frontierd pid>` from the
    /// first page to the last of each crawl (those runs are slowed by the recording).
    #[arg(long)]
    perf: Option<PathBuf>,
    /// perf subcommand and options for --perf. Rust code has no frame pointers: use
    /// "record --call-graph dwarf,16384 -F 299" to see the Rust callers of kernel time;
    /// "stat -e context-switches,syscalls:sys_enter_futex,..." counts events.
    #[arg(long, default_value = "record -g", allow_hyphen_values = true)]
    perf_args: String,
    /// Give up a crawl after this long.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

#[derive(Subcommand)]
enum Sub {
    /// The hyper server (started by the bench itself as a child process).
    #[command(hide = true)]
    Serve {
        #[arg(long, value_delimiter = ',')]
        ports: Vec<u16>,
        #[arg(long, value_parser = humantime::parse_duration)]
        latency: Duration,
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Some(Sub::Serve {
            ports,
            latency,
            threads,
        }) => server::serve(&ports, latency, threads),
        None => bench(&cli),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("daemon-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Lift the open-file limit to the hard limit: thousands of hosts mean thousands of
/// sockets, in the server and in the daemon (children inherit it).
fn raise_nofile() {
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn write_list(path: &Path, urls: &[String]) -> Result<()> {
    let mut w = BufWriter::new(fs::File::create(path)?);
    for u in urls {
        writeln!(w, "{u}")?;
    }
    w.flush()?;
    Ok(())
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

fn bench(cli: &Cli) -> Result<()> {
    raise_nofile();
    let load_start = procfs::loadavg();
    println!("load average at start: {load_start}");
    let exe = match &cli.frontierd {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("binary has no directory")?
            .join("frontierd"),
    };
    let extra_toml = match &cli.daemon_config {
        Some(p) => fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        None => String::new(),
    };
    if cli.server_tls && (!cli.no_client || cli.warc_anchor) {
        anyhow::bail!("--server-tls: the bare clients speak plain HTTP; add --no-client (and no --warc-anchor)");
    }
    let srv = start_server(cli)?;
    let port = srv.port;
    let hosts = cli.hosts.max(1);
    let mut fetch_toml = cli.fetch_toml.replace("\\n", "\n");
    if let Some(ca) = &srv.ca_pem {
        fetch_toml.push_str(&format!(
            "\nextra_root_certificates = [{:?}]\n",
            ca.display().to_string()
        ));
    }
    let daemon_cfg = |workers: usize| DaemonConfig {
        exe: exe.clone(),
        workers,
        extra_toml: extra_toml.clone(),
        store_toml: cli.store_toml.replace("\\n", "\n"),
        fetch_toml: fetch_toml.clone(),
    };
    if cli.scheduled {
        // no URL list in memory or on disk: the URLs are generated batch by batch
        let w = cli.workers.first().copied().unwrap_or(1);
        let r = scheduled::run(
            &daemon_cfg(w),
            port,
            cli.urls,
            hosts,
            cli.batch,
            cli.submit_conns,
            cli.idle,
            cli.after,
        )?;
        print_scheduled(&r, hosts, w, cli, &load_start);
        return Ok(());
    }
    let urls: Arc<Vec<String>> = Arc::new(
        (0..cli.urls)
            .map(|k| {
                let host = k % hosts;
                let port = server::port_of(&srv.ports, host);
                match cli.server_tls {
                    true => format!("https://h{host}.{}:{port}/p/{k}", server::TLS_DOMAIN),
                    false => format!("http://h{host}.test:{port}/p/{k}"),
                }
            })
            .collect(),
    );
    let work = tempfile::Builder::new().prefix("daemon-bench-").tempdir()?;
    let list = work.path().join("urls.txt");
    write_list(&list, &urls)?;

    if cli.ingest {
        let w = cli.workers.first().copied().unwrap_or(1);
        return run_ingest(cli, &daemon_cfg(w), &list, hosts, &load_start);
    }

    // only the hyper server counts what it holds
    let sample_in_flight = srv.kind == "hyper";
    let mut rows = Vec::new();
    let mut against_spider = Vec::new();
    for &w in &cli.workers {
        let conc = cli.concurrency.unwrap_or(w);
        let bare_with = |warc_dir: Option<&Path>, pace: Option<f64>| {
            run_bare_client(cli, &urls, conc, sample_in_flight, port, warc_dir, pace)
        };
        let warc_tmp = || {
            tempfile::Builder::new()
                .prefix("daemon-bench-warc")
                .tempdir()
        };
        for round in 0..cli.rounds.max(1) {
            let mut steps = [Side::Bare, Side::BareWarc, Side::Daemon];
            if round % 2 == 1 {
                steps.reverse();
            }
            let (mut bare, mut bare_warc, mut crawl) = (None, None, None);
            for side in steps {
                match side {
                    Side::Bare if !cli.no_client => bare = Some(bare_with(None, cli.pace)?),
                    Side::BareWarc if cli.warc_anchor => {
                        let dir = warc_tmp()?;
                        bare_warc = Some(bare_with(Some(dir.path()), cli.pace)?);
                    }
                    Side::Daemon if !cli.no_daemon => {
                        crawl = Some(run_daemon_crawl(
                            cli,
                            &daemon_cfg(w),
                            &list,
                            sample_in_flight,
                            port,
                        )?)
                    }
                    _ => {}
                }
            }
            // held to the daemon's rate: after it, in every round
            let (mut bare_paced, mut bare_warc_paced) = (None, None);
            if let (true, Some(c)) = (cli.paced_anchor, &crawl) {
                bare_paced = Some(bare_with(None, Some(c.rate()))?);
                if cli.warc_anchor {
                    let dir = warc_tmp()?;
                    bare_warc_paced = Some(bare_with(Some(dir.path()), Some(c.rate()))?);
                }
            }
            // the peer once a worker count: its lead is far outside the drift
            if let (Some(bin), 0) = (&cli.spider, round) {
                let run = peer::run_spider(bin, port, hosts, cli.urls / hosts, w)?;
                let ours = crawl
                    .as_ref()
                    .map(|c: &daemon::CrawlRun| (c.rate(), c.cpu_per_page * 1e6));
                against_spider.push(peer::Against {
                    workers: w,
                    frontierd: ours,
                    spider: run,
                });
            }
            rows.push(CrawlRow {
                workers: w,
                concurrency: conc,
                bare,
                bare_warc,
                crawl,
                bare_paced,
                bare_warc_paced,
                load_after: procfs::loadavg(),
            });
        }
    }
    print_crawl_table(&rows, srv.kind, cli, hosts, &load_start);
    if cli.rounds > 1 {
        rounds::print_medians(&rows);
    }
    if cli.paced_anchor {
        rounds::print_paced(&rows);
    }
    if !against_spider.is_empty() {
        peer::print_table(&against_spider);
    }
    Ok(())
}

/// The local server the crawls fetch from (the hyper one in scheduled mode), announced,
/// and measured by wrk with --wrk.
fn start_server(cli: &Cli) -> Result<server::Server> {
    let server_kind = match cli.scheduled {
        // nginx runs without an access log: only the hyper server counts requests
        true => ServerKind::Hyper,
        false => cli.server,
    };
    let srv = server::start(
        server_kind,
        cli.latency,
        cli.server_threads,
        cli.server_ports,
        server::NginxOptions {
            gzip: cli.server_gzip || cli.server_br.is_some(),
            br_quality: cli.server_br,
            tls: cli.server_tls,
            h2: cli.server_h2,
            keepalive: cli.server_keepalive,
        },
        cli.page.as_deref(),
    )?;
    println!(
        "server: {} on 127.0.0.1:{} and {} more ports (pid {}, {} worker(s)), latency {:?}, {} hosts, {} URLs",
        srv.kind,
        srv.port,
        srv.ports.len() - 1,
        srv.pid(),
        cli.server_threads,
        cli.latency,
        cli.hosts,
        cli.urls
    );
    if cli.wrk {
        match server::wrk(srv.port, 64) {
            Some(r) => println!("wrk -t1 -c64 -d3s, one host: {r:.0} requests/s"),
            None => println!("wrk: not installed or no result"),
        }
    }
    Ok(srv)
}

/// Ingest mode: `frontierd submit` of the list to a fresh daemon with `cfg.workers`
/// workers (and the crawl after it with --then-crawl), then the table of what it cost.
fn run_ingest(
    cli: &Cli,
    cfg: &DaemonConfig,
    list: &Path,
    hosts: u64,
    load_start: &str,
) -> Result<()> {
    let w = cfg.workers;
    println!(
        "ingest: frontierd submit of {} URLs over {hosts} hosts, {w} workers",
        cli.urls
    );
    if let Some(d) = &cli.perf {
        fs::create_dir_all(d)?;
    }
    let perf_out = cli.perf.as_ref().map(|d| d.join("perf-ingest.data"));
    let r = daemon::ingest(
        cfg,
        list,
        cli.urls,
        perf_out.as_deref().map(|o| (o, cli.perf_args.as_str())),
        cli.then_crawl.map(|limit| daemon::CrawlAfterPlan {
            hosts,
            limit,
            at_least: cli.crawl_at_least.unwrap_or_default(),
            ship_warc: cli.ship_warc,
        }),
    )?;
    print_ingest(&r, hosts, w, load_start);
    Ok(())
}

fn print_ingest(r: &daemon::IngestRun, hosts: u64, w: usize, load_start: &str) {
    let load_end = procfs::loadavg();
    println!();
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| submit of {} URLs over {hosts} hosts ({w} workers) | {:.1} s: **{:.0} URLs/s** (submit exit: {}) |",
        r.lines,
        r.secs,
        r.lines as f64 / r.secs.max(1e-9),
        r.submit_status
    );
    println!("| accepted | {} |", r.accepted);
    println!(
        "| bytes written per URL accepted (write_bytes) | {:.0} ({:.0} MB) |",
        r.write_bytes as f64 / r.accepted.max(1) as f64,
        mb(r.write_bytes)
    );
    println!(
        "| bytes passed to write() per URL accepted (wchar) | {:.0} ({:.0} MB) |",
        r.wchar as f64 / r.accepted.max(1) as f64,
        mb(r.wchar)
    );
    println!(
        "| daemon CPU during the submit | {:.1} s ({:.1} µs per URL) |",
        r.cpu_secs,
        r.cpu_secs * 1e6 / r.lines.max(1) as f64
    );
    println!("| VmHWM after the submit | {:.0} MB |", mb(r.vm_hwm));
    println!("| pages fetched during the submit | {} |", r.pages_during);
    println!(
        "| robots.txt fetched during the submit | {} |",
        r.robots_fetches
    );
    println!(
        "| open file descriptors after the submit | {} |",
        r.open_fds
    );
    if let Some(a) = &r.after {
        println!(
            "| crawl after the submit | {:.0} s: robots.txt fetched for {} of {hosts} hosts, {} pages fetched in all |",
            a.secs, a.robots_fetches, a.pages
        );
        println!(
            "| host journal checkpoints ended by then | {} ({} host records written) |",
            a.checkpoints, a.checkpoint_hosts
        );
        println!(
            "| VmHWM / VmRSS at the end of that crawl | **{:.0} MB** / {:.0} MB |",
            mb(a.vm_hwm),
            mb(a.vm_rss)
        );
        println!(
            "| open file descriptors at the end of that crawl | {} |",
            a.open_fds
        );
        println!(
            "| the store on disk at the end (no WARC, no crawl log) | {:.0} MB ({:.0} bytes a URL accepted) |",
            mb(a.store_bytes),
            a.store_bytes as f64 / r.accepted.max(1) as f64
        );
        if a.warc_shipped.0 > 0 {
            println!(
                "| completed WARC files deleted as they came (--ship-warc) | {} ({:.0} MB) |",
                a.warc_shipped.0,
                mb(a.warc_shipped.1)
            );
        }
    }
    println!("| load average start / end | {load_start} / {load_end} |");
}

/// One side of a crawl round.
#[derive(Clone, Copy)]
enum Side {
    Bare,
    BareWarc,
    Daemon,
}

/// One round at one --workers value of the crawl mode: what each side did, and the load
/// average after.
struct CrawlRow {
    workers: usize,
    /// The bare client's requests at once.
    concurrency: usize,
    bare: Option<client::ClientRun>,
    /// The bare client archiving as WARC (`--warc-anchor`).
    bare_warc: Option<client::ClientRun>,
    crawl: Option<daemon::CrawlRun>,
    /// The bare client held to frontierd's pages/s of the round (`--paced-anchor`).
    bare_paced: Option<client::ClientRun>,
    /// The bare client archiving, held to frontierd's pages/s.
    bare_warc_paced: Option<client::ClientRun>,
    load_after: String,
}

/// The bare hyper client over the whole list, `conc` requests at once; prints its line
/// (and what the server held in flight, when `sample_in_flight`).
fn run_bare_client(
    cli: &Cli,
    urls: &Arc<Vec<String>>,
    conc: usize,
    sample_in_flight: bool,
    port: u16,
    warc_dir: Option<&Path>,
    pace: Option<f64>,
) -> Result<client::ClientRun> {
    let sampler = sample_in_flight.then(|| server::InFlightSampler::start(port));
    let r = client::run(
        urls.clone(),
        conc,
        cli.client_threads,
        warc_dir,
        pace,
        cli.server_gzip,
    )?;
    if let Some(s) = sampler {
        println!("  bare client: {}", s.stop());
    }
    let what = match (warc_dir.is_some(), pace) {
        (true, None) => "bare hyper client + WARC".to_string(),
        (false, None) => "bare hyper client".to_string(),
        (true, Some(p)) => format!("bare hyper client + WARC held to {p:.0} pages/s"),
        (false, Some(p)) => format!("bare hyper client held to {p:.0} pages/s"),
    };
    println!(
        "{what}, {conc} at once: {} pages ({} errors, {:.0} body bytes each) in {:.2} s = {:.0} pages/s, {:.1} µs CPU/page (client only)",
        r.pages,
        r.errors,
        r.bytes as f64 / r.pages.max(1) as f64,
        r.secs,
        r.rate(),
        r.cpu_per_page() * 1e6
    );
    Ok(r)
}

/// frontierd crawling the whole list with `cfg.workers` workers (under perf with
/// --perf); prints its line, what it did not fetch and the tail of its stderr.
fn run_daemon_crawl(
    cli: &Cli,
    cfg: &DaemonConfig,
    list: &Path,
    sample_in_flight: bool,
    port: u16,
) -> Result<daemon::CrawlRun> {
    let w = cfg.workers;
    let perf_out = cli.perf.as_ref().map(|d| d.join(format!("perf-{w}.data")));
    if let Some(d) = &cli.perf {
        fs::create_dir_all(d)?;
    }
    let sampler = sample_in_flight.then(|| server::InFlightSampler::start(port));
    let r = daemon::crawl(
        cfg,
        list,
        cli.urls,
        cli.timeout,
        perf_out.as_deref().map(|o| (o, cli.perf_args.as_str())),
    )?;
    if let Some(s) = sampler {
        println!("  frontierd: {}", s.stop());
    }
    println!(
        "frontierd, {w} workers: {} pages in {:.2} s = {:.0} pages/s, {:.0} µs CPU/page, {:.2} cores, VmHWM {:.0} MB{}",
        r.pages,
        r.secs,
        r.rate(),
        r.cpu_per_page * 1e6,
        r.cores,
        mb(r.vm_hwm),
        if cli.perf.is_some() { " (under perf record)" } else { "" }
    );
    if r.other > 0 {
        println!(
            "  {} URLs not fetched, e.g. {}",
            r.other,
            r.other_example.as_deref().unwrap_or("")
        );
    }
    if !r.stderr_tail.is_empty() {
        println!("  frontierd stderr (last lines):\n{}", r.stderr_tail);
    }
    Ok(r)
}

/// The crawl mode's summary: the run's setting, then a table row per --workers value
/// (`-` for a side that was skipped).
fn print_crawl_table(
    rows: &[CrawlRow],
    server_kind: &str,
    cli: &Cli,
    hosts: u64,
    load_start: &str,
) {
    println!();
    println!(
        "server {} ({} worker(s)), {} hosts, {} URLs, latency {:?}; load average at start {load_start}",
        server_kind, cli.server_threads, hosts, cli.urls, cli.latency
    );
    println!();
    println!("| workers | bare client pages/s (at once) | frontierd pages/s | ratio | bare CPU/page | frontierd CPU/page | CPU ratio | cores busy | VmHWM | load after |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for row in rows {
        let (w, conc, load) = (row.workers, row.concurrency, &row.load_after);
        let b = row.bare.as_ref().map(|b| b.rate());
        let f = row.crawl.as_ref().map(|c| c.rate());
        let fmt = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
        let ratio = match (b, f) {
            (Some(b), Some(f)) => format!("{:.1} %", 100.0 * f / b.max(1e-9)),
            _ => "-".into(),
        };
        let bare_cpu = row.bare.as_ref().map(client::ClientRun::cpu_per_page);
        let bare_cpu_cell = bare_cpu.map_or_else(|| "-".into(), |c| format!("{:.0} µs", c * 1e6));
        let cpu_ratio = match (bare_cpu, &row.crawl) {
            (Some(b), Some(c)) if b > 0.0 => format!("{:.1}x", c.cpu_per_page / b),
            _ => "-".into(),
        };
        let (cpu, cores, rss) = match &row.crawl {
            Some(c) => (
                format!("{:.0} µs", c.cpu_per_page * 1e6),
                format!("{:.2}", c.cores),
                format!("{:.0} MB", mb(c.vm_hwm)),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "| {w} | {} ({conc}) | {} | {ratio} | {bare_cpu_cell} | {cpu} | {cpu_ratio} | {cores} | {rss} | {load} |",
            fmt(b),
            fmt(f)
        );
    }
    if rows.iter().any(|r| r.bare_warc.is_some()) {
        print_warc_anchor_table(rows);
    }
}

/// frontierd against the bare client that archives as WARC (`--warc-anchor`), and what
/// the archive costs that client.
fn print_warc_anchor_table(rows: &[CrawlRow]) {
    println!();
    println!("| workers | bare + WARC pages/s | its CPU/page (the WARC's share) | frontierd pages/s ratio | frontierd CPU ratio | frontierd CPU beyond it |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in rows {
        let Some(bw) = &row.bare_warc else { continue };
        let anchor = bw.cpu_per_page();
        let warc_share = row.bare.as_ref().map_or_else(
            || "-".into(),
            |b| format!("{:.0} µs", (anchor - b.cpu_per_page()) * 1e6),
        );
        let (ratio, cpu_ratio, beyond) = match &row.crawl {
            Some(c) => (
                format!("{:.1} %", 100.0 * c.rate() / bw.rate().max(1e-9)),
                format!("{:.1}x", c.cpu_per_page / anchor.max(1e-12)),
                format!("{:.0} µs", (c.cpu_per_page - anchor) * 1e6),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "| {} | {:.0} | {:.0} µs ({warc_share}) | {ratio} | {cpu_ratio} | {beyond} |",
            row.workers,
            bw.rate(),
            anchor * 1e6
        );
    }
}

fn print_scheduled(
    r: &scheduled::ScheduledRun,
    hosts: u64,
    workers: usize,
    cli: &Cli,
    load_start: &str,
) {
    let load_end = procfs::loadavg();
    let per_url = |b: u64| b.saturating_sub(r.idle.disk) as f64 / r.accepted.max(1) as f64;
    let fetches = |s: &scheduled::Snapshot| {
        format!(
            "{} (server) / {} (daemon metrics)",
            s.server_requests.saturating_sub(r.idle.server_requests),
            s.daemon_fetches
        )
    };
    println!();
    println!(
        "scheduled: {} URLs over {hosts} hosts, refetch_at +30 days, {} per POST, {} at once, {workers} workers",
        r.urls, cli.batch, cli.submit_conns
    );
    if !r.stderr_tail.is_empty() {
        println!("frontierd stderr (last lines):\n{}", r.stderr_tail);
    }
    println!();
    println!("| moment | VmHWM | VmRSS | on disk | fetches since the baseline |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, s) in [
        (format!("idle, nothing submitted ({:?})", cli.idle), &r.idle),
        (format!("after {} scheduled URLs", r.accepted), &r.submitted),
        (format!("{:.0} s later", r.after_secs), &r.after),
        (
            format!(
                "restarted on that data dir (up in {:.1} s), {:.0} s later",
                r.reopen_secs, r.after_secs
            ),
            &r.reopened,
        ),
    ] {
        println!(
            "| {name} | {:.0} MB | {:.0} MB | {:.0} MB | {} |",
            mb(s.vm_hwm),
            mb(s.vm_rss),
            mb(s.disk),
            fetches(s)
        );
    }
    println!();
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| submit | {:.1} s: **{:.0} URLs/s**, {} accepted, daemon CPU {:.1} s ({:.1} µs per URL) |",
        r.submit_secs,
        r.accepted as f64 / r.submit_secs.max(1e-9),
        r.accepted,
        r.submit_cpu_secs,
        r.submit_cpu_secs * 1e6 / r.accepted.max(1) as f64
    );
    println!(
        "| on disk per scheduled URL (over the idle data dir) | {:.0} bytes after the submit, {:.0} bytes {:.0} s later |",
        per_url(r.submitted.disk),
        per_url(r.after.disk),
        r.after_secs
    );
    println!(
        "| VmHWM / VmRSS over the baseline | {:+.0} / {:+.0} MB after the submit, {:+.0} / {:+.0} MB {:.0} s later |",
        mb(r.submitted.vm_hwm) - mb(r.idle.vm_hwm),
        mb(r.submitted.vm_rss) - mb(r.idle.vm_rss),
        mb(r.after.vm_hwm) - mb(r.idle.vm_hwm),
        mb(r.after.vm_rss) - mb(r.idle.vm_rss),
        r.after_secs
    );
    println!("| load average start / end | {load_start} / {load_end} |");
}
