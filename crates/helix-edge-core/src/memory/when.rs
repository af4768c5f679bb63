//! `_when`: the meta-argument that makes a call conditional on the state — a plan's
//! conditional fork. It is a small predicate over one state reference, parsed and
//! checked, never evaluated as code:
//!
//! - `"†state.order"`: the value is present (there, and not `null`);
//! - `"!†state.order"`: it is absent;
//! - `"†state.check.ok == true"`, `"$state.order.status != \"paid\""`: equality with a
//!   JSON literal (an absent value equals `null`; numbers compare by value);
//! - `"†state.order.total > 100"` (also `>=`, `<`, `<=`): numeric comparison with a
//!   number; a value that is not a number makes the call fail rather than guess.
//!
//! `_when` is one predicate or an array of them, all of which must hold. The call is
//! decided just before it would run, after the calls whose results its predicate reads
//! (the predicate's reference is one of the call's reads): when it does not hold, the
//! call is skipped — nothing runs, no approval is asked, and the model reads why.
//!
//! ```
//! use helix_edge_core::memory::when::Conditions;
//! use serde_json::json;
//! let when = Conditions::parse(&json!("†state.order.total > 100")).unwrap();
//! assert_eq!(when.unmet(&json!({ "order": { "total": 250 } })), Ok(None));
//! assert!(when.unmet(&json!({ "order": { "total": 42 } })).unwrap().is_some());
//! ```

use super::reference;
use serde_json::Value;
use std::cmp::Ordering;

/// The meta-argument's name.
pub const WHEN: &str = "_when";

/// How a predicate tests the value it names.
#[derive(Debug, Clone, PartialEq)]
enum Test {
    Present,
    Absent,
    Equal(Value),
    NotEqual(Value),
    /// Holds when the value compares to the number with one of these orderings.
    Compare(Vec<Ordering>, f64),
}

/// One predicate: a place in the state and its test.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    text: String,
    pointer: String,
    test: Test,
}

/// A call's `_when`: every condition must hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conditions(Vec<Condition>);

impl Condition {
    /// Parses one predicate (see the module's documentation).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{WHEN} '{text}' {why}");
        let trimmed = text.trim();
        let (negated, rest) = match trimmed.strip_prefix('!') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, trimmed),
        };
        let end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '=' | '!' | '<' | '>'))
            .unwrap_or(rest.len());
        let (reference, tail) = rest.split_at(end);
        let pointer = match reference::parse(reference) {
            Some(Ok(pointer)) => pointer,
            Some(Err(reason)) => return Err(bad(&format!("has a {reason}"))),
            None => {
                return Err(bad(
                    "must start with a state reference (†state.… or $state.…)",
                ));
            }
        };
        let tail = tail.trim();
        let test = if tail.is_empty() {
            if negated { Test::Absent } else { Test::Present }
        } else if negated {
            return Err(bad("may negate a bare reference only ('!†state.x')"));
        } else {
            let op_len = tail
                .find(|c: char| !matches!(c, '=' | '!' | '<' | '>'))
                .unwrap_or(tail.len());
            let (op, literal) = tail.split_at(op_len);
            let literal: Value = serde_json::from_str(literal.trim()).map_err(|_| {
                bad("must compare with a JSON literal (a number, \"text\", true, false or null)")
            })?;
            let number = || {
                literal
                    .as_f64()
                    .ok_or_else(|| bad(&format!("compares with '{op}', which needs a number")))
            };
            match op {
                "==" => Test::Equal(literal),
                "!=" => Test::NotEqual(literal),
                "<" => Test::Compare(vec![Ordering::Less], number()?),
                "<=" => Test::Compare(vec![Ordering::Less, Ordering::Equal], number()?),
                ">" => Test::Compare(vec![Ordering::Greater], number()?),
                ">=" => Test::Compare(vec![Ordering::Greater, Ordering::Equal], number()?),
                _ => return Err(bad("has no operator this knows (==, !=, <, <=, >, >=)")),
            }
        };
        Ok(Self {
            text: trimmed.to_string(),
            pointer,
            test,
        })
    }

    /// The JSON Pointer of the place it reads.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// Whether it holds in `state`; `Err` when a numeric comparison meets a value that
    /// is not a number.
    pub fn holds(&self, state: &Value) -> Result<bool, String> {
        let value = state.pointer(&self.pointer).unwrap_or(&Value::Null);
        Ok(match &self.test {
            Test::Present => !value.is_null(),
            Test::Absent => value.is_null(),
            Test::Equal(literal) => same(value, literal),
            Test::NotEqual(literal) => !same(value, literal),
            Test::Compare(orderings, number) => {
                let Some(found) = value.as_f64() else {
                    return Err(format!(
                        "{WHEN} '{}' compares a number, but the state holds {value} there",
                        self.text
                    ));
                };
                found
                    .partial_cmp(number)
                    .is_some_and(|o| orderings.contains(&o))
            }
        })
    }
}

/// JSON equality, numbers by value (`1 == 1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

impl Conditions {
    /// Parses a `_when` value: one predicate or an array of them.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let texts: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        texts
            .into_iter()
            .map(|text| match text {
                Value::String(text) => Condition::parse(text),
                other => Err(format!(
                    "{WHEN} must be a predicate string or an array of them, got {other}"
                )),
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Takes `_when` out of a call's `arguments`: `None` when it has none.
    pub fn take(arguments: &mut Value) -> Result<Option<Self>, String> {
        let given = arguments
            .as_object_mut()
            .and_then(|a| a.remove(WHEN))
            .filter(|v| !v.is_null());
        given.as_ref().map(Self::parse).transpose()
    }

    /// The places the conditions read.
    pub fn pointers(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(Condition::pointer)
    }

    /// `None` when every condition holds in `state`, else why the call is skipped.
    pub fn unmet(&self, state: &Value) -> Result<Option<String>, String> {
        for condition in &self.0 {
            if !condition.holds(state)? {
                return Ok(Some(format!(
                    "skipped: its condition {WHEN} '{}' does not hold",
                    condition.text
                )));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn holds(text: &str, state: &Value) -> Result<bool, String> {
        Condition::parse(text)?.holds(state)
    }

    #[test]
    fn presence_equality_and_numeric_comparison() {
        let state =
            json!({ "order": { "total": 250, "status": "paid", "note": null }, "ok": true });
        for (text, expected) in [
            ("†state.order", true),
            ("$state.order.note", false),
            ("!$state.order.note", true),
            ("! †state.missing", true),
            ("†state.ok == true", true),
            ("†state.ok != true", false),
            ("$state.order.status == \"paid\"", true),
            ("$state.order.status != \"paid\"", false),
            ("$state.missing == null", true),
            ("$state.order.total == 250.0", true),
            ("$state.order.total > 100", true),
            ("$state.order.total >= 250", true),
            ("$state.order.total < 250", false),
            ("$state.order.total <= 250", true),
            ("  $state.order.total>100  ", true),
        ] {
            assert_eq!(holds(text, &state), Ok(expected), "{text}");
        }
    }

    #[test]
    fn a_numeric_comparison_with_no_number_there_fails_rather_than_guessing() {
        let err = holds("$state.status > 1", &json!({ "status": "paid" })).unwrap_err();
        assert_eq!(
            err,
            "_when '$state.status > 1' compares a number, but the state holds \"paid\" there"
        );
        assert!(holds("$state.missing > 1", &json!({})).is_err());
    }

    #[test]
    fn malformed_predicates_say_why() {
        for (text, why) in [
            ("state.ok", "must start with a state reference"),
            ("$state..ok", "has a malformed state reference"),
            ("$state.ok = true", "no operator this knows"),
            ("$state.ok === true", "no operator this knows"),
            ("$state.ok == yes", "must compare with a JSON literal"),
            ("$state.n > \"5\"", "which needs a number"),
            ("!$state.ok == true", "may negate a bare reference only"),
            (
                "$state.ok == true && $state.x",
                "must compare with a JSON literal",
            ),
        ] {
            let err = Condition::parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
        let err = Conditions::parse(&json!(3)).unwrap_err();
        assert!(err.contains("a predicate string or an array"), "{err}");
    }

    #[test]
    fn every_condition_of_an_array_must_hold_and_the_first_unmet_is_named() {
        let mut args = json!({ "id": 1, "_when": ["†state.a", "†state.b > 1"] });
        let when = Conditions::take(&mut args).unwrap().unwrap();
        assert_eq!(args, json!({ "id": 1 }));
        assert_eq!(when.pointers().collect::<Vec<_>>(), ["/a", "/b"]);
        assert_eq!(when.unmet(&json!({ "a": 1, "b": 2 })), Ok(None));
        assert_eq!(
            when.unmet(&json!({ "a": 1, "b": 0 })),
            Ok(Some(
                "skipped: its condition _when '†state.b > 1' does not hold".into()
            ))
        );
        assert_eq!(Conditions::take(&mut json!({ "_when": null })), Ok(None));
    }
}
