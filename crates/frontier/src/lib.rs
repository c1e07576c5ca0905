//! frontier: storage and scheduling (queues, seen-set, host and robots records, politeness). Never performs network I/O.
