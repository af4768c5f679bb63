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

/// One step's shown state.
#[derive(Debug, Default)]
pub(crate) struct Shown {
    /// The state a client following the stream has: taken from the state the first
    /// live write was made on, then every live patch shown. `None` until a tool writes.
    view: Option<Value>,
    /// The operations shown, in stream order.
    ops: Vec<PatchOp>,
    /// Operations merged into the step's state before anything was shown: a client
    /// does not have them yet.
    unshown: Vec<PatchOp>,
}

impl Shown {
    /// A tool's write, made on `base` (the state its phase started from): what to
    /// stream live — first what was merged before it, unshown (on a step's first write
    /// only), then the write itself, or `None` when it does not apply to what the
    /// stream has shown (it is then not shown; the commit corrects the state).
    pub fn show(
        &mut self,
        base: &Value,
        patches: Vec<PatchOp>,
    ) -> (Vec<PatchOp>, Option<Vec<PatchOp>>) {
        let mut merged = Vec::new();
        let view = match &mut self.view {
            Some(view) => view,
            None => {
                // The base has the merged writes: they go out first, so that the
                // client's copy is the base.
                merged = std::mem::take(&mut self.unshown);
                self.ops.extend(merged.iter().cloned());
                self.view.insert(base.clone())
            }
        };
        if apply_all(view, &patches).is_err() {
            return (merged, None);
        }
        self.ops.extend(patches.iter().cloned());
        (merged, Some(patches))
    }

    /// Writes merged into the step's state (`applied`, as they applied).
    pub fn merged(&mut self, applied: &[PatchOp]) {
        if self.view.is_none() {
            self.unshown.extend(applied.iter().cloned());
        }
    }

    /// The step's committed `state_patch`: `ops` (the step's canonical writes) when
    /// nothing was shown, nothing when they are exactly what was shown, else what turns
    /// the shown state into `committed`.
    pub fn committed(self, ops: &[PatchOp], committed: &Value) -> Vec<PatchOp> {
        match self.view {
            None => ops.to_vec(),
            Some(_) if self.ops == ops => Vec::new(),
            Some(view) => {
                let mut out = Vec::new();
                diff("", &view, committed, &mut out);
                out
            }
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
        assert_eq!(shown.show(&base, a.clone()), (vec![], Some(a.clone())));
        assert_eq!(shown.committed(&a, &json!({"notes": ["a"]})), vec![]);
    }

    #[test]
    fn parallel_writes_merged_in_call_order_are_corrected_at_commit() {
        let base = json!({"notes": []});
        let mut shown = Shown::default();
        let (a, b) = (add("/notes/-", json!("a")), add("/notes/-", json!("b")));
        shown.show(&base, vec![b.clone()]); // the second call wrote first
        shown.show(&base, vec![a.clone()]);
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
        let (merged, write) = shown.show(&state, remove.clone());
        assert_eq!(merged, [add("/b", json!(2))], "the merged write goes first");
        assert_eq!(write.as_ref(), Some(&remove));
        let (merged, write) = shown.show(&state, remove);
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
}
