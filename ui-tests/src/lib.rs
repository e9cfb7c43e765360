//! trybuild suites live in tests/.
