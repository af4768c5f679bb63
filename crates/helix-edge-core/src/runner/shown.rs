//! Live state: the state as a step's stream has shown it. A tool's writes stream as
//! `state_patch` chunks (with its `toolCallId`) the moment it makes them; the step's
//! commit then streams what turns the shown state into the committed one — nothing
//! when the writes committed as shown (the usual case), else the difference (a failed
//! call's writes dropped, parallel calls' writes merged in call order, writes that no
//! longer applied, results stored where the stream did not show them).
//!
//! So applying every `state_patch` in order gives the committed state after each
//! `step_committed`; live patches of a step that never commits are disowned by the
//! `stream_resync` that follows (like every chunk of a torn step).

use crate::state::{PatchOp, apply_all, diff};
use serde_json::Value;

/// What the step knows of the state a client following the stream has.
#[derive(Debug, Default)]
enum View {
    /// Nothing shown yet.
    #[default]
    Unseen,
    /// The state the current phase's tools run on, plus the operations shown since
    /// `from`: all of them writes of one call (`writer`), which its own writer checked
    /// in that order. Nothing is copied, so a step on a large state costs its writes.
    Follows { writer: Option<String>, from: usize },
    /// A copy: writes of two calls interleaved, a write nobody checked, or a merge
    /// that differed from what was shown.
    Copy(Value),
}

/// One step's shown state.
#[derive(Debug, Default)]
pub(crate) struct Shown {
    view: View,
    /// The operations shown, in stream order.
    ops: Vec<PatchOp>,
    /// Operations merged into the step's state before anything was shown: a client
    /// does not have them yet.
    unshown: Vec<PatchOp>,
}

impl Shown {
    /// A write of call `call`, made on `base` (the state its phase started from);
    /// `checked` when the call's own writer made it (so it applies after the call's
    /// earlier writes): what to stream live — first what was merged before it, unshown
    /// (on a step's first write only), then the write itself, or `None` when it does not
    /// apply to what the stream has shown (it is then not shown; the commit corrects the
    /// state).
    pub fn show(
        &mut self,
        base: &Value,
        call: &str,
        patches: Vec<PatchOp>,
        checked: bool,
    ) -> (Vec<PatchOp>, Option<Vec<PatchOp>>) {
        let mut merged = Vec::new();
        if matches!(self.view, View::Unseen) {
            // The base has the merged writes: they go out first, so that the client's
            // copy is the base.
            merged = std::mem::take(&mut self.unshown);
            self.ops.extend(merged.iter().cloned());
            self.view = View::Follows {
                writer: None,
                from: self.ops.len(),
            };
        }
        if let View::Follows { writer, .. } = &mut self.view {
            if checked && writer.as_deref().is_none_or(|w| w == call) {
                *writer = Some(call.to_string());
                self.ops.extend(patches.iter().cloned());
                return (merged, Some(patches));
            }
            self.copy(base);
        }
        let View::Copy(view) = &mut self.view else {
            return (merged, None);
        };
        if apply_all(view, &patches).is_err() {
            return (merged, None);
        }
        self.ops.extend(patches.iter().cloned());
        (merged, Some(patches))
    }

    /// From following to a copy: `base` (the phase's state) with what was shown on it.
    fn copy(&mut self, base: &Value) {
        if let View::Follows { from, .. } = self.view {
            let mut view = base.clone();
            // They applied in this order when they were made.
            let _ = apply_all(&mut view, &self.ops[from..]);
            self.view = View::Copy(view);
        }
    }

    /// Before a phase's `writes` (one list per call) merge into `state`, the state they
    /// were made on: the client keeps being followed when the merge applies exactly what
    /// was shown (one call wrote, all of it shown), else its copy is taken now.
    pub fn merging(&mut self, state: &Value, writes: &[Vec<PatchOp>]) {
        if let View::Follows { from, .. } = &self.view {
            let shown = &self.ops[*from..];
            let mut written = writes.iter().filter(|w| !w.is_empty());
            let as_shown = match (written.next(), written.next()) {
                (None, _) => shown.is_empty(),
                (Some(w), None) => w.as_slice() == shown,
                _ => false,
            };
            if !as_shown {
                self.copy(state);
            }
        }
    }

    /// Writes merged into the step's state (`applied`, as they applied).
    pub fn merged(&mut self, applied: &[PatchOp]) {
        match &mut self.view {
            View::Unseen => self.unshown.extend(applied.iter().cloned()),
            // What was shown merged as shown: the client has the merged state, which
            // the next phase's tools run on.
            View::Follows { writer, from } => {
                *writer = None;
                *from = self.ops.len();
            }
            View::Copy(_) => {}
        }
    }

    /// The step's committed `state_patch`: `ops` (the step's canonical writes) when
    /// nothing was shown, nothing when they are exactly what was shown, else what turns
    /// the shown state into `committed`.
    pub fn committed(self, ops: &[PatchOp], committed: &Value) -> Vec<PatchOp> {
        match self.view {
            View::Unseen => ops.to_vec(),
            _ if self.ops == ops => Vec::new(),
            // The client has the step's first state with the shown operations, which
            // begin the step's own: the rest of them.
            View::Follows { .. } if ops.starts_with(&self.ops) => ops[self.ops.len()..].to_vec(),
            View::Copy(view) => {
                let mut out = Vec::new();
                diff("", &view, committed, &mut out);
                out
            }
            // Not reached (what is followed is the beginning of the step's writes); the
            // whole state keeps a client right all the same.
            View::Follows { .. } => vec![PatchOp::Replace {
                path: String::new(),
                value: committed.clone(),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn add(path: &str, value: Value) -> PatchOp {
        PatchOp::Add {
            path: path.into(),
            value,
        }
    }

    #[test]
    fn writes_committed_as_shown_need_no_commit_patch() {
        let base = json!({"notes": []});
        let mut shown = Shown::default();
        let a = vec![add("/notes/-", json!("a"))];
        assert_eq!(
            shown.show(&base, "a", a.clone(), true),
            (vec![], Some(a.clone()))
        );
        assert_eq!(shown.committed(&a, &json!({"notes": ["a"]})), vec![]);
    }

    #[test]
    fn parallel_writes_merged_in_call_order_are_corrected_at_commit() {
        let base = json!({"notes": []});
        let mut shown = Shown::default();
        let (a, b) = (add("/notes/-", json!("a")), add("/notes/-", json!("b")));
        shown.show(&base, "b", vec![b.clone()], true); // the second call wrote first
        shown.show(&base, "a", vec![a.clone()], true);
        let mut client = base.clone();
        apply_all(&mut client, &[b.clone(), a.clone()]).unwrap();
        let committed = json!({"notes": ["a", "b"]});
        let patch = shown.committed(&[a, b], &committed);
        apply_all(&mut client, &patch).unwrap();
        assert_eq!(client, committed);
    }

    #[test]
    fn a_write_that_no_longer_applies_is_not_shown_and_unshown_merges_go_first() {
        let base = json!({"a": 1});
        let mut shown = Shown::default();
        shown.merged(&[add("/b", json!(2))]);
        let mut state = base.clone();
        apply_all(&mut state, &[add("/b", json!(2))]).unwrap();
        let remove = vec![PatchOp::Remove { path: "/a".into() }];
        let (merged, write) = shown.show(&state, "r", remove.clone(), false);
        assert_eq!(merged, [add("/b", json!(2))], "the merged write goes first");
        assert_eq!(write.as_ref(), Some(&remove));
        let (merged, write) = shown.show(&state, "r", remove, false);
        assert!(
            merged.is_empty() && write.is_none(),
            "a second remove of /a does not apply"
        );
        let mut client = base.clone();
        let shown_ops = [add("/b", json!(2)), PatchOp::Remove { path: "/a".into() }];
        apply_all(&mut client, &shown_ops).unwrap();
        let committed = json!({"b": 2});
        let patch = shown.committed(&[add("/b", json!(2))], &committed);
        apply_all(&mut client, &patch).unwrap();
        assert_eq!(client, committed);
    }

    /// Replays a step's stream on `start`: the live writes, then the commit's patch.
    fn client(start: &Value, live: &[PatchOp], commit: &[PatchOp]) -> Value {
        let mut client = start.clone();
        apply_all(&mut client, live).unwrap();
        apply_all(&mut client, commit).unwrap();
        client
    }

    #[test]
    fn one_writer_over_phases_is_followed_and_what_the_commit_adds_is_streamed() {
        let start = json!({"notes": [], "done": false});
        let mut shown = Shown::default();
        let (a1, a2) = (add("/notes/-", json!("a1")), add("/notes/-", json!("a2")));
        let (_, w1) = shown.show(&start, "a", vec![a1.clone()], true);
        let (_, w2) = shown.show(&start, "a", vec![a2.clone()], true);
        assert!(matches!(shown.view, View::Follows { .. }), "nothing copied");
        shown.merging(&start, &[vec![a1.clone(), a2.clone()], vec![]]);
        shown.merged(&[a1.clone(), a2.clone()]);
        let mut state = start.clone();
        apply_all(&mut state, &[a1.clone(), a2.clone()]).unwrap();
        // A second phase: another call writes on the merged state.
        let b = add("/notes/-", json!("b"));
        let (_, w3) = shown.show(&state, "b", vec![b.clone()], true);
        shown.merging(&state, &[vec![b.clone()]]);
        shown.merged(std::slice::from_ref(&b));
        assert!(
            matches!(shown.view, View::Follows { .. }),
            "still nothing copied"
        );
        // The step's ops go on past what was shown (a result stored after the merges).
        let done = PatchOp::Replace {
            path: "/done".into(),
            value: json!(true),
        };
        let ops = [a1, a2, b, done];
        let mut committed = start.clone();
        apply_all(&mut committed, &ops).unwrap();
        let patch = shown.committed(&ops, &committed);
        assert_eq!(patch, [ops[3].clone()]);
        let live: Vec<PatchOp> = [w1, w2, w3].into_iter().flatten().flatten().collect();
        assert_eq!(client(&start, &live, &patch), committed);
    }

    #[test]
    fn a_write_shown_by_a_call_that_then_failed_is_taken_back_at_commit() {
        let start = json!({"notes": []});
        let mut shown = Shown::default();
        let a = add("/notes/-", json!("a"));
        let (_, live) = shown.show(&start, "a", vec![a], true);
        // The call failed: none of its writes merge.
        shown.merging(&start, &[vec![]]);
        shown.merged(&[]);
        assert!(matches!(shown.view, View::Copy(_)));
        let patch = shown.committed(&[], &start);
        assert_eq!(client(&start, &live.unwrap(), &patch), start);
    }

    #[test]
    fn a_write_nobody_checked_is_checked_on_a_copy() {
        let start = json!({"a": 1});
        let mut shown = Shown::default();
        let remove = PatchOp::Remove { path: "/a".into() };
        let (_, first) = shown.show(&start, "x", vec![remove.clone()], true);
        assert!(first.is_some());
        // A result stored against the phase's state, where /a still is: not shown.
        let (_, stored) = shown.show(&start, "x", vec![remove], false);
        assert!(stored.is_none());
        assert!(matches!(shown.view, View::Copy(_)));
    }
}
