//! Decision latency of the default policy through the host: reused instance, fresh instance, a chain of three, and
//! the same decision as native Rust (the baseline the ratios are read against).
//!
//! Run: `cargo bench -p shellward-policy --bench decision`

use criterion::{Criterion, criterion_group, criterion_main};
use shellward_default_policy::{decide, settings::Settings};
use shellward_policy::embedded::guests::SCRIPTED_POLICY;
use shellward_policy::{
    FaultMode, InstanceMode, PolicyChain, PolicyEngine, Request, SandboxConfig,
};
use std::hint::black_box;

const COMMANDS: &[(&str, &str)] = &[
    ("plain", "ls -la src"),
    ("trailing-amp", "npm run dev &   # start the server"),
];

fn engine(mode: InstanceMode) -> PolicyEngine {
    // Under the target directory: a fixed name in the shared /tmp could be planted by another user, and its entries
    // are loaded as compiled code.
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("shellward-bench-cache");
    PolicyEngine::new(
        SandboxConfig::default()
            .instance_mode(mode)
            .cache_dir(Some(cache)),
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let settings = Settings::default();
    let reuse = engine(InstanceMode::Reuse);
    let fresh = engine(InstanceMode::Fresh);
    let reused_policy = reuse.load_default("").unwrap();
    let fresh_policy = fresh.load_default("").unwrap();
    // The scripted test policy echoes the request: the fixed cost of a call through the host and the component ABI.
    let trivial = reuse.load_file(SCRIPTED_POLICY.as_ref(), "").unwrap();
    let chain = PolicyChain::new(
        vec![
            reuse
                .load_file(SCRIPTED_POLICY.as_ref(), "append: --x")
                .unwrap(),
            reuse.load_file(SCRIPTED_POLICY.as_ref(), "").unwrap(),
            reuse.load_default("").unwrap(),
        ],
        FaultMode::Deny,
    );
    for (label, command) in COMMANDS {
        let request = Request::new(*command);
        let native = decide::Request {
            command: command.to_string(),
            ..Default::default()
        };
        let mut g = c.benchmark_group(format!("default-policy/{label}"));
        g.bench_function("native-baseline", |b| {
            b.iter(|| black_box(decide::evaluate(&settings, black_box(&native))))
        });
        g.bench_function("wasm-reused-instance", |b| {
            b.iter(|| black_box(reused_policy.evaluate(black_box(&request)).unwrap()))
        });
        g.bench_function("wasm-fresh-instance", |b| {
            b.iter(|| black_box(fresh_policy.evaluate(black_box(&request)).unwrap()))
        });
        g.bench_function("wasm-trivial-policy-reused", |b| {
            b.iter(|| black_box(trivial.evaluate(black_box(&request)).unwrap()))
        });
        g.bench_function("wasm-chain-of-3", |b| {
            b.iter(|| black_box(chain.evaluate(black_box(&request))))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
