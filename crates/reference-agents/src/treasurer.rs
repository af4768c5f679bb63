//! `treasurer`: pays invoices, each payment approved by someone else — a user holding
//! the `finance` role in the session owner's tenant, never the owner (separation of
//! duties; the deployment names its roles claim with `JWT_ROLES_CLAIM`). Such calls are
//! in the inbox of every `finance` holder of the tenant. It keeps notes as the
//! assistant does.

use helix_edge::agent::Agent;
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::tool::Tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The role whose holders approve payments.
pub const PAYMENT_APPROVER_ROLE: &str = "finance";

/// Input of `pay_invoice`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PayInvoice {
    /// The invoice's number.
    pub invoice: String,
    /// The amount, in cents.
    pub amount_cents: u64,
}

/// The `treasurer` agent.
pub fn treasurer() -> Result<Agent, DefinitionError> {
    let pay = Tool::new(
        "pay_invoice",
        "Pay an invoice. Someone in finance other than the requester approves every payment.",
        |input: PayInvoice, _| async move {
            Ok::<_, ToolError>(json!({ "paid": input.invoice, "amountCents": input.amount_cents }))
        },
    );
    Agent::builder("treasurer")
        .description("Pays invoices; a finance approver other than the requester approves each payment.")
        .system_prompt(
            "You are a treasurer. Pay invoices with pay_invoice when asked (a finance approver other than \
             the requester approves each payment) and keep notes with add_note.",
        )
        .initial_state(json!({ "notes": [] }))
        .tool(crate::add_note_tool())
        .tool(
            pay.approval_always()
                .approval_by_role(PAYMENT_APPROVER_ROLE)
                .not_by_owner(),
        )
        .build()
}
