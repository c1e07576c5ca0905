//! HTTP/2 flow control of PutURLs, seen by a client that speaks raw frames: one that sends
//! items before it has read the server's SETTINGS must be able to go on sending.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use frontier_grpc::pb;
use prost::Message;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const SETTINGS: u8 = 4;
const WINDOW_UPDATE: u8 = 8;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;
/// SETTINGS_INITIAL_WINDOW_SIZE
const INITIAL_WINDOW_SIZE: u16 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK literal header field without indexing, name from the static table (no Huffman).
fn literal(index: u8, value: &str) -> Vec<u8> {
    let mut out = if index < 15 {
        vec![index]
    } else {
        vec![0x0f, index - 15]
    };
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
    out
}

/// The request head of a PutURLs call on `authority`.
fn put_urls_head(authority: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.extend(literal(4, "/urlfrontier.URLFrontier/PutURLs")); // :path
    block.extend(literal(1, authority)); // :authority
    block.extend(literal(31, "application/grpc")); // content-type
    block.extend_from_slice(&[0x00, 2, b't', b'e', 8]); // te: trailers (new name)
    block.extend_from_slice(b"trailers");
    block
}

/// One gRPC message (uncompressed) holding a discovered URL.
fn grpc_item(url: &str) -> Vec<u8> {
    let item = discovered(info(url, &[]));
    let body = item.encode_to_vec();
    let mut out = vec![0];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend(body);
    out
}

/// `n` gRPC messages, one discovered URL on `host` each.
fn grpc_items(host: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| grpc_item(&format!("http://{host}/{i:04}")))
        .collect()
}

/// Reads frames, keeping the client's view of its send window on stream 1 and the acks.
struct Peer {
    tcp: TcpStream,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE (65 535 until its SETTINGS say otherwise).
    initial_window: i64,
    /// DATA bytes sent on stream 1, and WINDOW_UPDATE increments received for it.
    sent: i64,
    granted: i64,
    acks: usize,
    ack_bytes: Vec<u8>,
    saw_settings: bool,
}

impl Peer {
    /// Connect, send the preface, empty SETTINGS and a PutURLs request head on stream 1,
    /// reading nothing yet (a client may send within the initial 64 KiB windows before it
    /// has seen the server's SETTINGS).
    fn open_put_urls(addr: std::net::SocketAddr) -> Peer {
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut p = Peer {
            tcp,
            initial_window: 65_535,
            sent: 0,
            granted: 0,
            acks: 0,
            ack_bytes: Vec::new(),
            saw_settings: false,
        };
        p.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        p.send(&frame(SETTINGS, 0, 0, &[]));
        p.send(&frame(
            HEADERS,
            END_HEADERS,
            1,
            &put_urls_head(&addr.to_string()),
        ));
        p
    }

    /// The window the client may still send on stream 1 (RFC 9113 §6.9.2).
    fn window(&self) -> i64 {
        self.initial_window - self.sent + self.granted
    }

    fn send(&mut self, bytes: &[u8]) {
        self.tcp.write_all(bytes).unwrap();
    }

    fn send_data(&mut self, payload: &[u8], flags: u8) {
        self.sent += payload.len() as i64;
        let f = frame(DATA, flags, 1, payload);
        self.send(&f);
    }

    /// Each item in its own DATA frame on stream 1, all in one write; END_STREAM on the
    /// last if `end`.
    fn send_items(&mut self, items: &[Vec<u8>], end: bool) {
        let mut burst = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let flags = if end && i + 1 == items.len() {
                END_STREAM
            } else {
                0
            };
            self.sent += item.len() as i64;
            burst.extend(frame(DATA, flags, 1, item));
        }
        self.send(&burst);
    }

    /// Read one frame (None on timeout).
    fn read_frame(&mut self) -> Option<(u8, u8, u32, Vec<u8>)> {
        let mut head = [0u8; 9];
        match self.tcp.read_exact(&mut head) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(e) => panic!("reading a frame: {e}"),
        }
        let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
        let mut payload = vec![0u8; len];
        self.tcp.read_exact(&mut payload).unwrap();
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        Some((head[3], head[4], stream, payload))
    }

    /// Read what comes until `done` holds or `wait` passes; panics on GOAWAY.
    fn pump(&mut self, wait: Duration, done: impl Fn(&Peer) -> bool) {
        let deadline = Instant::now() + wait;
        while !done(self) && Instant::now() < deadline {
            let Some((kind, flags, stream, payload)) = self.read_frame() else {
                continue;
            };
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    self.saw_settings = true;
                    for s in payload.chunks_exact(6) {
                        if u16::from_be_bytes([s[0], s[1]]) == INITIAL_WINDOW_SIZE {
                            self.initial_window =
                                u32::from_be_bytes([s[2], s[3], s[4], s[5]]) as i64;
                        }
                    }
                }
                WINDOW_UPDATE if stream == 1 => {
                    self.granted +=
                        (u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                            & 0x7fff_ffff) as i64;
                }
                DATA if stream == 1 => {
                    self.ack_bytes.extend_from_slice(&payload);
                    while self.ack_bytes.len() >= 5 {
                        let n = u32::from_be_bytes([
                            self.ack_bytes[1],
                            self.ack_bytes[2],
                            self.ack_bytes[3],
                            self.ack_bytes[4],
                        ]) as usize;
                        if self.ack_bytes.len() < 5 + n {
                            break;
                        }
                        let ack = pb::AckMessage::decode(&self.ack_bytes[5..5 + n]).unwrap();
                        assert_eq!(ack.status, 0, "{ack:?}");
                        self.acks += 1;
                        self.ack_bytes.drain(..5 + n);
                    }
                }
                GOAWAY => panic!(
                    "GOAWAY from the server: {}",
                    String::from_utf8_lossy(payload.get(8..).unwrap_or_default())
                ),
                _ => {}
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_sent_before_the_server_settings_do_not_stall_the_stream() {
    let s = start(None, |_| {}).await;
    let addr = s.addr;
    tokio::task::spawn_blocking(move || {
        // 3.3 KB of items before reading anything from the server
        let mut p = Peer::open_put_urls(addr);
        let first = grpc_items("early.test", 100);
        p.send_items(&first, false);
        // every item acked (so the server has read them all), still without our SETTINGS ACK
        p.pump(Duration::from_secs(30), |p| p.acks == first.len());
        assert_eq!(p.acks, first.len(), "acks before the SETTINGS ACK");
        assert!(p.saw_settings, "the server sent its SETTINGS");
        // now the server's SETTINGS take effect on its side
        p.send(&frame(SETTINGS, ACK, 0, &[]));
        p.pump(Duration::from_secs(5), |p| p.window() > 0);
        assert!(
            p.window() > 0,
            "stream stalled: send window {} after the SETTINGS ACK (initial {}, sent {}, granted {})",
            p.window(),
            p.initial_window,
            p.sent,
            p.granted
        );
        // and the stream goes on: more items within the window, then the end
        let more = grpc_items("late.test", 20);
        for (i, item) in more.iter().enumerate() {
            p.pump(Duration::from_secs(5), |p| p.window() >= item.len() as i64);
            assert!(p.window() >= item.len() as i64, "no window for item {i}");
            let flags = if i + 1 == more.len() { END_STREAM } else { 0 };
            p.send_data(item, flags);
        }
        let want = first.len() + more.len();
        p.pump(Duration::from_secs(30), |p| p.acks == want);
        assert_eq!(p.acks, want, "every item acked");
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_window_of_one_item_frames_is_read_without_goaway() {
    // Some clients (grpcio) send each item in its own small DATA frame; h2 closes a
    // connection whose unread small frames exceed its budget (ENHANCE_YOUR_CALM). A whole
    // initial window of them, written at once, must be taken.
    let s = start(None, |_| {}).await;
    let addr = s.addr;
    tokio::task::spawn_blocking(move || {
        let mut p = Peer::open_put_urls(addr);
        let items = grpc_items("small.test", 1_900);
        let bytes: usize = items.iter().map(Vec::len).sum();
        assert!(bytes < 65_535, "within the initial window: {bytes}");
        p.send_items(&items, true);
        p.pump(Duration::from_secs(5), |p| p.saw_settings);
        p.send(&frame(SETTINGS, ACK, 0, &[]));
        p.pump(Duration::from_secs(60), |p| p.acks == items.len());
        assert_eq!(p.acks, items.len(), "every item acked");
    })
    .await
    .unwrap();
}
