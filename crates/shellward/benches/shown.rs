//! The cost of writing JSON for people (`shellward::shown::json`: invisible characters as `\uXXXX`) against
//! serde_json's own compact writer, on an audit-like record: ASCII only (nearly every record), and one carrying
//! 64 KiB of non-ASCII output. Both writers run alternately (paired), so each ratio sees the same machine load.
//!
//! Run: `cargo bench -p shellward --bench shown` (prints the median ratio and its quartiles per record).

use std::time::Instant;

fn record(output: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "decision", "surface": "serve", "session": "agent-a", "command": "cargo test --workspace",
        "outcome": "run", "policy": "default", "notes": ["Timeout 10m (the policy's default)."],
        "output": output, "exit_code": 0, "time": "2026-12-06T18:00:00Z",
    })
}

fn ratio(name: &str, value: &serde_json::Value) {
    let rounds = 201;
    let reps = 200;
    let mut ratios = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(value.to_string());
        }
        let plain = t.elapsed();
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(shellward::shown::json(value));
        }
        let shown = t.elapsed();
        ratios.push(shown.as_secs_f64() / plain.as_secs_f64());
    }
    ratios.sort_by(|a, b| a.total_cmp(b));
    let q = |f: f64| ratios[((ratios.len() - 1) as f64 * f) as usize];
    println!(
        "{name}: shown::json / serde_json = {:.2} (quartiles {:.2}–{:.2}, {rounds} paired rounds of {reps})",
        q(0.5),
        q(0.25),
        q(0.75)
    );
}

fn main() {
    ratio("ASCII record", &record("ok\n"));
    ratio(
        "64 KiB non-ASCII output",
        &record(&"日本語のテキスト é\n".repeat(64 * 1024 / 30)),
    );
}
