//! Plans checked without running them (feature `plans`), as the session's object serves
//! them: `POST …/plans/validate` reports every problem of the calls it is given against
//! the session's agent and its state now ([`crate::memory::check`]).

use super::capability::{Call, Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::{Operation, ValidatePlanBody, parse_body};
use crate::http::json_response;

/// Checking plans.
pub(super) const PLANS: Capability = Capability {
    operations: &[(Operation::ValidatePlan, |inner, call| {
        Box::pin(inner.validate_plan(call))
    })],
    ..NOTHING
};

impl Inner {
    /// `POST …/plans/validate`.
    async fn validate_plan(&self, call: &Call<'_>) -> Reply {
        let parts = self.attach(call.id)?;
        let calls = parse_body::<ValidatePlanBody>(call.body)?.into_calls()?;
        let report = parts.runner.validate_plan(call.id, &calls).await?;
        json_response(200, &report)
    }
}
