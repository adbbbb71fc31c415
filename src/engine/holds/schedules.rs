//! Schedule tests (RELIABILITY.md, "Schedule exploration").
