//! A `.warc.gz.open` file a crash left: whole gzip members, then anything (a member cut
//! short, a torn write, bytes from another file after a power loss). Recovery must keep
//! every whole member before the damage, keep only whole members, and never panic.
//!
//! Input: byte 0 is the number of whole members (0-3, low two bits); the rest is cut into
//! that many parts plus a tail, each part gzipped as one member, the tail appended raw.

#![no_main]

use std::io::{Read, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use warc::{recover_open_files, Recovered};

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, rest)) = data.split_first() else {
        return;
    };
    let members = usize::from(knobs & 0x03);
    let part = rest.len() / (members + 1);
    let mut file = Vec::new();
    for i in 0..members {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(&rest[i * part..(i + 1) * part])
            .expect("in memory");
        file.extend_from_slice(&e.finish().expect("in memory"));
    }
    let whole = file.len() as u64;
    file.extend_from_slice(&rest[members * part..]);

    let dir = std::env::temp_dir().join(format!("warc-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let open = dir.join("f.warc.gz.open");
    std::fs::write(&open, &file).expect("the .open file");
    let done = recover_open_files(&dir).expect("recovery of a readable file");
    assert_eq!(done.len(), 1);
    let (path, kept) = match &done[0] {
        Recovered::Removed(_) => {
            assert_eq!(whole, 0, "whole members removed");
            assert!(!open.exists());
            return;
        }
        Recovered::Renamed(path) => (path.clone(), file.len() as u64),
        Recovered::Truncated { path, kept, was } => {
            assert_eq!(*was, file.len() as u64);
            assert!(kept < was);
            (path.clone(), *kept)
        }
    };
    assert!(
        kept >= whole,
        "kept {kept} of {whole} bytes of whole members"
    );
    let left = std::fs::read(&path).expect("the recovered file");
    assert_eq!(left.len() as u64, kept);
    assert_eq!(&left[..], &file[..left.len()], "a prefix of the file");
    // what is left reads to its end, member after member
    let mut sink = Vec::new();
    flate2::read::MultiGzDecoder::new(&left[..])
        .read_to_end(&mut sink)
        .expect("whole members only");
});
