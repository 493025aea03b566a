//! The `size` row: the release binary against the README's figure.

use super::BIN;

/// The release binary's size on disk against the figure the README states ("about N MB on disk"): the row fails
/// when the README is more than 10 % off, so the figure is re-measured when it drifts.
pub fn binary_size() {
    let bytes = std::fs::metadata(BIN).map(|m| m.len()).unwrap_or(0);
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let stated: f64 = readme
        .split("release binary is about ")
        .nth(1)
        .and_then(|rest| rest.split(" MB").next())
        .and_then(|n| n.trim().parse().ok())
        .expect("the README states the release binary's size as \"about N MB\"");
    let mb = bytes as f64 / 1e6;
    println!("size: release binary {mb:.1} MB on disk; the README says about {stated} MB");
    assert!(
        (mb - stated).abs() <= stated * 0.10,
        "the README's binary size ({stated} MB) is more than 10 % off the measured {mb:.1} MB: update it"
    );
}
