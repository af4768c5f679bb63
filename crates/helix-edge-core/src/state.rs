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
use crate::wire::wire_enum;
use crate::wire::{present, required};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::rc::Rc;

/// One RFC 6902 operation, as helix-edge produces them.
// Written by the derive, read through `PatchWire` (see `crate::wire`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", try_from = "PatchWire")]
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

/// Any [`PatchOp`] as one flat record (see [`crate::wire`]).
#[derive(Deserialize)]
struct PatchWire {
    op: OpName,
    path: String,
    #[serde(default, deserialize_with = "present")]
    value: Option<Value>,
}

wire_enum! {
    #[derive(Clone, Copy)]
    enum OpName {
        Add = "add",
        Remove = "remove",
        Replace = "replace",
    }
}

impl TryFrom<PatchWire> for PatchOp {
    type Error = String;

    fn try_from(w: PatchWire) -> Result<Self, String> {
        let path = w.path;
        Ok(match w.op {
            OpName::Add => Self::Add {
                path,
                value: required(w.value, "value")?,
            },
            OpName::Remove => Self::Remove { path },
            OpName::Replace => Self::Replace {
                path,
                value: required(w.value, "value")?,
            },
        })
    }
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

    /// Applies the operation to `doc`, leaving it unchanged on error.
    pub fn apply(&self, doc: &mut Value) -> Result<(), StateError> {
        self.apply_undoable(doc).map(drop)
    }

    /// Applies the operation and returns how to take it back. A single operation fails
    /// before it mutates anything.
    fn apply_undoable(&self, doc: &mut Value) -> Result<Undo, StateError> {
        let path = self.path();
        let mut segments = parse_pointer(path)?;
        let failed = |reason: &str| StateError::PatchFailed {
            path: path.into(),
            reason: reason.into(),
        };
        let Some(last) = segments.pop() else {
            // The root: add and replace overwrite the whole document.
            return match self {
                Self::Add { value, .. } | Self::Replace { value, .. } => {
                    Ok(Undo::Put(vec![], std::mem::replace(doc, value.clone())))
                }
                Self::Remove { .. } => Err(failed("the root cannot be removed")),
            };
        };
        let parent = resolve(doc, &segments).ok_or_else(|| failed("the parent does not exist"))?;
        let undo = match (self, parent) {
            (Self::Add { value, .. }, Value::Object(members)) => {
                match members.insert(last.clone(), value.clone()) {
                    Some(old) => Undo::Put(with(segments, last), old),
                    None => Undo::Take(with(segments, last)),
                }
            }
            (Self::Add { value, .. }, Value::Array(items)) => {
                let i = match last.as_str() {
                    "-" => items.len(),
                    index => array_index(index, items.len() + 1)
                        .ok_or_else(|| failed("the index is out of bounds"))?,
                };
                items.insert(i, value.clone());
                Undo::Take(with(segments, i.to_string()))
            }
            (Self::Remove { .. }, Value::Object(members)) => {
                let old = members
                    .remove(&last)
                    .ok_or_else(|| failed("the member does not exist"))?;
                Undo::Put(with(segments, last), old)
            }
            (Self::Remove { .. }, Value::Array(items)) => {
                let i = array_index(&last, items.len())
                    .ok_or_else(|| failed("the index is out of bounds"))?;
                Undo::Insert(with(segments, last), items.remove(i))
            }
            (Self::Replace { value, .. }, Value::Object(members)) => {
                let slot = members
                    .get_mut(&last)
                    .ok_or_else(|| failed("the member does not exist"))?;
                Undo::Put(with(segments, last), std::mem::replace(slot, value.clone()))
            }
            (Self::Replace { value, .. }, Value::Array(items)) => {
                let i = array_index(&last, items.len())
                    .ok_or_else(|| failed("the index is out of bounds"))?;
                let old = std::mem::replace(&mut items[i], value.clone());
                Undo::Put(with(segments, last), old)
            }
            _ => return Err(failed("the parent is not an object or an array")),
        };
        Ok(undo)
    }
}

/// How to take back one applied operation; paths are unescaped segments.
enum Undo {
    /// Put this value (back) at the path: an object member, an array item or the root.
    Put(Vec<String>, Value),
    /// Remove the member or item at the path.
    Take(Vec<String>),
    /// Insert this item back into an array at the path's index.
    Insert(Vec<String>, Value),
}

impl Undo {
    /// Restores the document as it was before the operation; `doc` must be exactly as
    /// the operation left it.
    fn apply(self, doc: &mut Value) {
        let (segments, value, insert) = match self {
            Self::Put(segments, value) => (segments, Some(value), false),
            Self::Take(segments) => (segments, None, false),
            Self::Insert(segments, value) => (segments, Some(value), true),
        };
        let Some((last, parent)) = segments.split_last() else {
            if let Some(value) = value {
                *doc = value;
            }
            return;
        };
        match (resolve(doc, parent), value) {
            (Some(Value::Object(members)), Some(value)) => {
                drop(members.insert(last.clone(), value))
            }
            (Some(Value::Object(members)), None) => drop(members.remove(last)),
            (Some(Value::Array(items)), value) => match (last.parse::<usize>(), value) {
                (Ok(i), Some(value)) if insert && i <= items.len() => items.insert(i, value),
                (Ok(i), Some(value)) if i < items.len() => items[i] = value,
                (Ok(i), None) if i < items.len() => drop(items.remove(i)),
                _ => {}
            },
            _ => {}
        }
    }
}

/// `segments` with `last` appended.
fn with(mut segments: Vec<String>, last: String) -> Vec<String> {
    segments.push(last);
    segments
}

/// The unescaped segments of a JSON Pointer (RFC 6901); `""` is the root.
fn parse_pointer(path: &str) -> Result<Vec<String>, StateError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let invalid = |reason: &str| StateError::InvalidPath {
        path: path.into(),
        reason: reason.into(),
    };
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| invalid("a JSON Pointer starts with '/'"))?;
    rest.split('/')
        .map(|segment| {
            let mut out = String::with_capacity(segment.len());
            let mut chars = segment.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => out.push('~'),
                    Some('1') => out.push('/'),
                    _ => return Err(invalid("'~' must be followed by '0' or '1'")),
                }
            }
            Ok(out)
        })
        .collect()
}

/// The value at `segments`, if every one of them exists.
fn resolve<'a>(doc: &'a mut Value, segments: &[String]) -> Option<&'a mut Value> {
    segments.iter().try_fold(doc, |at, segment| match at {
        Value::Object(members) => members.get_mut(segment),
        Value::Array(items) => {
            let i = array_index(segment, items.len())?;
            items.get_mut(i)
        }
        _ => None,
    })
}

/// An array index below `len`, written as RFC 6901 wants: digits, no leading zero.
fn array_index(segment: &str, len: usize) -> Option<usize> {
    let digits = !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit());
    let canonical = segment == "0" || !segment.starts_with('0');
    segment
        .parse::<usize>()
        .ok()
        .filter(|&i| digits && canonical && i < len)
}

/// Applies `ops` in order, all or nothing: on an error `doc` is unchanged.
pub fn apply_all(doc: &mut Value, ops: &[PatchOp]) -> Result<(), StateError> {
    let mut applied = Vec::with_capacity(ops.len());
    for op in ops {
        match op.apply_undoable(doc) {
            Ok(undo) => applied.push(undo),
            Err(e) => {
                for undo in applied.into_iter().rev() {
                    undo.apply(doc);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Whether `op` would apply to `doc`, without applying it.
pub(crate) fn applies_to(doc: &Value, op: &PatchOp) -> bool {
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
                    last == "-" || array_index(last, items.len() + 1).is_some()
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

/// Applies to `state` the change from `before` to `after` (the state as a type sees it,
/// before and after a typed update): keys the type does not know are left alone, keys
/// it dropped are removed, and changed values are set, objects recursively.
pub fn apply_change(state: &mut Value, before: &Value, after: &Value) {
    match (state, before, after) {
        (Value::Object(state), Value::Object(before), Value::Object(after)) => {
            for key in before.keys().filter(|k| !after.contains_key(*k)) {
                state.remove(key);
            }
            for (key, new) in after {
                match (state.get_mut(key), before.get(key)) {
                    (_, Some(old)) if old == new => {}
                    (Some(current), Some(old)) => apply_change(current, old, new),
                    _ => {
                        state.insert(key.clone(), new.clone());
                    }
                }
            }
        }
        (state, before, after) if before != after => *state = after.clone(),
        _ => {}
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
