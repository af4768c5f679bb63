//! Checking a plan against a session without running it ([`crate::memory::check`]):
//! its agent's tools and state schema, and its state as it is now.

use crate::memory::check::{PlanReport, PlannedCall, check};
use crate::runner::{RunError, Runner};
use crate::store::Store;

impl<S: Store> Runner<S> {
    /// What is wrong with `calls` as a plan of session `session_id`, and how they would
    /// run; nothing runs and nothing changes.
    pub async fn validate_plan(
        &self,
        session_id: &str,
        calls: &[PlannedCall],
    ) -> Result<PlanReport, RunError> {
        let live = self.load(session_id).await?;
        let agent = self.agent(&live.head.agent)?;
        Ok(check(
            agent.tools(),
            agent.state_schema(),
            &live.state,
            calls,
        ))
    }
}
