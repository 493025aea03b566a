//! The `size` row: the release binary against its target and the README's figure, and what its code is made of.

use super::BIN;
use std::collections::HashMap;
use std::process::Command;

/// The size the release binary must stay within on disk.
const TARGET_MB: f64 = 30.0;

/// The release binary's size on disk against its target and the figure the README states ("about N MB on disk"):
/// the row fails when the README is more than 10 % off, so the figure is re-measured when it drifts. Then the code
/// per crate, from the symbol table the binary keeps for backtraces (`nm`; skipped with a message without it).
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
    println!(
        "size: release binary {mb:.1} MB on disk (target ≤ {TARGET_MB} MB); the README says about {stated} MB"
    );
    assert!(
        (mb - stated).abs() <= stated * 0.10,
        "the README's binary size ({stated} MB) is more than 10 % off the measured {mb:.1} MB: update it"
    );
    code_per_crate();
}

/// The crate a demangled symbol belongs to: the first path segment (of the type, for `<T as Trait>::f`).
fn crate_of(name: &str) -> &str {
    let name = name.trim_start_matches('<').trim_start_matches('&');
    let name = name.strip_prefix("mut ").unwrap_or(name);
    let name = name.strip_prefix("dyn ").unwrap_or(name);
    match name.split_once("::") {
        Some((first, _)) if first.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => first,
        _ => "(C and others)",
    }
}

fn code_per_crate() {
    let out = match Command::new("nm")
        .args(["--size-sort", "--print-size", "--demangle"])
        .arg(BIN)
        .output()
    {
        Ok(o) if o.status.success() => o.stdout,
        _ => return println!("size: no `nm` here (binutils); the code per crate is not shown"),
    };
    let mut per_crate: HashMap<String, u64> = HashMap::new();
    let mut total = 0u64;
    for line in String::from_utf8_lossy(&out).lines() {
        let mut parts = line.splitn(4, ' ');
        let (Some(_), Some(size), Some(kind), Some(name)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if !matches!(kind, "t" | "T" | "w" | "W") {
            continue;
        }
        let size = u64::from_str_radix(size, 16).unwrap_or(0);
        total += size;
        *per_crate.entry(crate_of(name).to_string()).or_default() += size;
    }
    let mut rows: Vec<(String, u64)> = per_crate.into_iter().collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.1));
    println!(
        "size: code {:.1} MB in functions; the largest by crate (generic code counts where it is defined):",
        total as f64 / 1e6
    );
    for (name, size) in rows.iter().take(15) {
        println!(
            "  {name:<28} {:5.2} MB  {:4.1} %",
            *size as f64 / 1e6,
            100.0 * *size as f64 / total.max(1) as f64
        );
    }
}
