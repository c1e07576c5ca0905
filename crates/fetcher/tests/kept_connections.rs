//! What a kept (pooled, idle) connection costs in memory: a crawl over many hosts keeps up to
//! `max_pooled_connections` of them open between a host's requests, so their cost decides how
//! many the pool can afford (docs/operations.md, "Connections").
//!
//! This test binary counts the heap bytes live on its client thread (a global allocator of
//! its own); the server runs on another thread, uncounted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicIsize, Ordering};

use fetcher::{FetchOutcome, Fetcher, FetcherConfig};
use url::Url;

mod support;
use support::{loopback_table, test_config};

struct CountingClientThread;

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}
static LIVE: AtomicIsize = AtomicIsize::new(0);

fn counted() -> bool {
    COUNTED.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: every call is System's; the counter is a side effect only.
unsafe impl GlobalAlloc for CountingClientThread {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() && counted() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counted() {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() && counted() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: CountingClientThread = CountingClientThread;

/// A page of about the size of the daemon bench's (9.7 KB).
fn page() -> Vec<u8> {
    let mut body = String::new();
    let mut i = 0;
    while body.len() < 9_700 {
        body.push_str(&format!(
            "<p>Paragraph {i}: <a href=\"/p/{i}\">link {i}</a></p>\n"
        ));
        i += 1;
    }
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body.as_bytes());
    answer
}

/// A keep-alive server on loopback, on threads of its own (one a connection, blocking
/// I/O): it answers every request head with `page()` and keeps the connection.
fn serve() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let answer = page();
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                loop {
                    let Ok(n) = stream.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        if stream.write_all(&answer).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

/// After one 9.7 KB page from each of 300 hosts, every connection is kept (the cap is
/// above 300), and each costs the client at most 8 KiB of heap while it waits in the pool.
/// hyper as published keeps about 36 KiB in every idle connection (its 8 KiB head buffer,
/// the read buffer grown for the page, an 8 KiB block of its request channel); patched,
/// about 4 KiB (vendor/hyper/PATCH.md).
#[test]
fn a_kept_connection_costs_little_memory_while_idle() {
    let port = serve();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    COUNTED.with(|c| c.set(true));
    let hosts = 300;
    let (per_connection, kept) = rt.block_on(async {
        let f = Fetcher::new(FetcherConfig {
            resolve: loopback_table(&["*.mem.test"]),
            max_pooled_connections: 1024,
            ..test_config()
        })
        .expect("fetcher");
        let fetch = |host: String| {
            let f = f.clone();
            async move {
                let url = Url::parse(&format!("http://{host}:{port}/p")).expect("url");
                let fetch = f.fetch_page(&url).await.expect("fetch");
                assert!(matches!(fetch.outcome, FetchOutcome::Success { .. }));
            }
        };
        // what the first connection sets up once (the pool, its maps) is not counted
        for i in 0..20 {
            fetch(format!("warm{i}.mem.test")).await;
        }
        let before = LIVE.load(Ordering::Relaxed);
        for i in 0..hosts {
            fetch(format!("h{i}.mem.test")).await;
        }
        // no wait: a connection goes idle (and gives its buffers back) in the poll that
        // reads its response's end, before the fetch returns
        let after = LIVE.load(Ordering::Relaxed);
        let kept = f.open_connections();
        ((after - before) / hosts as isize, kept)
    });
    COUNTED.with(|c| c.set(false));
    eprintln!("{per_connection} bytes of heap a kept connection ({kept} open)");
    assert_eq!(kept, hosts + 20, "every connection kept");
    assert!(
        per_connection <= 8 * 1024,
        "a kept connection holds {per_connection} bytes of heap while idle"
    );
}
