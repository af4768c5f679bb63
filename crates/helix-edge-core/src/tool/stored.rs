//! Storing a tool's results in the state (feature `plans`): the builders' options that
//! set a tool's [`OutputPath`] and whether it takes state references. See
//! [`crate::memory`].

use super::{ApprovalTool, ChildTool, ClientTool, FinishTool, OutputPath, ServerTool, Tool};

/// The options, for a builder around a [`Tool`] (`$tool` reaches it).
macro_rules! stores_results {
    ($($builder:ty => |$b:ident| $tool:expr),* $(,)?) => {$(
        impl $builder {
            /// Stores every result in the state at `path` (a JSON Pointer; a last
            /// segment `-` appends to an array), as if the model had given it as
            /// `_outputPath`. See [`crate::memory`].
            pub fn output_to(mut self, path: impl Into<String>) -> Self {
                let $b = &mut self;
                let tool: &mut Tool = $tool;
                tool.output_path = OutputPath::Fixed(path.into());
                self
            }

            /// Lets the model choose where to store a result (`_outputPath`), from
            /// `paths`, or from every path of the agent's state schema when `paths` is
            /// empty. See [`crate::memory`].
            pub fn output_paths<P: Into<String>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
                let $b = &mut self;
                let tool: &mut Tool = $tool;
                tool.output_path = OutputPath::Choose(paths.into_iter().map(Into::into).collect());
                self
            }

            /// Passes arguments that look like state references (`"$state.x"`) as
            /// they are, instead of resolving them. See [`crate::memory::reference`].
            pub fn no_state_refs(mut self) -> Self {
                let $b = &mut self;
                let tool: &mut Tool = $tool;
                tool.state_refs = false;
                self
            }
        }
    )*};
}

stores_results!(
    ServerTool => |b| &mut b.0,
    ApprovalTool => |b| &mut b.0,
    FinishTool => |b| &mut b.0,
    ClientTool => |b| &mut b.0,
    ChildTool => |b| &mut b.0,
);
