//! Plans: the calls of one step as a graph. A call that reads (by a state reference) a
//! place another call of the same step writes (by its output path) depends on it; a
//! step with at least one such edge is a plan. A plan is checked before anything runs —
//! paths the state schema does not have, cycles, two calls writing one place that is
//! not an append — and runs in dependency order, independent calls together.

use super::paths::schema_allows;
use serde_json::Value;
use std::fmt;

/// What one call reads from the state (JSON Pointers of its references) and where its
/// result goes (its output path; a last segment `-` appends).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Access {
    /// The places its references name.
    pub reads: Vec<String>,
    /// Where its result is written, if anywhere.
    pub write: Option<String>,
}

impl Access {
    /// The place written, without a trailing `/-`, and whether it is an append.
    fn written(&self) -> Option<(&str, bool)> {
        let write = self.write.as_deref()?;
        Some(match write.strip_suffix("/-") {
            Some(array) => (array, true),
            None => (write, false),
        })
    }
}

/// One thing wrong with a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// A reference or an output path names a place the state schema does not have.
    UnknownPath {
        /// The call (as labelled by the caller).
        call: String,
        /// The path.
        path: String,
        /// Whether it is a reference (else an output path).
        read: bool,
    },
    /// Calls depend on each other in a circle.
    Cycle {
        /// The calls on it.
        calls: Vec<String>,
    },
    /// Two or more calls write one place that is not an append.
    TwoWriters {
        /// The place.
        path: String,
        /// The calls.
        calls: Vec<String>,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPath { call, path, read } => {
                let what = if *read { "reads" } else { "writes" };
                write!(
                    f,
                    "{call} {what} {path}, which the state schema does not have"
                )
            }
            Self::Cycle { calls } => {
                write!(f, "{} depend on each other in a cycle", calls.join(", "))
            }
            Self::TwoWriters { path, calls } => write!(
                f,
                "{} all write {path} (only appends to one array, '{path}/-', compose)",
                calls.join(", ")
            ),
        }
    }
}

/// Whether one of two places contains the other (or they are the same).
pub(crate) fn overlap(a: &str, b: &str) -> bool {
    let under = |inner: &str, outer: &str| {
        inner.len() > outer.len()
            && inner.starts_with(outer)
            && inner.as_bytes()[outer.len()] == b'/'
    };
    a == b || under(a, b) || under(b, a)
}

/// The calls of one step and what each waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// Per call, the calls it depends on (ascending).
    deps: Vec<Vec<usize>>,
}

impl Graph {
    /// The graph of calls with these accesses (in the step's call order).
    pub fn new(access: &[Access]) -> Self {
        let deps = access
            .iter()
            .enumerate()
            .map(|(i, reader)| {
                (0..access.len())
                    .filter(|&j| j != i)
                    .filter(|&j| {
                        access[j].written().is_some_and(|(place, _)| {
                            reader.reads.iter().any(|r| overlap(r, place))
                        })
                    })
                    .collect()
            })
            .collect();
        Self { deps }
    }

    /// Whether any call depends on another (the step is a plan).
    pub fn is_plan(&self) -> bool {
        self.deps.iter().any(|d| !d.is_empty())
    }

    /// The calls call `i` depends on.
    pub fn deps(&self, i: usize) -> &[usize] {
        self.deps.get(i).map_or(&[], Vec::as_slice)
    }

    /// The calls that depend on call `i`, directly or not.
    pub fn dependants(&self, i: usize) -> Vec<usize> {
        let mut found = vec![false; self.deps.len()];
        let mut todo = vec![i];
        while let Some(at) = todo.pop() {
            for (j, deps) in self.deps.iter().enumerate() {
                if !found[j] && j != i && deps.contains(&at) {
                    found[j] = true;
                    todo.push(j);
                }
            }
        }
        (0..found.len()).filter(|&j| found[j]).collect()
    }

    /// The calls in dependency order, as layers whose calls can run together; `Err`
    /// with the calls left over when some depend on each other in a cycle.
    pub fn layers(&self) -> Result<Vec<Vec<usize>>, Vec<usize>> {
        let n = self.deps.len();
        let mut placed = vec![false; n];
        let mut layers = Vec::new();
        let mut count = 0;
        while count < n {
            let layer: Vec<usize> = (0..n)
                .filter(|&i| !placed[i] && self.deps[i].iter().all(|&d| placed[d]))
                .collect();
            if layer.is_empty() {
                return Err((0..n).filter(|&i| !placed[i]).collect());
            }
            for &i in &layer {
                placed[i] = true;
            }
            count += layer.len();
            layers.push(layer);
        }
        Ok(layers)
    }

    /// Everything wrong with the step as a plan; `labels` name the calls. Unknown paths
    /// are checked when there is a state schema; cycles and two writers of one place
    /// only matter, and are only checked, when the step is a plan.
    pub fn problems(
        &self,
        access: &[Access],
        labels: &[String],
        schema: Option<&Value>,
    ) -> Vec<Problem> {
        let label = |i: usize| {
            labels
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("call {i}"))
        };
        let mut problems = Vec::new();
        if let Some(schema) = schema {
            for (i, a) in access.iter().enumerate() {
                for read in &a.reads {
                    if !schema_allows(schema, read) {
                        let (call, path, read) = (label(i), shown(read), true);
                        problems.push(Problem::UnknownPath { call, path, read });
                    }
                }
                if let Some(write) = a.write.as_deref().filter(|w| !schema_allows(schema, w)) {
                    let (call, path, read) = (label(i), shown(write), false);
                    problems.push(Problem::UnknownPath { call, path, read });
                }
            }
        }
        if !self.is_plan() {
            return problems;
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, a) in access.iter().enumerate() {
            let Some((place, false)) = a.written() else {
                continue;
            };
            if seen.contains(&place) {
                continue;
            }
            seen.push(place);
            let writers: Vec<usize> = (i..access.len())
                .filter(|&j| access[j].written() == Some((place, false)))
                .collect();
            if writers.len() > 1 {
                problems.push(Problem::TwoWriters {
                    path: shown(place),
                    calls: writers.into_iter().map(label).collect(),
                });
            }
        }
        if let Err(left) = self.layers() {
            // Of the calls left over, those on a cycle are the ones that reach themselves.
            let on_cycle: Vec<usize> = left
                .iter()
                .copied()
                .filter(|&i| self.reaches_itself(i))
                .collect();
            problems.push(Problem::Cycle {
                calls: on_cycle.into_iter().map(label).collect(),
            });
        }
        problems
    }

    fn reaches_itself(&self, i: usize) -> bool {
        let mut seen = vec![false; self.deps.len()];
        let mut todo: Vec<usize> = self.deps[i].clone();
        while let Some(at) = todo.pop() {
            if at == i {
                return true;
            }
            if !std::mem::replace(&mut seen[at], true) {
                todo.extend(&self.deps[at]);
            }
        }
        false
    }
}

/// A pointer as the model reads it (`/` for the whole state).
fn shown(pointer: &str) -> String {
    if pointer.is_empty() {
        "/".into()
    } else {
        pointer.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn access(reads: &[&str], write: Option<&str>) -> Access {
        Access {
            reads: reads.iter().map(|r| r.to_string()).collect(),
            write: write.map(str::to_string),
        }
    }

    fn labels(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn a_chain_runs_in_order_and_independent_calls_together() {
        // fetch → check → store, and an unrelated call beside them.
        let calls = [
            access(&[], Some("/order")),
            access(&["/order/id"], Some("/check")),
            access(&["/check", "/order"], Some("/stored/-")),
            access(&[], Some("/weather")),
        ];
        let graph = Graph::new(&calls);
        assert!(graph.is_plan());
        assert_eq!(graph.deps(1), &[0]);
        assert_eq!(graph.deps(2), &[0, 1]);
        assert_eq!(graph.layers(), Ok(vec![vec![0, 3], vec![1], vec![2]]));
        assert_eq!(graph.dependants(0), vec![1, 2]);
        assert_eq!(graph.dependants(1), vec![2]);
        assert!(graph.problems(&calls, &labels(4), None).is_empty());
    }

    #[test]
    fn places_overlap_by_containment_not_by_prefix_text() {
        let reads_parent = [access(&[], Some("/a/b")), access(&["/a"], None)];
        assert_eq!(Graph::new(&reads_parent).deps(1), &[0]);
        let reads_child = [access(&[], Some("/a")), access(&["/a/b/c"], None)];
        assert_eq!(Graph::new(&reads_child).deps(1), &[0]);
        let sibling = [access(&[], Some("/ab")), access(&["/a"], None)];
        assert!(!Graph::new(&sibling).is_plan());
        let append = [access(&[], Some("/items/-")), access(&["/items/0"], None)];
        assert_eq!(Graph::new(&append).deps(1), &[0]);
        let whole = [access(&[], Some("/x")), access(&[""], None)];
        assert_eq!(Graph::new(&whole).deps(1), &[0]);
        // A call's own write is not a dependency.
        assert!(!Graph::new(&[access(&["/x"], Some("/x"))]).is_plan());
    }

    #[test]
    fn a_cycle_names_the_calls_on_it() {
        let calls = [
            access(&["/b"], Some("/a")),
            access(&["/a"], Some("/b")),
            access(&["/b"], Some("/c")),
            access(&[], Some("/d")),
        ];
        let graph = Graph::new(&calls);
        assert_eq!(graph.layers(), Err(vec![0, 1, 2]));
        let problems = graph.problems(&calls, &labels(4), None);
        assert_eq!(
            problems,
            vec![Problem::Cycle {
                calls: vec!["c0".into(), "c1".into()]
            }]
        );
        assert_eq!(
            problems[0].to_string(),
            "c0, c1 depend on each other in a cycle"
        );
    }

    #[test]
    fn two_writers_of_one_place_are_a_problem_in_a_plan_only() {
        let calls = [
            access(&[], Some("/x")),
            access(&[], Some("/x")),
            access(&["/x"], None),
            access(&[], Some("/log/-")),
            access(&[], Some("/log/-")),
        ];
        let problems = Graph::new(&calls).problems(&calls, &labels(5), None);
        assert_eq!(
            problems,
            vec![Problem::TwoWriters {
                path: "/x".into(),
                calls: vec!["c0".into(), "c1".into()]
            }]
        );
        assert_eq!(
            problems[0].to_string(),
            "c0, c1 all write /x (only appends to one array, '/x/-', compose)"
        );
        // Without a reader it is no plan: last write wins, in call order.
        let flat = &calls[..2];
        assert!(Graph::new(flat).problems(flat, &labels(2), None).is_empty());
    }

    #[test]
    fn unknown_paths_are_named_with_their_call() {
        let schema = json!({
            "type": "object",
            "properties": { "order": { "type": "object", "properties": { "id": {} } }, "log": { "type": "array", "items": {} } }
        });
        let calls = [
            access(&["/order/idd"], Some("/orders")),
            access(&["/order/id", "/log/3"], Some("/log/-")),
        ];
        let problems = Graph::new(&calls).problems(&calls, &labels(2), Some(&schema));
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "c0 reads /order/idd, which the state schema does not have",
                "c0 writes /orders, which the state schema does not have",
            ]
        );
    }
}
