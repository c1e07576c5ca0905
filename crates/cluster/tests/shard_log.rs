//! A shard's log against a real `nats-server -js` (common/mod.rs: skipped with a message
//! when the binary is absent, a failure under CI=1): appended entries read back folded, a
//! compaction keeps the fold and what was appended after it, shards' logs are apart, and
//! done entries appended after a read reach the reader.

mod common;

use cluster::{url_key, LogEntry, ShardLog, UrlRecord};
use common::{node_settings, NatsServer};

fn queued(url: &str) -> LogEntry {
    LogEntry::Queued(UrlRecord::seed(url))
}

fn pending(f: &cluster::Folded) -> Vec<String> {
    f.pending.iter().map(|r| r.url.clone()).collect()
}

/// Connected to `server`, the streams set up (8 shards).
async fn streams(server: &NatsServer) -> (cluster::JetStream, cluster::ShardMap) {
    let settings = node_settings(server, "a", 8, "0-7");
    let (client, _) = cluster::connect(&settings).await.expect("connect");
    let js = cluster::jetstream(client);
    cluster::ensure_streams(&js, &settings)
        .await
        .expect("streams");
    (js, settings.shard_map)
}

/// A journal on the 8 shards' logs, and leases on all of them for a minute.
fn journal_holding_every_shard(
    js: &cluster::JetStream,
    map: cluster::ShardMap,
) -> (cluster::Journal, cluster::Ownership) {
    let journal = cluster::Journal::new(ShardLog::new(js.clone()), map, 2048);
    let ownership = cluster::Ownership::leased(map);
    for s in 0..8 {
        ownership.grant(s, std::time::Duration::ZERO, ownership.now_ms() + 60_000);
    }
    (journal, ownership)
}

#[tokio::test]
async fn a_log_reads_back_folded_and_compaction_keeps_the_fold_and_later_entries() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (js, _) = streams(&server).await;
    let log = ShardLog::new(js.clone());
    assert_eq!(log.read(3).await.unwrap().last_sequence, 0, "empty log");

    // 30 000 URLs (several messages), two thirds done, in many appends
    let urls: Vec<String> = (0..30_000)
        .map(|i| format!("http://h{}.site.test/p{i}", i % 50))
        .collect();
    for chunk in urls.chunks(5_000) {
        let entries: Vec<LogEntry> = chunk.iter().map(|u| queued(u)).collect();
        log.append(3, &entries).await.unwrap();
    }
    let done: Vec<u64> = urls.iter().take(20_000).map(|u| url_key(u)).collect();
    log.append(3, &[LogEntry::Done(done)]).await.unwrap();
    // another shard's log is its own
    log.append(4, &[queued("http://other.site.test/")])
        .await
        .unwrap();

    let before = log.read(3).await.unwrap();
    assert_eq!(pending(&before), urls[20_000..].to_vec());
    assert_eq!(before.done.len(), 20_000);
    assert_eq!(before.unreadable, 0);

    let c = log.compact(3).await.unwrap();
    assert_eq!(c.lines_before, 30_001);
    assert!(c.lines_after < 10_010, "{c:?}");
    // appended after the compaction: kept, after the fold
    log.append(3, &[LogEntry::Done(vec![url_key(&urls[25_000])])])
        .await
        .unwrap();
    let after = log.read(3).await.unwrap();
    let mut want = urls[20_000..].to_vec();
    want.retain(|u| u != &urls[25_000]);
    assert_eq!(pending(&after), want);
    assert_eq!(after.done.len(), 20_001);
    assert!(
        after.lines <= c.lines_after + 1,
        "the old lines were purged"
    );
    assert_eq!(
        pending(&log.read(4).await.unwrap()),
        ["http://other.site.test/"]
    );
}

#[tokio::test]
async fn a_pages_done_entry_waits_for_the_links_it_found_to_leave_the_outbox() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (js, map) = streams(&server).await;
    let (journal, ownership) = journal_holding_every_shard(&js, map);
    let page = "http://a.site.test/p";
    let shard = map.shard_of_url(page, 2048).unwrap();
    // the page found links for other nodes, outbox sequence numbers 3..5: its done entry
    // waits while link 3 is still in the outbox; a link found on it for this node does not
    journal.queued([UrlRecord::seed("http://a.site.test/found")]);
    journal.done(page, 5);
    let a = journal.append_waiting(&ownership, 3).await.unwrap();
    assert_eq!((a.entries, a.held_back), (1, 1));
    let log = ShardLog::new(js);
    let f = log.read(shard).await.unwrap();
    assert_eq!(pending(&f), ["http://a.site.test/found"]);
    assert!(
        f.done.is_empty(),
        "marked done while its links could still be lost"
    );
    // the links published: the outbox's oldest is 5 now
    let a = journal.append_waiting(&ownership, 5).await.unwrap();
    assert_eq!((a.entries, a.held_back), (1, 0));
    assert!(log.read(shard).await.unwrap().done.contains(&url_key(page)));
}

/// The daemon's stop aborts the task appending: the entries it had taken are not lost with
/// it, the stop's last append stores them (else their pages' next holder fetches them
/// again).
#[tokio::test]
async fn entries_of_an_append_dropped_midway_are_stored_by_the_next() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (js, map) = streams(&server).await;
    let (journal, ownership) = journal_holding_every_shard(&js, map);
    let pages: Vec<String> = (0..16)
        .map(|h| format!("http://h{h}.site.test/fail"))
        .collect();
    journal.queued(pages.iter().map(UrlRecord::seed));
    for p in &pages {
        journal.done(p, 0);
    }
    // polled once, then dropped while it waits for the broker's first acknowledgement
    let dropped = tokio::time::timeout(
        std::time::Duration::ZERO,
        journal.append_waiting(&ownership, 0),
    )
    .await;
    assert!(dropped.is_err(), "the append was not dropped midway");
    journal.append_waiting(&ownership, 0).await.unwrap();
    let log = ShardLog::new(js);
    for p in &pages {
        let f = log.read(map.shard_of_url(p, 2048).unwrap()).await.unwrap();
        assert!(f.done.contains(&url_key(p)), "{p}: its done entry was lost");
        assert!(pending(&f).is_empty(), "{p}: pending again");
    }
}

#[tokio::test]
async fn done_entries_of_the_log_stop_a_url_queued_here_from_being_fetched_and_own_ones_are_not_late(
) {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let (js, map) = streams(&server).await;
    let log = ShardLog::new(js.clone());
    let (early, late, other, mine) = (
        "http://b.site.test/early",
        "http://b.site.test/late",
        "http://b.site.test/other",
        "http://b.site.test/mine",
    );
    let shard = map.shard_of_url(early, 2048).unwrap();
    // the last holder's log when this node reads it: four URLs queued, one done
    let entries: Vec<LogEntry> = [early, late, other, mine]
        .iter()
        .map(|u| queued(u))
        .collect();
    log.append(shard, &entries).await.unwrap();
    log.append(shard, &[LogEntry::Done(vec![url_key(early)])])
        .await
        .unwrap();
    let (journal, ownership) = journal_holding_every_shard(&js, map);
    assert!(!journal.fetched_elsewhere(early), "nothing inherited yet");
    let read = log.read(shard).await.unwrap();
    journal.inherit(shard, read.done.clone());
    journal.start_late_watch(shard);
    assert_eq!(pending(&read), [late, other, mine]);
    // this node had `early` queued from before (its own store, kept over a restart): the
    // last holder fetched it, so it is not fetched here
    assert!(
        journal.fetched_elsewhere(early),
        "done when the log was read"
    );
    let (none, at) = log.done_after(shard, read.last_sequence).await.unwrap();
    assert!(none.is_empty());
    assert_eq!(at, read.last_sequence, "nothing after the read");
    assert!(!journal.fetched_elsewhere(late), "no late entry yet");

    // this node fetches `mine`; the last holder reaches the broker again and appends its
    // last page's done entry
    journal.done(mine, 0);
    journal.append_waiting(&ownership, u64::MAX).await.unwrap();
    log.append(shard, &[LogEntry::Done(vec![url_key(late)])])
        .await
        .unwrap();
    let (keys, at) = log.done_after(shard, read.last_sequence).await.unwrap();
    assert!(at > read.last_sequence);
    assert_eq!(keys.len(), 2, "this node's done entry and the late one");
    assert_eq!(
        journal.inherit_late(shard, keys.clone()),
        1,
        "only the last holder's entry is late"
    );
    assert_eq!(journal.inherit_late(shard, keys), 0, "known already");
    assert!(
        journal.fetched_elsewhere(late),
        "fetched by the last holder"
    );
    assert!(!journal.fetched_elsewhere(other));
    assert!(
        journal.fetched_elsewhere(late),
        "asked again, the same answer"
    );
    // and a link to it found here later is not queued again
    let mut links = vec![late.to_string(), other.to_string()];
    assert_eq!(journal.drop_done(&mut links, |u| u.as_str()), 1);
    assert_eq!(links, [other]);
    // once the watch is over, a done entry of this node's counts as new (the watch is what
    // tells them apart)
    journal.end_late_watch(shard);
    let own_again: std::collections::HashSet<u64> = [url_key(mine)].into();
    assert_eq!(journal.inherit_late(shard, own_again), 1);
    // a shard given up forgets them
    journal.forget(shard);
    assert!(
        !journal.fetched_elsewhere(early),
        "forgotten with the shard"
    );
    let again: std::collections::HashSet<u64> = [url_key(other)].into();
    assert_eq!(journal.inherit_late(shard, again), 0, "not held");
}
