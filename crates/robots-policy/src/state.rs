//! The per-origin robots.txt state machine (to be written).
