//! No code: see this crate's Cargo.toml. It exists only so that `cargo run --release` and the
//! workspace build resolve the same features for the dependencies they share.
