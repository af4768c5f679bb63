//! The capacity model's command line: reads what `bench/capacity.mjs` measured and
//! prints, as Markdown, the inputs it derived and the projection of the target load
//! over 1, 4, 16 and 64 shards (the README's "Scaling" table).
//!
//! `cargo run -p helix-edge-capacity --release -- --measured .bench/capacity.json
//! [--sessions-per-day 1000000] [--peak-factor 10]`

use helix_edge_capacity::{
    D1_LIMIT_BYTES, Inputs, Measured, Projection, SHARD_COUNTS, Target, measure, project,
};
use serde_json::Value;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("helix-edge-capacity: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<String, String> {
    let mut measured_path = None;
    let mut target = Target {
        sessions_per_day: 1_000_000.0,
        peak_factor: 10.0,
    };
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| {
            v.parse::<f64>()
                .map_err(|_| format!("{flag}: {v} is not a number"))
        };
        match flag.as_str() {
            "--measured" => measured_path = Some(value()?),
            "--sessions-per-day" => target.sessions_per_day = number(value()?)?,
            "--peak-factor" => target.peak_factor = number(value()?)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let path = measured_path.ok_or("--measured FILE is required (bench/capacity.mjs writes it)")?;
    let measured = read_measured(&path)?;
    let inputs = Inputs::from(&measured);
    let rows: Vec<Projection> = SHARD_COUNTS
        .iter()
        .map(|&shards| project(&target, &inputs, shards, 42))
        .collect();
    Ok(report(&target, &measured, &inputs, &rows))
}

/// The benchmark's JSON: `{"sessions", "sends": [[commits, bytes, ms]…], "dump"}`, with
/// the dump's rows measured.
fn read_measured(path: &str) -> Result<Measured, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let json: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
    let sessions = json["sessions"].as_u64().ok_or("no sessions count")?;
    let triple = |v: &Value| Some((v[0].as_u64()?, v[1].as_u64()?, v[2].as_u64()?));
    let sends: Vec<(u64, u64, u64)> = json["sends"]
        .as_array()
        .ok_or("no sends")?
        .iter()
        .map(|s| triple(s).ok_or(format!("a send is not [commits, bytes, ms]: {s}")))
        .collect::<Result<_, _>>()?;
    let dump_path = json["dump"].as_str().ok_or("no dump path")?;
    let dump = std::fs::read_to_string(dump_path).map_err(|e| format!("{dump_path}: {e}"))?;
    let database_bytes = measure::database_bytes(&dump).map_err(|e| format!("{dump_path}: {e}"))?;
    Ok(Measured {
        sessions,
        sends,
        database_bytes,
    })
}

fn report(target: &Target, measured: &Measured, inputs: &Inputs, rows: &[Projection]) -> String {
    let mut out = String::new();
    let sessions_per_second = target.sessions_per_day / 86_400.0;
    out += &format!(
        "Target: {} sessions/day ({:.1}/s), peak hour {}× the mean ({:.0}/s).\n\n",
        target.sessions_per_day,
        sessions_per_second,
        target.peak_factor,
        sessions_per_second * target.peak_factor
    );
    out += &format!(
        "| input (measured over {} sessions) | value |\n|---|---|\n",
        measured.sessions
    );
    let input_rows = [
        (
            "D1 bytes per session (tables and indexes, compacted)",
            format!("{:.0}", inputs.bytes_per_session),
        ),
        (
            "commits per session",
            format!("{:.2}", inputs.commits_per_session),
        ),
        (
            "D1 batches per session",
            format!("{:.2}", inputs.batches_per_session),
        ),
        (
            "encoded bytes per batch (mean)",
            format!("{:.0}", inputs.batch_bytes),
        ),
        (
            "time of a batch (fitted: fixed + per KiB)",
            format!(
                "{:.2} ms + {:.3} ms/KiB = {:.2} ms for the mean batch",
                inputs.send_ms,
                inputs.send_ms_per_kib,
                inputs.batch_ms()
            ),
        ),
        ("coalescing delay", format!("{:.0} ms", inputs.coalesce_ms)),
    ];
    for (name, value) in input_rows {
        out += &format!("| {name} | {value} |\n");
    }
    out += "\n| shards | D1 growth per shard per day | days until 10 GB | writes/s per shard (peak · mean) | writer busy at peak | replication lag at peak (p50 · p99) |\n";
    out += "|---:|---:|---:|---:|---:|---:|\n";
    for row in rows {
        let lag = if row.peak_utilization >= 1.0 {
            format!(
                "falls behind: {} · {} (grows while the peak lasts)",
                seconds(row.lag_p50_ms),
                seconds(row.lag_p99_ms)
            )
        } else {
            format!("{:.0} ms · {:.0} ms", row.lag_p50_ms, row.lag_p99_ms)
        };
        out += &format!(
            "| {} | {:.2} GB | {:.1} | {:.1} · {:.1} | {:.0}% | {} |\n",
            row.shards,
            row.bytes_per_shard_per_day / 1e9,
            row.days_to_limit,
            row.peak_writes_per_second,
            row.mean_writes_per_second,
            row.peak_utilization * 100.0,
            lag
        );
    }
    out += &format!("\n(10 GB = {D1_LIMIT_BYTES:.0} bytes, D1's limit per database.)\n");
    out
}

fn seconds(ms: f64) -> String {
    format!("{:.0} s", ms / 1_000.0)
}
