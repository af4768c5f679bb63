//! A step's calls as the plan runs them ([`super::plan`]): who depends on whom (checked
//! as a plan when they are made), how far each has got, the instances of a call run
//! once per item, and what running them produced.

use crate::agent::Agent;
use crate::error::ToolError;
use crate::memory::{self, Access, Graph};
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::PendingCall;

/// The instances of one call of a step (`_forEach`).
#[allow(
    dead_code,
    reason = "read by the instancing a build registers (feature `plans`)"
)]
pub(crate) struct Instances {
    /// Their results, in item order (`None` while one has not ended).
    pub results: Vec<Option<Message>>,
    /// Where the gathered result is stored, if anywhere.
    pub output: Option<String>,
}

/// A round's run of an instance: its call and item.
pub(crate) type Slot = (usize, usize);

/// A step's calls and how far each has got.
pub(crate) struct StepCalls<'a> {
    /// The calls, as the model made them.
    pub calls: &'a [ToolCall],
    /// Who depends on whom.
    pub graph: Graph,
    /// Per call: `Some(true)` it succeeded, `Some(false)` it failed or did not run,
    /// `None` it has not ended (it waits, or has not been reached).
    pub ended: Vec<Option<bool>>,
    /// Whether calls run now must be claimed first (at most once, in a resumption).
    pub claim: bool,
    /// Per call run once per item (`_forEach`): its instances.
    #[allow(
        dead_code,
        reason = "read by the instancing a build registers (feature `plans`)"
    )]
    pub instanced: Vec<Option<Instances>>,
    /// Instances' results from before (a resumption's: in the transcript, or answers).
    pub earlier: Vec<Message>,
    /// The instances the round runs, by slot (after the step's calls).
    pub slots: Vec<Slot>,
}

/// What running calls produced, indexed like the step's calls.
pub(crate) struct Ran {
    pub results: Vec<Option<Message>>,
    pub writes: Vec<Vec<PatchOp>>,
    pub pending: Vec<PendingCall>,
    /// The writes merged into the state, in order (for the commit).
    pub ops: Vec<PatchOp>,
    /// Instances' results (before the calls' own in the transcript).
    pub instances: Vec<Message>,
}

impl Ran {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            results: vec![None; n],
            writes: vec![Vec::new(); n],
            pending: Vec::new(),
            ops: Vec::new(),
            instances: Vec::new(),
        }
    }
}

impl<'a> StepCalls<'a> {
    /// The step's `calls` (those in `planned`) as a graph; the one error naming each
    /// problem when they are not a valid plan (every planned call then gets it).
    pub(crate) fn new(
        agent: &Agent,
        calls: &'a [ToolCall],
        planned: &[bool],
    ) -> Result<Self, ToolError> {
        // Without state as memory no call depends on another: one round.
        let Some(memory) = memory::memory() else {
            return Ok(Self::of(calls, Graph::new(&[])));
        };
        let schema = agent.state_schema();
        let access: Vec<Access> = calls
            .iter()
            .zip(planned)
            .map(|(call, &planned)| match agent.tool(&call.name) {
                Some(tool) if planned => memory.access(schema, tool, &call.arguments),
                _ => Access::default(),
            })
            .collect();
        let graph = Graph::new(&access);
        let labels: Vec<String> = calls
            .iter()
            .map(|c| format!("call {} ({})", c.id, c.name))
            .collect();
        let problems = graph.problems(&access, &labels, agent.state_schema());
        if !problems.is_empty() {
            let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return Err(ToolError::PlanInvalid(text.join("; ")));
        }
        Ok(Self::of(calls, graph))
    }

    fn of(calls: &'a [ToolCall], graph: Graph) -> Self {
        Self {
            calls,
            graph,
            ended: vec![None; calls.len()],
            claim: false,
            instanced: calls.iter().map(|_| None).collect(),
            earlier: Vec::new(),
            slots: Vec::new(),
        }
    }
}
