//! Bytes written to D1 per step follow the size of the step's change, not the size of
//! the session: a step that appends one item writes the same bytes whether the state
//! holds 10 items or 10,000 and whether it is the 1st step or the 200th (no copy of the
//! transcript or of an unchanged state per step).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/append_agent.rs"]
mod append_agent;

use append_agent::{create, runner};
use futures::executor::block_on;
use helix_edge_core::store::rows::SNAPSHOT_MIN_BYTES;

/// Bytes of the create and of each of `steps` steps.
fn growth(items: usize, steps: u32) -> (usize, Vec<usize>) {
    let runner = runner();
    create(&runner, "grow", items);
    block_on(runner.drive("grow", steps)).unwrap();
    let bytes = runner.store().bytes_written();
    assert_eq!(
        bytes.len(),
        steps as usize + 1,
        "one create and one commit per step"
    );
    (bytes[0], bytes[1..].to_vec())
}

#[test]
fn per_step_bytes_do_not_grow_with_the_state_or_the_transcript() {
    let (small_create, small) = growth(10, 200);
    let (big_create, big) = growth(10_000, 200);
    assert!(
        big_create > 100 * small_create,
        "the create writes the whole initial state"
    );
    // Step ids and counters grow by a few digits over 200 steps; nothing else may.
    let (first, last) = (big[0], big[199]);
    assert!(
        last <= first + 64,
        "step 200 wrote {last} B, step 1 {first} B"
    );
    assert!(
        big.iter().all(|&b| b < 2_000),
        "no step of the large session copies its state"
    );
    // The same steps on a small state write the same bytes, but for its snapshots.
    let differing = small.iter().zip(&big).filter(|(s, b)| s != b).count();
    assert!(
        differing <= 10,
        "{differing} of 200 steps differ: {small:?}"
    );
}

#[test]
fn snapshots_are_amortised_over_the_patches_they_replace() {
    let (_, small) = growth(10, 200);
    let (_, big) = growth(10_000, 200);
    let snapshots: Vec<usize> = small
        .iter()
        .zip(&big)
        .filter(|(s, b)| s > b)
        .map(|(s, _)| *s)
        .collect();
    assert!(
        !snapshots.is_empty(),
        "a growing state is snapshotted now and then"
    );
    assert!(big.iter().zip(&small).all(|(b, s)| s >= b));
    // A snapshot is written only once the patches since the last one outweigh it.
    let snap: usize = snapshots.iter().sum();
    let plain: usize = small.iter().sum::<usize>() - snap;
    assert!(
        snap < plain,
        "snapshots {snap} B outweigh the steps {plain} B"
    );
    assert!(snapshots.iter().all(|&b| b > SNAPSHOT_MIN_BYTES / 2));
}
