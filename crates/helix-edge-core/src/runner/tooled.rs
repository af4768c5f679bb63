//! An agent with the tools a drive adds as it starts (an MCP server's, see
//! [`crate::agent::RUN_TOOLS`]): listed once per drive, so every step of the drive,
//! and a resumed call, sees the same tools. A drive whose agent adds none awaits
//! nothing for it.

use super::{Live, Runner};
use crate::agent::{Agent, RUN_TOOLS};
use crate::host::Level;
use crate::host::LogValue::Str;
use crate::store::Store;
use futures::future::LocalBoxFuture;
use std::rc::Rc;

impl<S: Store> Runner<S> {
    /// `agent` with the tools its capabilities list for `live`'s session; the problems
    /// met are logged (a tool left out, a server that could not be listed). Boxed: a
    /// drive holds only a pointer to it, and a build without such capabilities none
    /// of its code.
    pub(super) fn with_run_tools<'a>(
        &'a self,
        agent: Rc<Agent>,
        live: &'a Live,
    ) -> LocalBoxFuture<'a, Rc<Agent>> {
        Box::pin(async move {
            let sources: Vec<_> = RUN_TOOLS
                .iter()
                .filter_map(|t| t(&agent))
                .cloned()
                .collect();
            if sources.is_empty() {
                return agent;
            }
            let mut extended = (*agent).clone();
            for list in sources {
                let vault =
                    crate::journal::Vault::new(&live.head.id, self.journal.suspension.clone());
                let (tools, problems) = list(vault).await;
                for problem in &problems {
                    self.log(
                        live,
                        Level::Warn,
                        "run_tools_problem",
                        &[("problem", Str(problem))],
                    );
                }
                for tool in tools {
                    if extended.tool(&tool.name).is_some() {
                        let problem = format!(
                            "tool '{}' is left out: the agent has one of that name",
                            tool.name
                        );
                        self.log(
                            live,
                            Level::Warn,
                            "run_tools_problem",
                            &[("problem", Str(&problem))],
                        );
                    } else {
                        extended.tools.push(tool);
                    }
                }
            }
            Rc::new(extended)
        })
    }
}
