//! The tool builders, one per way of running a tool; each has only the options that
//! apply to it and converts into a [`Tool`].
//!
//! ```
//! use helix_edge_core::tool::Tool;
//! # use schemars::JsonSchema; use serde::Deserialize; use std::time::Duration;
//! # #[derive(Deserialize, JsonSchema)] struct Q { question: String }
//! let ask = Tool::client::<Q>("ask_user", "Ask the user").deadline(Duration::from_secs(300));
//! let tool: Tool = ask.into();
//! assert!(tool.is_client());
//! ```
//!
//! Options that do not apply do not compile:
//!
//! ```compile_fail
//! # use helix_edge_core::tool::Tool; use schemars::JsonSchema;
//! # #[derive(JsonSchema)] struct Q { question: String }
//! Tool::client::<Q>("ask_user", "Ask").approval_always(); // a client tool is not approved
//! ```
//!
//! ```compile_fail
//! # use helix_edge_core::{error::ToolError, tool::Tool}; use schemars::JsonSchema;
//! # #[derive(serde::Deserialize, JsonSchema)] struct P { path: String }
//! let run = |_: P, _| async { Ok::<_, ToolError>(()) };
//! Tool::new("rm", "Delete", run).approval_always().finish_with(); // no approved finisher
//! ```
//!
//! ```compile_fail
//! # use helix_edge_core::{error::ToolError, tool::Tool}; use schemars::JsonSchema;
//! # use std::time::Duration;
//! # #[derive(serde::Deserialize, JsonSchema)] struct P { path: String }
//! let run = |_: P, _| async { Ok::<_, ToolError>(()) };
//! Tool::new("rm", "Delete", run).deadline(Duration::from_secs(1)); // deadlines are the client's
//! ```

use super::{
    Approval, ApprovalDecision, ChildTool, ExecuteFn, Execution, Tool, ToolContext, schema_of,
};
use crate::error::ToolError;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// A server tool: runs in the worker, without approval unless asked for.
#[derive(Clone, Debug)]
pub struct ServerTool(pub(crate) Tool);

/// A server tool that needs a human's approval (always, or when a predicate says so).
#[derive(Clone, Debug)]
pub struct ApprovalTool(pub(crate) Tool);

/// A server tool that runs after the step's other tools, seeing their writes; when it
/// succeeds its result is the run's output and the run completes.
#[derive(Clone, Debug)]
pub struct FinishTool(pub(crate) Tool);

/// A tool the client executes: the run suspends until its result is submitted.
#[derive(Clone, Debug)]
pub struct ClientTool(pub(crate) Tool);

macro_rules! into_tool {
    ($($builder:ident),*) => {$(
        impl From<$builder> for Tool {
            fn from(builder: $builder) -> Tool {
                builder.0
            }
        }

        impl $builder {
            /// Replaces the description the model sees.
            pub fn with_description(mut self, description: impl Into<String>) -> Self {
                self.0.description = description.into();
                self
            }
        }
    )*};
}

into_tool!(ServerTool, ApprovalTool, FinishTool, ClientTool, ChildTool);

macro_rules! declared_output {
    ($($builder:ident),*) => {$(
        impl $builder {
            /// Results must match `O`'s schema; one that does not is a tool error the
            /// model sees (`tool_output_invalid`) — for a client tool, a submitted
            /// result that does not is refused with 400.
            pub fn output<O: JsonSchema>(self) -> Self {
                self.output_schema(schema_of::<O>())
            }

            /// Results must match `schema` (see [`output`](Self::output)).
            pub fn output_schema(mut self, schema: Value) -> Self {
                self.0.output_schema = Some(schema);
                self
            }

            /// Asks providers that support constrained decoding (OpenAI's `strict`,
            /// Anthropic's strict tool use) to hold the arguments to the input schema;
            /// a no-op elsewhere. Arguments are validated either way.
            pub fn strict(mut self) -> Self {
                self.0.strict = true;
                self
            }
        }
    )*};
}

declared_output!(ServerTool, ApprovalTool, FinishTool, ClientTool);

macro_rules! run_timeout {
    ($($builder:ident),*) => {$(
        impl $builder {
            /// Stops a call that runs longer than `timeout` (default: the agent's
            /// `tool_timeout`): its context's signal is raised, its future dropped, and
            /// the model sees a `tool_timeout` error.
            pub fn timeout(mut self, timeout: Duration) -> Self {
                self.0.timeout = Some(timeout);
                self
            }
        }
    )*};
}

run_timeout!(ServerTool, ApprovalTool, FinishTool);

impl Tool {
    /// A server tool with typed input `I`; its schema is derived from `I`.
    // It returns the builder of a server tool, which converts into a `Tool`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new<I, O, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        execute: F,
    ) -> ServerTool
    where
        I: DeserializeOwned + JsonSchema + 'static,
        O: Serialize + 'static,
        F: Fn(I, ToolContext) -> Fut + 'static,
        Fut: Future<Output = Result<O, ToolError>> + 'static,
    {
        let name = name.into();
        let tool_name = name.clone();
        let execute = Rc::new(execute);
        let run: ExecuteFn = Rc::new(move |args: Value, ctx: ToolContext| {
            let input = serde_json::from_value::<I>(args).map_err(|e| ToolError::InputInvalid {
                tool: tool_name.clone(),
                reason: e.to_string(),
            });
            let execute = execute.clone();
            Box::pin(async move {
                let output = execute(input?, ctx).await?;
                serde_json::to_value(output).map_err(ToolError::caused_by)
            })
        });
        ServerTool(Tool::with_execution(
            name,
            description,
            schema_of::<I>(),
            Execution::Server(run),
        ))
    }

    /// A server tool over raw JSON arguments, validated against `input_schema` first.
    pub fn raw<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        execute: F,
    ) -> ServerTool
    where
        F: Fn(Value, ToolContext) -> Fut + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + 'static,
    {
        let name = name.into();
        let tool_name = name.clone();
        let schema = input_schema.clone();
        let execute = Rc::new(execute);
        let run: ExecuteFn = Rc::new(move |args: Value, ctx: ToolContext| {
            let checked =
                crate::schema::validate(&schema, &args).map_err(|reason| ToolError::InputInvalid {
                    tool: tool_name.clone(),
                    reason,
                });
            let execute = execute.clone();
            Box::pin(async move {
                checked?;
                execute(args, ctx).await
            })
        });
        ServerTool(Tool::with_execution(
            name,
            description,
            input_schema,
            Execution::Server(run),
        ))
    }

    /// A client-executed tool with typed input `I` (used for its schema).
    pub fn client<I: JsonSchema>(
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> ClientTool {
        Self::client_raw(name, description, schema_of::<I>())
    }

    /// A client-executed tool with an explicit input schema.
    pub fn client_raw(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> ClientTool {
        let execution = Execution::Client { deadline: None };
        ClientTool(Tool::with_execution(
            name,
            description,
            input_schema,
            execution,
        ))
    }
}

impl ServerTool {
    /// Every call needs approval.
    pub fn approval_always(mut self) -> ApprovalTool {
        self.0.approval = Approval::Always;
        ApprovalTool(self.0)
    }

    /// A call needs approval when `predicate(input, state)` is true. The predicate may
    /// return `bool` or `Result<bool, E>`; an error, like arguments that do not
    /// deserialize into `I`, needs approval (fail closed). It must not panic (see
    /// [`ApprovalDecision`]).
    pub fn approval_when<I, F, D>(mut self, predicate: F) -> ApprovalTool
    where
        I: DeserializeOwned + 'static,
        F: Fn(&I, &Value) -> D + 'static,
        D: ApprovalDecision,
    {
        self.0.approval = Approval::When(Rc::new(move |args: &Value, state: &Value| {
            let input = I::deserialize(args).map_err(|e| e.to_string())?;
            predicate(&input, state).decide()
        }));
        ApprovalTool(self.0)
    }

    /// Runs after the step's other tools, seeing their writes; if it succeeds, its
    /// result becomes the run's output and the run completes.
    pub fn finish_with(mut self) -> FinishTool {
        self.0.finish_with = true;
        FinishTool(self.0)
    }
}

impl ApprovalTool {
    /// Only a user holding `role` (from the deployment's roles claim, in the session
    /// owner's tenant) or the API token may approve or deny its calls; the session's
    /// owner only if they hold it too, and not at all after [`not_by_owner`]. Such calls
    /// are in the inbox of every holder of the role.
    ///
    /// [`not_by_owner`]: ApprovalTool::not_by_owner
    pub fn approval_by_role(mut self, role: impl Into<String>) -> Self {
        let not_owner = self.0.approvers.take().is_some_and(|a| a.not_owner);
        self.0.approvers = Some(crate::store::Approvers {
            role: role.into(),
            not_owner,
        });
        self
    }

    /// With [`approval_by_role`](ApprovalTool::approval_by_role): the session's owner
    /// never decides its calls, even holding the role (separation of duties). Without a
    /// role the agent refuses to build.
    pub fn not_by_owner(mut self) -> Self {
        let role = self.0.approvers.take().map(|a| a.role).unwrap_or_default();
        self.0.approvers = Some(crate::store::Approvers {
            role,
            not_owner: true,
        });
        self
    }
}

impl ApprovalTool {
    /// A call nobody decides within `deadline` is denied — the model is told the
    /// deadline passed (`decidedBy: {"subject": "deadline"}`) — and the run goes on.
    /// The pending call shows its `deadline`, as its notifications do.
    pub fn approval_deadline(mut self, deadline: Duration) -> Self {
        self.0.approval_deadline = Some(deadline);
        self
    }
}

impl ClientTool {
    /// The client must answer within `deadline`, or the call resolves as a "timed out"
    /// tool error and the run continues.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.0.execution = Execution::Client {
            deadline: Some(deadline),
        };
        self
    }
}
