//! Properties of the state tracker: the patches it emits, applied with the `json-patch`
//! crate (an independent RFC 6902 implementation), turn the old state into exactly the
//! new one; helix-edge's own patch application agrees with that crate on every outcome;
//! and parallel writes merge as the `state` module documents.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::state::{PatchOp, StateWriter, apply_all, diff, merge};
use serde_json::{Map, Value, json};
use std::rc::Rc;

/// xorshift64*: deterministic, so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn key(&mut self) -> String {
        // Includes the characters JSON Pointer must escape.
        ["a", "b", "c", "x/y", "m~n", "", "k"][self.below(7)].to_string()
    }
}

fn random_value(rng: &mut Rng, depth: u32) -> Value {
    match if depth == 0 {
        rng.below(4)
    } else {
        rng.below(6)
    } {
        0 => Value::Null,
        1 => json!(rng.below(100)),
        2 => json!(format!("s{}", rng.below(10))),
        3 => json!(rng.below(2) == 0),
        4 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.below(4))
                .map(|_| (rng.key(), random_value(rng, depth - 1)))
                .collect::<Map<_, _>>(),
        ),
    }
}

/// A random edit somewhere inside `v`: appends, truncations, edits, insertions, removals.
fn mutate(rng: &mut Rng, v: &mut Value) {
    match v {
        Value::Object(map) if !map.is_empty() && rng.below(3) > 0 => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let k = &keys[rng.below(keys.len())];
            match rng.below(4) {
                0 => {
                    map.remove(k);
                }
                1 => {
                    map.insert(k.clone(), random_value(rng, 2));
                }
                _ => mutate(rng, map.get_mut(k).unwrap()),
            }
        }
        Value::Object(map) => {
            map.insert(rng.key(), random_value(rng, 2));
        }
        Value::Array(items) => match rng.below(5) {
            0 => items.extend((0..1 + rng.below(3)).map(|_| random_value(rng, 1))),
            1 if !items.is_empty() => items.truncate(rng.below(items.len())),
            2 if !items.is_empty() => {
                let i = rng.below(items.len());
                items.insert(i, random_value(rng, 1));
            }
            _ if !items.is_empty() => {
                let i = rng.below(items.len());
                mutate(rng, &mut items[i]);
            }
            _ => items.push(random_value(rng, 1)),
        },
        other => *other = random_value(rng, 2),
    }
}

fn apply_with_json_patch(doc: &Value, ops: &[PatchOp]) -> Value {
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(ops).unwrap()).unwrap();
    let mut out = doc.clone();
    json_patch::patch(&mut out, &patch).unwrap();
    out
}

#[test]
fn applying_the_diff_of_random_mutations_gives_exactly_the_new_state() {
    for seed in 1..=2_000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut old = json!({});
        for _ in 0..3 {
            mutate(&mut rng, &mut old);
        }
        let mut new = old.clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut new);
        }
        let mut ops = Vec::new();
        diff("", &old, &new, &mut ops);
        assert_eq!(
            apply_with_json_patch(&old, &ops),
            new,
            "seed {seed}: {ops:?}"
        );
    }
}

#[test]
fn writer_updates_emit_patches_that_replay_to_the_writers_view() {
    for seed in 1..=1_000u64 {
        let mut rng = Rng(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        let mut old = json!({"items": []});
        for _ in 0..4 {
            mutate(&mut rng, &mut old);
        }
        let mut writer = StateWriter::new(Rc::new(old.clone()));
        for _ in 0..3 {
            writer.update(|s| mutate(&mut rng, s)).unwrap();
        }
        let view = writer.current().clone();
        assert_eq!(
            apply_with_json_patch(&old, writer.ops()),
            view,
            "seed {seed}"
        );
    }
}

#[test]
fn one_append_to_a_large_array_is_one_add_dash_operation() {
    let items: Vec<Value> = (0..10_000)
        .map(|i| json!({"text": format!("n{i}")}))
        .collect();
    let old = json!({"notes": items});
    let mut writer = StateWriter::new(Rc::new(old.clone()));
    writer.append("/notes", json!({"text": "new"})).unwrap();
    assert_eq!(
        writer.ops(),
        [PatchOp::Add {
            path: "/notes/-".into(),
            value: json!({"text": "new"})
        }]
    );

    // The same change found by diffing is also one operation.
    let mut new = old.clone();
    new["notes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"text": "new"}));
    let mut ops = Vec::new();
    diff("", &old, &new, &mut ops);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].path(), "/notes/-");
}

#[test]
fn one_deep_field_change_is_one_replace_at_that_field() {
    let old = json!({"a": {"b": {"c": {"d": 1, "e": [1, 2, 3]}}}, "big": vec![0; 1000]});
    let mut writer = StateWriter::new(Rc::new(old.clone()));
    writer.update(|s| s["a"]["b"]["c"]["d"] = json!(2)).unwrap();
    assert_eq!(
        writer.ops(),
        [PatchOp::Replace {
            path: "/a/b/c/d".into(),
            value: json!(2)
        }]
    );

    let mut writer = StateWriter::new(Rc::new(old));
    writer.set("/a/b/c/e/1", json!(9)).unwrap();
    assert_eq!(
        writer.ops(),
        [PatchOp::Replace {
            path: "/a/b/c/e/1".into(),
            value: json!(9)
        }]
    );
}

#[test]
fn parallel_appends_all_survive_in_tool_call_order() {
    let base = Rc::new(json!({"notes": [{"text": "old"}]}));
    // Three tools of one step; each sees only the committed state and its own writes.
    let mut writers: Vec<StateWriter> = (0..3).map(|_| StateWriter::new(base.clone())).collect();
    for (i, w) in writers.iter_mut().enumerate().rev() {
        // Finish order is reversed; merge order must still be call order.
        w.append("/notes", json!({"text": format!("t{i}")}))
            .unwrap();
        assert_eq!(w.current()["notes"].as_array().unwrap().len(), 2);
    }
    let mut state = (*base).clone();
    let merged = merge(&mut state, writers.into_iter().map(StateWriter::into_ops));
    assert!(merged.conflicts.is_empty());
    assert_eq!(
        state,
        json!({"notes": [{"text": "old"}, {"text": "t0"}, {"text": "t1"}, {"text": "t2"}]})
    );
    assert_eq!(apply_with_json_patch(&base, &merged.applied), state);
}

#[test]
fn parallel_replaces_are_last_write_wins_in_call_order() {
    let base = Rc::new(json!({"count": 0, "tags": []}));
    let mut first = StateWriter::new(base.clone());
    let mut second = StateWriter::new(base.clone());
    second.set("/count", json!(2)).unwrap();
    first.set("/count", json!(1)).unwrap();
    first.append("/tags", json!("a")).unwrap();
    let mut state = (*base).clone();
    let merged = merge(&mut state, [first.into_ops(), second.into_ops()]);
    assert_eq!(state, json!({"count": 2, "tags": ["a"]}));
    assert_eq!(merged.applied.len(), 3);
}

#[test]
fn a_write_that_no_longer_applies_is_reported_and_the_rest_still_merge() {
    let base = Rc::new(json!({"doc": {"title": "t"}, "n": 1}));
    let mut remover = StateWriter::new(base.clone());
    remover.remove("/doc").unwrap();
    let mut editor = StateWriter::new(base.clone());
    editor.set("/doc/title", json!("u")).unwrap();
    editor.set("/n", json!(2)).unwrap();
    let mut state = (*base).clone();
    let merged = merge(&mut state, [remover.into_ops(), editor.into_ops()]);
    assert_eq!(state, json!({"n": 2}));
    assert_eq!(merged.conflicts.len(), 1);
    assert_eq!(merged.conflicts[0].0.path(), "/doc/title");
    assert_eq!(apply_with_json_patch(&base, &merged.applied), state);
}

#[test]
fn invalid_writes_are_refused_without_changing_the_view() {
    let base = Rc::new(json!({"notes": [], "obj": {}}));
    let mut w = StateWriter::new(base);
    assert!(
        w.append("/obj", json!(1)).is_err(),
        "appending to an object"
    );
    assert!(w.append("/missing", json!(1)).is_err());
    assert!(w.remove("/nope").is_err());
    assert!(w.set("/a/b", json!(1)).is_err(), "parent missing");
    assert!(w.set("", json!([1])).is_err(), "state must stay an object");
    assert!(w.update(|s| *s = json!(3)).is_err());
    assert!(w.ops().is_empty());
    assert_eq!(w.current(), &json!({"notes": [], "obj": {}}));
}

#[test]
fn writes_after_appends_see_the_appended_items() {
    let mut w = StateWriter::new(Rc::new(json!({"a": [1]})));
    w.append("/a", json!(2)).unwrap();
    w.set("/a/1", json!(3)).unwrap(); // index 1 exists only after the append
    w.append("/a", json!(4)).unwrap();
    assert_eq!(w.current(), &json!({"a": [1, 3, 4]}));
    assert_eq!(
        apply_with_json_patch(&json!({"a": [1]}), w.ops()),
        json!({"a": [1, 3, 4]})
    );
}

/// A path into `doc` that may or may not exist: existing members and items, one past the
/// end, `-`, missing members, malformed indices and malformed pointers.
fn random_path(rng: &mut Rng, doc: &Value) -> String {
    let mut path = String::new();
    let mut at = Some(doc);
    loop {
        let stop = rng.below(3) == 0;
        let segment = match at {
            Some(Value::Object(map)) if !map.is_empty() && rng.below(4) > 0 => {
                let keys: Vec<&String> = map.keys().collect();
                keys[rng.below(keys.len())].clone()
            }
            Some(Value::Array(items)) if rng.below(4) > 0 => match rng.below(5) {
                0 => "-".to_string(),
                1 => items.len().to_string(),
                2 => "01".to_string(),
                _ if items.is_empty() => "0".to_string(),
                _ => rng.below(items.len()).to_string(),
            },
            _ => rng.key(),
        };
        at = match at {
            Some(Value::Object(map)) => map.get(&segment),
            Some(Value::Array(items)) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        path.push('/');
        path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
        if stop || at.is_none() {
            break;
        }
    }
    match rng.below(20) {
        0 => String::new(),
        1 => path.trim_start_matches('/').to_string(),
        2 => format!("{path}~2"),
        _ => path,
    }
}

#[test]
fn patches_apply_exactly_as_an_independent_implementation_applies_them() {
    let mut failures = 0;
    for seed in 1..=3_000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let mut doc = json!({});
        for _ in 0..3 {
            mutate(&mut rng, &mut doc);
        }
        let ops: Vec<PatchOp> = (0..1 + rng.below(4))
            .map(|_| {
                let path = random_path(&mut rng, &doc);
                let value = random_value(&mut rng, 1);
                match rng.below(3) {
                    0 => PatchOp::Add { path, value },
                    1 => PatchOp::Remove { path },
                    _ => PatchOp::Replace { path, value },
                }
            })
            .collect();
        let theirs_patch: Result<json_patch::Patch, _> =
            serde_json::from_value(serde_json::to_value(&ops).unwrap());
        let Ok(theirs_patch) = theirs_patch else {
            continue; // a pointer json-patch refuses to parse; ours is checked below
        };
        let (mut ours, mut theirs) = (doc.clone(), doc.clone());
        let ours_ok = apply_all(&mut ours, &ops).is_ok();
        let theirs_ok = json_patch::patch(&mut theirs, &theirs_patch).is_ok();
        assert_eq!(ours_ok, theirs_ok, "seed {seed}: {doc} {ops:?}");
        assert_eq!(ours, theirs, "seed {seed}: {doc} {ops:?}");
        if !ours_ok {
            failures += 1;
            assert_eq!(
                ours, doc,
                "seed {seed}: a failed patch leaves the document as it was"
            );
        }
    }
    assert!(
        failures > 300,
        "the cases must include failing patches ({failures})"
    );
}

#[test]
fn malformed_pointers_are_refused_without_a_change() {
    let doc = json!({"a": [1, 2], "m~n": {"x/y": 1}});
    for path in ["a", "/a/01", "/a/+1", "/a/~2", "/a/2", "/m~n/x/y", "/a/-/b"] {
        let mut out = doc.clone();
        let op = PatchOp::Replace {
            path: path.into(),
            value: json!(0),
        };
        assert!(op.apply(&mut out).is_err(), "{path}");
        assert_eq!(out, doc, "{path}");
    }
    let mut out = doc.clone();
    let ops = [
        PatchOp::Replace {
            path: "/m~0n/x~1y".into(),
            value: json!(2),
        },
        PatchOp::Add {
            path: "/a/-".into(),
            value: json!(3),
        },
        PatchOp::Remove {
            path: "/a/0".into(),
        },
    ];
    apply_all(&mut out, &ops).unwrap();
    assert_eq!(out, json!({"a": [2, 3], "m~n": {"x/y": 2}}));
}
