//! Issue 16: three frontierd nodes over a real `nats-server -js` (tests/src/nats.rs; skipped
//! with a message when the binary is absent, a failure under CI=1), crawling the harness's
//! local recording sites. Which node made a request is read from its User-Agent (each node
//! has its own product token), so ownership is measured on the server's request log.
//!
//! Run: `cargo test -p frontierd-e2e --test cluster` (Debian: `apt-get install nats-server`).

use std::collections::{BTreeMap, HashMap};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::ShardMap;
use frontier::PolitenessKeyMode;
use frontierd_e2e::nats::NatsServer;
use frontierd_e2e::{
    crawl_log, frontierd_bin, logged, metric, wait_until, Daemon, Env, Hit, Reply, Req, Rng, Site,
};

const SHARDS: u32 = 12;
/// Node i owns shards 4i to 4i+3.
const OWNED: [&str; 3] = ["0-3", "4-7", "8-11"];
const NODES: usize = 3;
/// `politeness.min_delay` of every node: the per-host gap the server must see.
const GAP: Duration = Duration::from_millis(200);
/// The daemon counts time in whole milliseconds.
const CLOCK_SLACK: Duration = Duration::from_millis(2);
/// Links are followed to any host.
const FOLLOW_ANY: [(&str, &str, &str); 2] = [
    ("scope", "follow_links", "true"),
    ("scope", "mode", "\"any\""),
];
const CRAWL_DEADLINE: Duration = Duration::from_secs(180);

fn shard_map() -> ShardMap {
    ShardMap::new(SHARDS, PolitenessKeyMode::Host).unwrap()
}

/// The node that owns `url`'s host.
fn owner(url: &str) -> usize {
    (shard_map().shard_of_url(url, 8 * 1024).unwrap() / 4) as usize
}

/// `per_node` host names for each node, by the shard map (`<prefix>NN.site.test`).
fn hosts_by_owner(prefix: &str, per_node: usize, site: &Site) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); NODES];
    for n in 0..1000 {
        let host = format!("{prefix}{n:02}.site.test");
        let o = owner(&site.base(&host));
        if out[o].len() < per_node {
            out[o].push(host);
        }
        if out.iter().all(|h| h.len() == per_node) {
            return out;
        }
    }
    panic!("the shard map did not give every node {per_node} hosts");
}

/// Every request a site answered, with the node that made it (from its User-Agent).
#[derive(Clone, Default)]
struct ByNode(Arc<Mutex<Vec<(String, String, usize)>>>);

impl ByNode {
    fn site(&self, handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Site {
        let log = self.clone();
        Site::start(move |req| {
            let node = req.node();
            log.0
                .lock()
                .unwrap()
                .push((req.host.clone(), req.path.clone(), node));
            handler(req)
        })
    }

    /// Nodes that requested pages (robots.txt aside) of each host.
    fn nodes_per_host(&self) -> BTreeMap<String, Vec<usize>> {
        let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (host, path, node) in self.0.lock().unwrap().iter() {
            if path != "/robots.txt" {
                let nodes = out.entry(host.clone()).or_default();
                if !nodes.contains(node) {
                    nodes.push(*node);
                }
            }
        }
        out
    }
}

/// A node's environment: its own user agent, data directory and `[cluster]` section.
fn node_env(nats: &NatsServer, i: usize, extra: &[(&str, &str, &str)]) -> Env {
    let ua = format!("\"frontierd-n{i}/0.1 (+https://example.org/bot)\"");
    let node_id = format!("\"n{i}\"");
    let url = format!("{:?}", nats.url());
    let owned = format!("{:?}", OWNED[i]);
    let min_delay = format!("\"{}ms\"", GAP.as_millis());
    let mut o: Vec<(&str, &str, &str)> = vec![
        ("fetch", "user_agent", &ua),
        ("politeness", "min_delay", &min_delay),
        ("politeness", "max_delay", "\"30s\""),
        ("politeness", "max_in_flight_per_host", "1"),
        ("cluster", "enabled", "true"),
        ("cluster", "node_id", &node_id),
        ("cluster", "nats_url", &url),
        ("cluster", "shards", "12"),
        ("cluster", "owned_shards", &owned),
        // a delivery not acknowledged (a killed node) comes back after 2 s
        ("cluster", "ack_wait_ms", "2000"),
        ("cluster", "status_interval", "\"500ms\""),
    ];
    o.extend_from_slice(extra);
    Env::new(&o)
}

/// `frontierd publish FILE --config <node's config>`.
fn publish(env: &Env, name: &str, urls: &[String]) -> Output {
    let file = env.dir.path().join(name);
    std::fs::write(&file, urls.join("\n") + "\n").unwrap();
    env.cli("publish")
        .arg(&file)
        .output()
        .expect("run frontierd publish")
}

fn assert_published(out: &Output, n: usize) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "publish failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("published {n}  rejected 0")),
        "{stdout}"
    );
}

/// Every node's crawl log lines, in node order.
fn logs(envs: &[Env]) -> Vec<Vec<serde_json::Value>> {
    envs.iter()
        .map(|e| crawl_log(&e.crawl_log_path()))
        .collect()
}

/// Nodes whose crawl log says `url` was fetched.
fn fetched_by(logs: &[Vec<serde_json::Value>], url: &str) -> Vec<usize> {
    (0..logs.len())
        .filter(|&i| logged(&logs[i], url, "fetched"))
        .collect()
}

fn all_fetched(envs: &[Env], urls: &[String]) -> bool {
    let l = logs(envs);
    urls.iter().all(|u| !fetched_by(&l, u).is_empty())
}

/// How many times the server answered each (host, path) of a page.
fn page_hits(site: &Site) -> HashMap<(String, String), usize> {
    let mut out = HashMap::new();
    for h in site.hits() {
        if h.path != "/robots.txt" {
            *out.entry((h.host, h.path)).or_default() += 1;
        }
    }
    out
}

fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/".into(), |i| rest[i..].to_string())
}

fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', ':']).next().unwrap_or("").to_string()
}

/// Consecutive requests to one host never closer than [`GAP`] (start of the next after the
/// answer to the previous began: a lower bound of the crawler's pause).
fn assert_gaps(site: &Site, host: &str) {
    let hits: Vec<Hit> = site.hits_for(host);
    for pair in hits.windows(2) {
        let Some(sent) = pair[0].sent else { continue };
        let gap = pair[1].start.saturating_duration_since(sent);
        assert!(
            gap + CLOCK_SLACK >= GAP,
            "{host}: {} then {} only {gap:?} apart",
            pair[0].path,
            pair[1].path
        );
    }
}

/// [`wait_until`] for a crawl condition; on timeout the failure shows each node's cluster
/// metrics and the end of its log, which say where URLs stopped.
fn wait_crawl(envs: &[Env], what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        if start.elapsed() > deadline {
            for (i, e) in envs.iter().enumerate() {
                let log = e.daemon_log();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!(
                    "---- node n{i}, last log lines (newest first):\n{}",
                    tail.join("\n")
                );
                if let Ok(addr) = std::fs::read_to_string(e.data.join("admin.addr")) {
                    let (_, m) = frontierd_e2e::http(addr.trim(), "GET", "/metrics", b"");
                    let c: Vec<&str> = m
                        .lines()
                        .filter(|l| l.starts_with("frontierd_cluster") && !l.contains("shard"))
                        .collect();
                    eprintln!("---- node n{i} metrics:\n{}", c.join("\n"));
                }
            }
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn node_metric(d: &Daemon, name: &str) -> f64 {
    metric(&d.metrics(), name).unwrap_or(0.0)
}

/// Publish a raw list to `frontierd.intake` with a NATS client, as a script would.
fn publish_raw_to_intake(nats: &NatsServer, body: Vec<u8>) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let settings = cluster::ClusterConfig::single_node("feeder", &nats.url(), SHARDS)
            .validate(PolitenessKeyMode::Host)
            .unwrap();
        let (client, _) = cluster::connect(&settings).await.unwrap();
        let js = cluster::jetstream(client);
        cluster::ensure_streams(&js, &settings).await.unwrap();
        js.publish(cluster::INTAKE_SUBJECT, body.into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
}

fn plain_pages(req: &Req) -> Reply {
    if req.path.starts_with("/p") {
        Reply::html(format!("<p>page {} of {}</p>", req.path, req.host))
    } else {
        Reply::not_found()
    }
}

#[test]
fn published_seeds_are_crawled_once_each_and_every_host_only_by_its_owner() {
    let Some(nats) = NatsServer::start() else {
        return;
    };
    let by_node = ByNode::default();
    let site = by_node.site(plain_pages);
    let hosts: Vec<String> = hosts_by_owner("s", 3, &site).concat();
    let envs: Vec<Env> = (0..NODES).map(|i| node_env(&nats, i, &[])).collect();
    let daemons: Vec<Daemon> = envs.iter().map(|e| e.start()).collect();
    let pages: Vec<String> = hosts
        .iter()
        .flat_map(|h| (0..6).map(move |p| (h.clone(), p)))
        .map(|(h, p)| format!("{}/p{p}", site.base(&h)))
        .collect();
    let (via_cli, via_intake) = pages.split_at(pages.len() / 2);
    // a seed list through `frontierd publish` (node 0's configuration; any node's would do)
    assert_published(&publish(&envs[0], "seeds.txt", via_cli), via_cli.len());
    // the other half as a raw list on frontierd.intake, routed by the nodes' routers, with
    // a comment and a line that is not UTF-8 (rejected by number, never crashes anything)
    let mut raw = b"# from another system\n".to_vec();
    raw.extend_from_slice(b"http://bad.site.test/caf\xe9\n");
    for u in via_intake {
        raw.extend_from_slice(u.as_bytes());
        raw.push(b'\n');
    }
    publish_raw_to_intake(&nats, raw);

    wait_crawl(&envs, "every seed fetched", CRAWL_DEADLINE, || {
        all_fetched(&envs, &pages)
    });
    let l = logs(&envs);
    let hits = page_hits(&site);
    for u in &pages {
        // once cluster-wide, on the server and in the crawl logs
        assert_eq!(hits.get(&(host_of(u), path_of(u))), Some(&1), "{u}");
        assert_eq!(fetched_by(&l, u), vec![owner(u)], "{u}");
    }
    for (host, nodes) in by_node.nodes_per_host() {
        let expected = owner(&site.base(&host));
        assert_eq!(nodes, vec![expected], "{host} requested by nodes {nodes:?}");
        assert_gaps(&site, &host);
    }
    assert!(!by_node.nodes_per_host().contains_key("bad.site.test"));
    let rejected: f64 = daemons
        .iter()
        .map(|d| {
            node_metric(
                d,
                "frontierd_cluster_lines_rejected_total{reason=\"not-utf8\"}",
            )
        })
        .sum();
    assert_eq!(rejected, 1.0, "the non-UTF-8 line, rejected once");
    let received: f64 = daemons
        .iter()
        .map(|d| node_metric(d, "frontierd_cluster_urls_received_total"))
        .sum();
    assert!(received >= pages.len() as f64, "{received}");
    // each crawl-log record is also published to frontierd.events.<node>
    wait_until(
        "every crawl-log record published",
        Duration::from_secs(30),
        || {
            daemons.iter().zip(&envs).all(|(d, e)| {
                node_metric(d, "frontierd_cluster_events_published_total")
                    >= e.crawl_log().len() as f64
            })
        },
    );
    let status = std::process::Command::new(frontierd_bin())
        .args(["cluster", "status", "--config"])
        .arg(&envs[1].config)
        .output()
        .expect("frontierd cluster status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    for i in 0..NODES {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("n{i} "))),
            "node n{i} missing:\n{text}"
        );
    }
    for shard in 0..SHARDS {
        let want = format!("{shard:<5}  n{} ", shard / 4);
        assert!(
            text.lines().any(|l| l.starts_with(&want)),
            "{want:?} missing:\n{text}"
        );
    }
}

/// Pages of a hub host link to pages of hosts every node owns, and redirect to one.
#[test]
fn discovered_links_and_redirects_cross_nodes_and_are_crawled_by_their_owners() {
    let Some(nats) = NatsServer::start() else {
        return;
    };
    let by_node = ByNode::default();
    let site = by_node.site(plain_pages);
    let owned = hosts_by_owner("x", 2, &site);
    let hub = owned[0][0].clone();
    let targets: Vec<String> = vec![
        owned[0][1].clone(),
        owned[1][0].clone(),
        owned[2][0].clone(),
    ];
    let linked: Vec<String> = targets
        .iter()
        .flat_map(|h| (0..3).map(move |p| (h.clone(), p)))
        .map(|(h, p)| format!("{}/p{p}", site.base(&h)))
        .collect();
    let redirect_target = format!("{}/p9", site.base(&owned[1][1]));
    let hub_page = format!("{}/p0", site.base(&hub));
    let hub_redirect = format!("{}/r", site.base(&hub));
    {
        let links: String = linked
            .iter()
            .map(|u| format!("<a href=\"{u}\">x</a>"))
            .collect();
        let (hub_host, target) = (hub.clone(), redirect_target.clone());
        site.set_handler(move |req| {
            if req.host == hub_host && req.path == "/p0" {
                Reply::html(format!("<p>hub</p>{links}"))
            } else if req.host == hub_host && req.path == "/r" {
                Reply::redirect(302, &target)
            } else {
                plain_pages(req)
            }
        });
    }
    let envs: Vec<Env> = (0..NODES)
        .map(|i| node_env(&nats, i, &FOLLOW_ANY))
        .collect();
    let daemons: Vec<Daemon> = envs.iter().map(|e| e.start()).collect();
    assert_published(
        &publish(
            &envs[2],
            "seeds.txt",
            &[hub_page.clone(), hub_redirect.clone()],
        ),
        2,
    );
    let mut expected = linked.clone();
    expected.push(redirect_target.clone());
    wait_crawl(&envs, "every linked page fetched", CRAWL_DEADLINE, || {
        all_fetched(&envs, &expected)
    });
    let l = logs(&envs);
    let hits = page_hits(&site);
    for u in &expected {
        let o = owner(u);
        assert_eq!(fetched_by(&l, u), vec![o], "{u}");
        assert_eq!(hits.get(&(host_of(u), path_of(u))), Some(&1), "{u}");
        let line = l[o]
            .iter()
            .find(|v| v["url"] == u.as_str() && v["outcome"] == "fetched")
            .unwrap();
        // a link is one deeper than its page; a redirect target keeps its page's depth
        let (via, depth) = if u == &redirect_target {
            (&hub_redirect, 0)
        } else {
            (&hub_page, 1)
        };
        assert_eq!(line["via"], via.as_str(), "{line}");
        assert_eq!(line["depth"], depth, "{line}");
    }
    for (host, nodes) in by_node.nodes_per_host() {
        assert_eq!(nodes, vec![owner(&site.base(&host))], "{host}");
    }
    // node 0 fetched the hub: it sent 7 links to other nodes (6 links + the redirect target)
    // through its outbox and kept 3 (its own host's pages)
    let m = daemons[0].metrics();
    assert_eq!(
        metric(&m, "frontierd_cluster_links_total{to=\"remote\"}"),
        Some(7.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "frontierd_cluster_links_total{to=\"local\"}"),
        Some(3.0)
    );
    assert_eq!(
        metric(
            &m,
            "frontierd_cluster_urls_published_total{source=\"links\"}"
        ),
        Some(7.0)
    );
    assert_eq!(metric(&m, "frontierd_cluster_outbox_urls"), Some(0.0));
}

/// A chain crawl: 6 hosts (2 per node), seeds p0 to p(n-1) of each; page pN links to
/// p(N+n) of the next host (another node's), so half the pages are only reachable across
/// nodes. `/late<N>` paths are plain pages too.
fn chain_site(by_node: &ByNode, n: usize) -> (Site, Vec<String>, Vec<String>) {
    let site = by_node.site(plain_pages);
    let hosts: Vec<String> = {
        let owned = hosts_by_owner("k", 2, &site);
        // interleaved, so the next host is always another node's
        (0..2)
            .flat_map(|j| owned.iter().map(move |o| o[j].clone()))
            .collect()
    };
    let bases: Vec<String> = hosts.iter().map(|h| site.base(h)).collect();
    let next_of: HashMap<String, String> = (0..hosts.len())
        .map(|i| (hosts[i].clone(), bases[(i + 1) % hosts.len()].clone()))
        .collect();
    site.set_handler(move |req| {
        if req.path.starts_with("/late") {
            return Reply::html("<p>late</p>");
        }
        let page: Option<usize> = req.path.strip_prefix("/p").and_then(|p| p.parse().ok());
        match (page, next_of.get(&req.host)) {
            (Some(p), Some(next)) if p < n => {
                Reply::html(format!("<p>{p}</p><a href=\"{next}/p{}\">next</a>", p + n))
            }
            (Some(_), _) => Reply::html("<p>leaf</p>"),
            _ => Reply::not_found(),
        }
    });
    let seeds: Vec<String> = bases
        .iter()
        .flat_map(|b| (0..n).map(move |p| format!("{b}/p{p}")))
        .collect();
    let all: Vec<String> = bases
        .iter()
        .flat_map(|b| (0..2 * n).map(move |p| format!("{b}/p{p}")))
        .collect();
    (site, seeds, all)
}

#[test]
fn kill_9_of_nodes_mid_crawl_loses_no_acknowledged_url() {
    let Some(nats) = NatsServer::start() else {
        return;
    };
    let by_node = ByNode::default();
    let (site, seeds, all) = chain_site(&by_node, 30);
    let envs: Vec<Env> = (0..NODES)
        .map(|i| node_env(&nats, i, &FOLLOW_ANY))
        .collect();
    let mut daemons: Vec<Option<Daemon>> = envs.iter().map(|e| Some(e.start())).collect();
    // acknowledged by the broker once publish exits 0
    assert_published(&publish(&envs[0], "seeds.txt", &seeds), seeds.len());
    let mut rng = Rng::new();
    let kills = 5;
    for k in 0..kills {
        std::thread::sleep(rng.ms(300, 1500));
        // mid-crawl: every host has at least 60 pages x 200 ms of gaps to go through
        let done = page_hits(&site).len();
        assert!(done < all.len(), "the crawl ended before kill #{k}");
        let victim = (rng.next_u64() % NODES as u64) as usize;
        eprintln!("kill -9 #{k}: node n{victim}");
        daemons[victim].take().unwrap().kill9();
        daemons[victim] = Some(envs[victim].start());
    }
    wait_crawl(
        &envs,
        "every page fetched after the kills",
        CRAWL_DEADLINE,
        || all_fetched(&envs, &all),
    );
    let hits = page_hits(&site);
    let mut refetched = 0;
    for u in &all {
        let n = hits.get(&(host_of(u), path_of(u))).copied().unwrap_or(0);
        assert!(n >= 1, "{u} never requested");
        refetched += n - 1;
    }
    // only pages in flight at a kill are fetched again: a node has at most one request in
    // flight per host (max_in_flight_per_host = 1) and owns 2 hosts
    assert!(
        refetched <= kills * 2,
        "{refetched} refetches after {kills} kills"
    );
    for (host, nodes) in by_node.nodes_per_host() {
        assert_eq!(nodes, vec![owner(&site.base(&host))], "{host}");
    }
}

#[test]
fn broker_killed_and_restarted_mid_crawl_loses_nothing_and_intake_resumes() {
    let Some(mut nats) = NatsServer::start() else {
        return;
    };
    let by_node = ByNode::default();
    let (site, seeds, all) = chain_site(&by_node, 10);
    let envs: Vec<Env> = (0..NODES)
        .map(|i| node_env(&nats, i, &FOLLOW_ANY))
        .collect();
    let daemons: Vec<Daemon> = envs.iter().map(|e| e.start()).collect();
    assert_published(&publish(&envs[0], "seeds.txt", &seeds), seeds.len());
    let fetched = || page_hits(&site).len();
    wait_until("the crawl under way", CRAWL_DEADLINE, || fetched() >= 10);
    nats.kill(0);
    let at_kill = fetched();
    // the local crawl goes on from each node's store; links for other nodes wait in outboxes
    wait_until(
        "pages fetched while the broker is down",
        Duration::from_secs(60),
        || fetched() >= at_kill + 6,
    );
    wait_until(
        "every node paused its broker work",
        Duration::from_secs(30),
        || {
            daemons.iter().all(|d| {
                node_metric(d, "frontierd_cluster_broker_connected") == 0.0
                    && node_metric(d, "frontierd_cluster_broker_disconnects_total") >= 1.0
            })
        },
    );
    nats.restart(0);
    // intake resumes by itself: a list published after the restart is crawled too
    let late: Vec<String> = all
        .iter()
        .map(|u| u.replace("/p", "/late"))
        .step_by(10)
        .collect();
    assert_published(&publish(&envs[1], "late.txt", &late), late.len());
    let mut everything = all.clone();
    everything.extend(late.iter().cloned());
    wait_crawl(
        &envs,
        "every page fetched after the restart",
        CRAWL_DEADLINE,
        || all_fetched(&envs, &everything),
    );
    let l = logs(&envs);
    for u in &everything {
        assert_eq!(fetched_by(&l, u), vec![owner(u)], "{u}");
    }
    for (host, nodes) in by_node.nodes_per_host() {
        assert_eq!(nodes, vec![owner(&site.base(&host))], "{host}");
    }
    // (whether an activity hit an error and paused depends on what it was doing during the
    // outage: a publish the client buffered through a short outage succeeds)
    wait_until(
        "every node connected again",
        Duration::from_secs(30),
        || {
            daemons
                .iter()
                .all(|d| node_metric(d, "frontierd_cluster_broker_connected") == 1.0)
        },
    );
}

#[test]
fn a_three_server_broker_with_replicated_streams_loses_a_server_and_the_crawl_goes_on() {
    let Some(mut nats) = NatsServer::start_cluster() else {
        return;
    };
    let by_node = ByNode::default();
    let (site, seeds, all) = chain_site(&by_node, 15);
    let mut extra = FOLLOW_ANY.to_vec();
    extra.push(("cluster", "replicas", "3"));
    let envs: Vec<Env> = (0..NODES).map(|i| node_env(&nats, i, &extra)).collect();
    let _daemons: Vec<Daemon> = envs.iter().map(|e| e.start()).collect();
    assert_published(&publish(&envs[0], "seeds.txt", &seeds), seeds.len());
    wait_until("the crawl under way", CRAWL_DEADLINE, || {
        page_hits(&site).len() >= 10
    });
    // each stream has 3 replicas: losing one server leaves a RAFT majority
    nats.kill(0);
    assert!(
        page_hits(&site).len() < all.len(),
        "the crawl ended before the kill"
    );
    wait_crawl(
        &envs,
        "every page fetched with a server down",
        CRAWL_DEADLINE,
        || all_fetched(&envs, &all),
    );
    let l = logs(&envs);
    for u in &all {
        assert_eq!(fetched_by(&l, u), vec![owner(u)], "{u}");
    }
    for (host, nodes) in by_node.nodes_per_host() {
        assert_eq!(nodes, vec![owner(&site.base(&host))], "{host}");
    }
}

#[test]
fn a_node_configured_for_another_shard_count_stops_with_an_error() {
    let Some(nats) = NatsServer::start() else {
        return;
    };
    let first = node_env(&nats, 0, &[]);
    let _running = first.start();
    let envs = [first];
    wait_crawl(
        &envs,
        "node n0 set up the streams",
        Duration::from_secs(60),
        || envs[0].daemon_log_count("cluster streams ready") >= 1,
    );
    let wrong = node_env(
        &nats,
        1,
        &[
            ("cluster", "shards", "8"),
            ("cluster", "owned_shards", "\"0-7\""),
        ],
    );
    let mut d = wrong.start();
    let status = d
        .wait_exit(Duration::from_secs(60))
        .expect("the node with 8 shards keeps running");
    assert_eq!(status.code(), Some(2), "{}", wrong.daemon_log());
    let log = wrong.daemon_log();
    assert!(
        log.contains("was created for 12 shards, this node is configured for 8"),
        "{log}"
    );
}

/// `frontierd publish --retry-for` waits for a broker that is down when it starts (a broker
/// restarting): started before the broker, it publishes every line once the broker answers
/// (exit 0); with the broker never back, it exits 2 after `--retry-for`, saying that no line
/// was published.
#[test]
fn publish_waits_for_a_broker_that_is_down_at_start() {
    let Some(mut nats) = NatsServer::start() else {
        return;
    };
    let env = node_env(&nats, 0, &[]);
    nats.kill(0);
    let urls: Vec<String> = (0..20)
        .map(|i| format!("http://h{i}.site.test:9/late"))
        .collect();
    let file = env.dir.path().join("late.txt");
    std::fs::write(&file, urls.join("\n") + "\n").unwrap();

    // never back within --retry-for: exit 2, nothing published, and it says so
    let gave_up = env
        .cli("publish")
        .arg(&file)
        .args(["--retry-for", "1s"])
        .output()
        .expect("run frontierd publish");
    let stderr = String::from_utf8_lossy(&gave_up.stderr);
    assert_eq!(gave_up.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no line was published") && stderr.contains("trying again"),
        "{stderr}"
    );

    // back 1.5 s after the start: everything published
    let child = env
        .cli("publish")
        .arg(&file)
        .args(["--retry-for", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run frontierd publish");
    std::thread::sleep(Duration::from_millis(1500));
    nats.restart(0);
    let out = child.wait_with_output().expect("publish output");
    assert_published(&out, 20);
}

/// A node whose disk is low takes nothing from its shards: each delivery is given back to
/// the broker (nak with a delay), nothing is committed, nothing fetched, and nothing is
/// lost: the same node started again with room takes and crawls every URL.
#[test]
fn a_node_with_a_low_disk_gives_its_shard_messages_back_and_loses_none() {
    let Some(nats) = NatsServer::start() else {
        return;
    };
    let by_node = ByNode::default();
    let site = by_node.site(plain_pages);
    let hosts: Vec<String> = (0..4).map(|i| format!("low{i}.site.test")).collect();
    let urls: Vec<String> = hosts
        .iter()
        .map(|h| format!("{}/p", site.base(h)))
        .collect();
    // every filesystem is below 100 % free: low from the start
    let low = [
        ("cluster", "owned_shards", "\"0-11\""),
        ("disk", "pause_below_percent", "100.0"),
        ("disk", "resume_above_percent", "100.0"),
    ];
    let env = node_env(&nats, 0, &low);
    let d = env.start();
    assert_published(&publish(&env, "low.txt", &urls), urls.len());
    wait_until("deliveries given back", Duration::from_secs(30), || {
        node_metric(&d, "frontierd_disk_intake_refused_total{door=\"cluster\"}") >= 1.0
    });
    assert_eq!(
        node_metric(&d, "frontierd_cluster_urls_received_total"),
        0.0,
        "nothing committed while low"
    );
    assert!(
        by_node.nodes_per_host().is_empty(),
        "nothing fetched while low"
    );
    d.signal(libc::SIGTERM);
    drop(d);

    // room again (the default thresholds): the messages come back and are crawled
    let ok = [("cluster", "owned_shards", "\"0-11\"")];
    let env2 = node_env(&nats, 0, &ok);
    let _d = env2.start();
    wait_crawl(
        std::slice::from_ref(&env2),
        "every URL fetched",
        CRAWL_DEADLINE,
        || all_fetched(std::slice::from_ref(&env2), &urls),
    );
}

/// One node SIGKILLed and started again at once, ten times at random moments (100-600 ms
/// apart): no host of the crawl is ever asked sooner than its gap after the answer before,
/// or after the kill when the kill cut a request off, and pages asked twice are at most
/// those the kills could have had in flight (issue 36).
#[test]
fn a_node_killed_and_restarted_at_once_ten_times_never_breaks_a_gap() {
    let Some(nats) = NatsServer::start() else {
        return;
    };
    let by_node = ByNode::default();
    let (site, seeds, all) = chain_site(&by_node, 30);
    let envs: Vec<Env> = (0..NODES)
        .map(|i| node_env(&nats, i, &FOLLOW_ANY))
        .collect();
    let mut daemons: Vec<Option<Daemon>> = envs.iter().map(|e| Some(e.start())).collect();
    assert_published(&publish(&envs[0], "seeds.txt", &seeds), seeds.len());
    let mut rng = Rng::new();
    let victim = (rng.next_u64() % NODES as u64) as usize;
    let mut kills = Vec::new();
    for _ in 0..10 {
        std::thread::sleep(rng.ms(100, 600));
        daemons[victim].take().unwrap().kill9();
        kills.push(std::time::Instant::now());
        daemons[victim] = Some(envs[victim].start());
    }
    wait_crawl(
        &envs,
        "every page fetched after the kills",
        CRAWL_DEADLINE,
        || all_fetched(&envs, &all),
    );
    let hits = page_hits(&site);
    let refetched: usize = all
        .iter()
        .map(|u| {
            hits.get(&(host_of(u), path_of(u)))
                .copied()
                .unwrap_or(0)
                .saturating_sub(1)
        })
        .sum();
    // a node has at most one request in flight per host and owns 2 hosts
    assert!(
        refetched <= kills.len() * 2,
        "{refetched} refetches after 10 kills of n{victim}"
    );
    for host in by_node.nodes_per_host().keys() {
        frontierd_e2e::assert_gaps_across_kills(&site.hits_for(host), host, GAP, GAP, &kills);
    }
}
