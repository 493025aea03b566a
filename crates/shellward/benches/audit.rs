//! The cost of the audit log on `execute`: `true` through the facade with an audit log against the same without one,
//! run alternately (paired) so both sides of each ratio see the same machine load.
//!
//! Run: `cargo bench -p shellward --bench audit` (prints the median ratio and its quartiles).

use shellward::tools::ExecuteArgs;
use shellward::{AuditConfig, Config, Shellward};
use std::time::Instant;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let plain = Shellward::builder().build().unwrap();
        let mut config = Config::default();
        config.audit = Some(AuditConfig::to(dir.path().join("audit.jsonl")));
        let audited = Shellward::builder().config(config).build().unwrap();
        let run = |sw: &Shellward| {
            let sw = sw.clone();
            async move {
                let args = ExecuteArgs::new("true");
                let r = sw.without_session().execute(args, shellward::ExecuteOptions::new()).await.unwrap();
                assert_eq!(r.exit_code, Some(0));
            }
        };
        for _ in 0..20 {
            run(&plain).await;
            run(&audited).await;
        }
        let pairs = 400;
        let mut ratios = Vec::with_capacity(pairs);
        for _ in 0..pairs {
            let t = Instant::now();
            run(&plain).await;
            let base = t.elapsed();
            let t = Instant::now();
            run(&audited).await;
            ratios.push(t.elapsed().as_secs_f64() / base.as_secs_f64());
        }
        ratios.sort_by(f64::total_cmp);
        let q = |f: f64| ratios[((ratios.len() - 1) as f64 * f).round() as usize];
        println!(
            "audit: execute `true` with an audit log / without: paired ratio median {:.3} (quartiles {:.3} .. {:.3}, {pairs} interleaved pairs)",
            q(0.5),
            q(0.25),
            q(0.75)
        );
        plain.shutdown().await;
        audited.shutdown().await;
        let lines = std::fs::read_to_string(dir.path().join("audit.jsonl"))
            .unwrap()
            .lines()
            .count();
        println!("audit records written: {lines} (2 per execute)");
    });
}
