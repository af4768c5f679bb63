//! State tracking with RFC 6902 patches.
//!
//! A session's state is a JSON object. Tools never mutate it directly: each tool call
//! gets a [`StateWriter`] over the committed pre-step state and records *step writes*,
//! one canonical list of [`PatchOp`]s. That list is the only thing a step produces, and
//! both the persisted state and the wire `state_patch` chunk are derived from it, so the
//! two can never drift.
//!
//! # The merge contract for parallel tools
//! - Every tool call of a step starts from the committed pre-step state; it never sees a
//!   sibling's uncommitted writes (only its own).
//! - The writes are merged in the step's tool-call order (the model's order), whatever
//!   order the tools finished in, so the outcome is deterministic.
//! - Appends (`add …/-`) compose: every tool's items survive, in call order.
//! - Replaces (and adds to an existing member) are last-write-wins in call order.
//! - An operation that no longer applies to the merged state (say, a replace of a member
//!   a sibling removed) is dropped and reported as a conflict; the rest still apply.
//!
//! # Patch size
//! Writes are recorded at the deepest changed path: appending one item to a 10,000-item
//! array is one `add /items/-`, changing one field deep in an object is one `replace` at
//! that field. [`StateWriter::append`], [`StateWriter::set`] and [`StateWriter::remove`]
//! record the operation directly, without cloning the state; [`StateWriter::update`]
//! takes an arbitrary mutation and derives the operations by [`diff`].

use crate::error::StateError;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::rc::Rc;

/// One RFC 6902 operation, as helix-edge produces them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum PatchOp {
    /// Insert (arrays), append (`…/-`) or set an object member.
    Add {
        /// JSON Pointer.
        path: String,
        /// The value.
        value: Value,
    },
    /// Delete.
    Remove {
        /// JSON Pointer.
        path: String,
    },
    /// Overwrite an existing value.
    Replace {
        /// JSON Pointer.
        path: String,
        /// The value.
        value: Value,
    },
}

impl PatchOp {
    /// The operation's JSON Pointer.
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Remove { path } | Self::Replace { path, .. } => path,
        }
    }

    /// Whether this is an append (`add …/-`).
    pub fn is_append(&self) -> bool {
        matches!(self, Self::Add { path, .. } if path.ends_with("/-"))
    }

    fn operation(&self) -> Result<PatchOperation, StateError> {
        let path = PointerBuf::parse(self.path()).map_err(|e| StateError::InvalidPath {
            path: self.path().into(),
            reason: e.to_string(),
        })?;
        Ok(match self {
            Self::Add { value, .. } => PatchOperation::Add(AddOperation {
                path,
                value: value.clone(),
            }),
            Self::Remove { .. } => PatchOperation::Remove(RemoveOperation { path }),
            Self::Replace { value, .. } => PatchOperation::Replace(ReplaceOperation {
                path,
                value: value.clone(),
            }),
        })
    }

    /// Applies the operation to `doc`, leaving it unchanged on error.
    pub fn apply(&self, doc: &mut Value) -> Result<(), StateError> {
        let op = self.operation()?;
        // A single add/remove/replace fails before it mutates anything.
        json_patch::patch_unsafe(doc, std::slice::from_ref(&op)).map_err(|e| {
            StateError::PatchFailed {
                path: self.path().into(),
                reason: e.kind.to_string(),
            }
        })
    }
}

/// Applies `ops` in order, all or nothing: on an error `doc` is unchanged.
pub fn apply_all(doc: &mut Value, ops: &[PatchOp]) -> Result<(), StateError> {
    let operations = ops
        .iter()
        .map(PatchOp::operation)
        .collect::<Result<Vec<_>, _>>()?;
    json_patch::patch(doc, &operations).map_err(|e| StateError::PatchFailed {
        path: e.path.to_string(),
        reason: e.kind.to_string(),
    })
}

/// Whether `op` would apply to `doc`, without applying it.
fn applies_to(doc: &Value, op: &PatchOp) -> bool {
    match op {
        PatchOp::Replace { path, .. } | PatchOp::Remove { path } => {
            !path.is_empty() && doc.pointer(path).is_some()
        }
        PatchOp::Add { path, .. } => {
            let Some((parent, last)) = path.rsplit_once('/') else {
                return false;
            };
            match doc.pointer(parent) {
                Some(Value::Object(_)) => true,
                Some(Value::Array(items)) => {
                    last == "-"
                        || ((last == "0" || !last.starts_with('0'))
                            && last.parse::<usize>().is_ok_and(|i| i <= items.len()))
                }
                _ => false,
            }
        }
    }
}

/// Escapes one object key or array index as a JSON Pointer segment.
pub fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Appends the operations that turn `old` into `new` (at `path`) to `out`, at the
/// deepest changed paths. Pure appends to an array become `add …/-` operations.
pub fn diff(path: &str, old: &Value, new: &Value, out: &mut Vec<PatchOp>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().filter(|k| !b.contains_key(*k)) {
                out.push(PatchOp::Remove {
                    path: format!("{path}/{}", pointer_segment(key)),
                });
            }
            for (key, bv) in b {
                let child = format!("{path}/{}", pointer_segment(key));
                match a.get(key) {
                    Some(av) => diff(&child, av, bv, out),
                    None => out.push(PatchOp::Add {
                        path: child,
                        value: bv.clone(),
                    }),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if b.len() >= a.len() && b[..a.len()] == a[..] => {
            for item in &b[a.len()..] {
                out.push(PatchOp::Add {
                    path: format!("{path}/-"),
                    value: item.clone(),
                });
            }
        }
        (Value::Array(a), Value::Array(b)) if b.len() < a.len() && a[..b.len()] == b[..] => {
            for i in (b.len()..a.len()).rev() {
                out.push(PatchOp::Remove {
                    path: format!("{path}/{i}"),
                });
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (av, bv)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}/{i}"), av, bv, out);
            }
        }
        _ => out.push(PatchOp::Replace {
            path: path.into(),
            value: new.clone(),
        }),
    }
}

/// One tool call's view of the state and the writes it made.
#[derive(Debug, Default)]
pub struct StateWriter {
    /// The committed pre-step state, shared by every tool of the step.
    base: Rc<Value>,
    /// The canonical record of this tool's writes.
    ops: Vec<PatchOp>,
    /// `base` with `ops` applied; built only when a read or a check needs it, so that
    /// appends to a large array never clone the state.
    view: Option<Value>,
}

impl StateWriter {
    /// A writer over the committed state.
    pub fn new(base: Rc<Value>) -> Self {
        Self {
            base,
            ops: Vec::new(),
            view: None,
        }
    }

    /// The state as this tool sees it: the pre-step state plus its own writes.
    pub fn current(&mut self) -> &Value {
        if self.ops.is_empty() {
            return &self.base;
        }
        self.materialize()
    }

    fn materialize(&mut self) -> &mut Value {
        let base = &self.base;
        let ops = &self.ops;
        self.view.get_or_insert_with(|| {
            let mut v = Value::clone(base);
            for op in ops {
                // Every recorded op was checked against the view it was made on.
                let _ = op.apply(&mut v);
            }
            v
        })
    }

    /// Appends `value` to the array at `path` (`add path/-`).
    pub fn append(&mut self, path: &str, value: Value) -> Result<(), StateError> {
        let is_array = if self.view.is_none() && self.ops.iter().all(PatchOp::is_append) {
            // Appends never change whether a path of the base is an array.
            self.base.pointer(path).is_some_and(Value::is_array)
                || self
                    .materialize()
                    .pointer(path)
                    .is_some_and(Value::is_array)
        } else {
            self.materialize()
                .pointer(path)
                .is_some_and(Value::is_array)
        };
        if !is_array {
            return Err(StateError::InvalidPath {
                path: path.into(),
                reason: "not an array".into(),
            });
        }
        self.record(PatchOp::Add {
            path: format!("{path}/-"),
            value,
        })
    }

    /// Sets the value at `path`: `replace` if it exists, else `add` (the parent must exist).
    pub fn set(&mut self, path: &str, value: Value) -> Result<(), StateError> {
        if path.is_empty() {
            if !value.is_object() {
                return Err(StateError::NotAnObject);
            }
            return self.update(|state| *state = value);
        }
        let exists = if self.ops.is_empty() {
            self.base.pointer(path).is_some()
        } else {
            self.materialize().pointer(path).is_some()
        };
        let op = if exists {
            PatchOp::Replace {
                path: path.into(),
                value,
            }
        } else {
            PatchOp::Add {
                path: path.into(),
                value,
            }
        };
        self.record(op)
    }

    /// Removes the value at `path`, which must exist.
    pub fn remove(&mut self, path: &str) -> Result<(), StateError> {
        if path.is_empty() {
            return Err(StateError::NotAnObject);
        }
        self.record(PatchOp::Remove { path: path.into() })
    }

    /// Applies an arbitrary mutation and records the operations it amounts to.
    pub fn update(&mut self, f: impl FnOnce(&mut Value)) -> Result<(), StateError> {
        let view = self.materialize();
        let before = view.clone();
        f(view);
        if !view.is_object() {
            *view = before;
            return Err(StateError::NotAnObject);
        }
        let mut ops = Vec::new();
        diff("", &before, view, &mut ops);
        self.ops.extend(ops);
        Ok(())
    }

    /// Records `op` once it is known to apply to the current view. While every earlier
    /// write is an append, an op that applies to the base applies to the view too
    /// (appends only lengthen arrays), so the state is not cloned.
    fn record(&mut self, op: PatchOp) -> Result<(), StateError> {
        let only_appends = self.view.is_none() && self.ops.iter().all(PatchOp::is_append);
        if !(only_appends && applies_to(&self.base, &op)) {
            op.apply(self.materialize())?;
        }
        self.ops.push(op);
        Ok(())
    }

    /// The writes made, in order.
    pub fn ops(&self) -> &[PatchOp] {
        &self.ops
    }

    /// Consumes the writer, returning its writes.
    pub fn into_ops(self) -> Vec<PatchOp> {
        self.ops
    }
}

/// The result of merging a step's writes into the committed state.
#[derive(Debug, Default, PartialEq)]
pub struct Merged {
    /// The operations that applied, in order: the step's canonical `state_patch`.
    pub applied: Vec<PatchOp>,
    /// Operations dropped because they no longer applied, with the reason.
    pub conflicts: Vec<(PatchOp, StateError)>,
}

/// Merges the writes of a step's tool calls (given in tool-call order) into `state`,
/// following the module's merge contract.
pub fn merge(state: &mut Value, writes: impl IntoIterator<Item = Vec<PatchOp>>) -> Merged {
    let mut merged = Merged::default();
    for op in writes.into_iter().flatten() {
        match op.apply(state) {
            Ok(()) => merged.applied.push(op),
            Err(e) => merged.conflicts.push((op, e)),
        }
    }
    merged
}
