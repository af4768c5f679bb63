//! A call of a server's tool that waits on the user, durably, like an approval: for
//! an authorization (the server refused it: the user connects at the URL its OAuth
//! gives, and the call goes on once the callback's code is exchanged) or for an
//! elicitation (the server asked the user something during the call: the answer goes
//! back to the server, and the call's event stream is resumed after the request —
//! a server that cannot resume its stream hears the request was cancelled instead).
//! Where a waiting call stands is kept in the session's vault; nothing waits in memory.

use super::McpServer;
use super::connection::Connection;
use super::rpc::{Answer, Asked, McpError, Sending, Session};
use crate::journal::Vault;
use crate::tool::{ToolContext, Wait};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What a call came to: its result, or what it asks the user.
pub(super) enum Called {
    Done(Value),
    Asks(Wait),
}

/// Where a call that waits on an elicitation goes on: its MCP session and request, the
/// server's request, and the event its stream is resumed after.
#[derive(Serialize, Deserialize)]
struct Waiting {
    session: Session,
    call: u64,
    asked: Value,
    event: String,
}

impl McpServer {
    fn waiting_key(&self, tool_call_id: &str) -> String {
        format!("mcp:{}:call:{tool_call_id}", self.name)
    }

    /// What `answer` in `session` came to for `ctx`'s call: its result, or the wait for
    /// what the server asked the user on the way.
    fn called(
        &self,
        ctx: &ToolContext,
        session: Session,
        answer: Answer,
    ) -> Result<Called, McpError> {
        match answer.asked {
            Some(asked) => self.asks(ctx, session, asked),
            None => Ok(Called::Done(answer.result)),
        }
    }

    /// The wait for the user's input that `asked` is, its place kept for `ctx`'s call.
    fn asks(&self, ctx: &ToolContext, session: Session, asked: Asked) -> Result<Called, McpError> {
        let Asked {
            id,
            mut params,
            call,
            event_id,
        } = asked;
        let waiting = Waiting {
            session,
            call,
            asked: id,
            event: event_id,
        };
        let kept = serde_json::to_string(&waiting).map_err(|e| self.protocol(e.to_string()))?;
        let key = self.waiting_key(ctx.tool_call_id());
        ctx.vault()
            .set(&key, &kept)
            .map_err(|e| self.protocol(e.to_string()))?;
        let message = params["message"].as_str().unwrap_or_default().to_string();
        let schema = params["requestedSchema"].take();
        Ok(Called::Asks(Wait::elicitation(&self.name, message, schema)))
    }

    /// The wait for the user to connect session `ctx`'s: the URL from the server's OAuth.
    async fn authorize(
        &self,
        ctx: &ToolContext,
        challenge: Option<&str>,
    ) -> Result<Called, McpError> {
        let (start, sign_in) = self
            .authorization(ctx.vault(), ctx.session_id(), challenge)
            .await?;
        Ok(Called::Asks(Wait::authorization(
            &self.name, start, sign_in,
        )))
    }

    /// The user's `answer` to an authorization: the code exchanged, or why not.
    async fn connected(&self, vault: &Vault, answer: &Value) -> Result<(), McpError> {
        match (
            answer["action"].as_str(),
            answer["code"].as_str(),
            answer["state"].as_str(),
        ) {
            (Some("accept"), Some(code), Some(state)) => self.connect(vault, code, state).await,
            (action, ..) => Err(McpError::Authorization {
                server: self.name.clone(),
                reason: format!(
                    "the user did not connect ({})",
                    action.unwrap_or("no answer")
                ),
            }),
        }
    }
}

impl Connection {
    /// Calls the server's tool `name` with `arguments` for `ctx`'s call, or goes on with
    /// it after the user's answer; progress goes to `progress`.
    pub async fn call(
        &self,
        name: &str,
        arguments: Value,
        ctx: &ToolContext,
        progress: &dyn Fn(Value),
    ) -> Result<Called, McpError> {
        let server = &self.server;
        // Where a call of this id waited is taken once: a model may use the id again.
        let key = server.waiting_key(ctx.tool_call_id());
        let waiting = ctx.vault().get(&key).ok().flatten();
        if waiting.is_some() {
            let _ = ctx.vault().remove(&key);
        }
        if let Some(answer) = ctx.answer() {
            if let Some(waiting) = waiting.and_then(|w| serde_json::from_str(&w).ok()) {
                return self.go_on(ctx, waiting, answer, progress).await;
            }
            server.connected(ctx.vault(), answer).await?;
        }
        let params = json!({ "name": name, "arguments": arguments });
        let called = self
            .request(
                "tools/call",
                params,
                ctx.vault(),
                Some(ctx.signal()),
                progress,
            )
            .await;
        match called {
            Ok((answer, session)) => server.called(ctx, session, answer),
            Err(McpError::Unauthorized { challenge, .. }) if server.oauth.is_some() => {
                server.authorize(ctx, challenge.as_deref()).await
            }
            Err(e) => Err(e),
        }
    }

    /// Goes on with the call `waiting` for the user's `answer` to an elicitation: the
    /// answer to the server, and its event stream resumed up to the call's result (or
    /// the next request of the user's).
    async fn go_on(
        &self,
        ctx: &ToolContext,
        waiting: Waiting,
        answer: &Value,
        progress: &dyn Fn(Value),
    ) -> Result<Called, McpError> {
        let server = &self.server;
        let Waiting {
            mut session,
            call,
            asked,
            event,
        } = waiting;
        if server.oauth.is_some() {
            session.bearer = server.access_token(ctx.vault()).await?;
        }
        let mut result = json!({ "action": answer["action"] });
        if let Some(content) = answer.get("content") {
            result["content"] = content.clone();
        }
        server.respond(&session, &asked, result).await?;
        let sending = Sending {
            id: Some(call),
            abort: Some(ctx.signal()),
            progress,
        };
        let answer = server.resume(&session, &event, sending).await?;
        server.called(ctx, session, answer)
    }

    /// The stand-in for the tools of a server the session has not connected to: asks
    /// the user to connect, and says so once they did (the tools are offered from the
    /// next step).
    pub async fn connect_call(
        &self,
        ctx: &ToolContext,
        challenge: Option<&str>,
    ) -> Result<Called, McpError> {
        let server = &self.server;
        match ctx.answer() {
            None => server.authorize(ctx, challenge).await,
            Some(answer) => {
                server.connected(ctx.vault(), answer).await?;
                self.forget_tools(ctx.vault());
                Ok(Called::Done(json!({
                    "connected": server.name,
                    "note": "Its tools are offered from the next step.",
                })))
            }
        }
    }
}
