//! The store decoder gives Ok or Err for any bytes, never a panic; what it accepts
//! re-encodes to something it decodes to the same state.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_policy::state::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(origin) = decode(data) {
        let again = decode(&encode(&origin));
        assert_eq!(
            again.as_ref(),
            Ok(&origin),
            "encode/decode round trip differs"
        );
    }
});
