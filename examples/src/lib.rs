//! Runnable programs showing gpuspan, one per use case; see `src/bin/`.
