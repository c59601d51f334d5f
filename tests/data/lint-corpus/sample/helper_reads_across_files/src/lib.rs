//! A candle trainer split over several files, as the crates of the corpus split theirs
//! (kungfu_nes_rl_rust, cifar10_cnn, MuZero-rs): the reads to the host sit in helpers of
//! `optim.rs` and `metrics.rs`, and the loops that repeat them in `train.rs` and in the
//! binary `src/bin/train.rs`. `gpuscope lint` lints the package's files together, so
//! `item_in_hot_loop` finds the reads those loops repeat (`sample-expected.tsv`), and only
//! those.

pub mod metrics;
pub mod optim;
pub mod train;
