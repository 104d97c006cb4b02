//! Per-unit journals (see docs/ledger.md).
