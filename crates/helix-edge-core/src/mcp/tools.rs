//! A server's listed tools as the agent's [`Tool`]s: named with the server's prefix,
//! filtered by its allow and deny lists, with the input schema the server declared,
//! its output schema checked, an approval policy (the agent's for the tool, or
//! approval for a tool the server marks destructive), and calls whose results the
//! model can read: text, structured content, images and resources.

use super::McpServer;
use super::connection::{Connection, Listed};
use super::waits::Called;
use crate::attachment::Attachment;
use crate::error::ToolError;
use crate::tool::{Approval, Tool, ToolContext, valid_name};
use serde_json::{Value, json};
use std::rc::Rc;

/// How much longer than the server's timeout the runner gives a call: the call's own
/// deadline comes first, so it is cancelled at the server before it is dropped.
const MARGIN: std::time::Duration = std::time::Duration::from_secs(10);

impl McpServer {
    /// Whether the agent takes the server's tool `name` (its allow and deny lists).
    fn takes(&self, name: &str) -> bool {
        let allowed = self
            .allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|a| a == name));
        allowed && !self.deny.iter().any(|d| d == name)
    }

    /// The approval policy of the server's tool `listed`: the agent's, else approval
    /// when the server marks it destructive.
    fn approval_of(&self, listed: &Listed) -> Approval {
        let chosen = self.approvals.iter().find(|(tool, _)| *tool == listed.name);
        match chosen {
            Some((_, approval)) => approval.clone(),
            None if listed.destructive => Approval::Always,
            None => Approval::Never,
        }
    }
}

/// The agent's tools of `listed` through `connection`, and the problems of the ones
/// it cannot take (a name that would not be valid prefixed, a schema that is not an
/// object).
pub(super) fn tools_of(connection: &Rc<Connection>, listed: &[Listed]) -> (Vec<Tool>, Vec<String>) {
    let server = &connection.server;
    let (mut tools, mut problems) = (Vec::new(), Vec::new());
    for listed in listed.iter().filter(|l| server.takes(&l.name)) {
        let name = format!("{}{}", server.prefix, listed.name);
        if !valid_name(&name) {
            problems.push(format!(
                "MCP server '{}': tool '{}' is left out: '{name}' is not a valid tool name",
                server.name, listed.name
            ));
            continue;
        }
        if !listed.input_schema.is_object() {
            problems.push(format!(
                "MCP server '{}': tool '{}' is left out: its input schema is not an object",
                server.name, listed.name
            ));
            continue;
        }
        tools.push(tool(connection, listed, name));
    }
    (tools, problems)
}

/// Tool `name` calling `listed` through `connection`.
fn tool(connection: &Rc<Connection>, listed: &Listed, name: String) -> Tool {
    let server = &connection.server;
    let description = listed.description.clone().unwrap_or_default();
    let (calls, remote) = (connection.clone(), listed.name.clone());
    // The schema as declared, but for the meta-schema URI providers do not want.
    let mut input_schema = listed.input_schema.clone();
    if let Some(schema) = input_schema.as_object_mut() {
        schema.remove("$schema");
    }
    let mut tool: Tool = Tool::raw(name, description, input_schema, move |arguments, ctx| {
        let (connection, remote) = (calls.clone(), remote.clone());
        async move { call(&connection, &remote, arguments, ctx).await }
    })
    .into();
    tool.approval = server.approval_of(listed);
    tool.output_schema = listed.output_schema.clone().filter(Value::is_object);
    tool.timeout = Some(server.timeout + MARGIN);
    // Arguments go to the server as the model gave them.
    tool.state_refs = false;
    tool
}

/// One call of the server's tool `remote`: its progress streamed as `mcp_progress`
/// custom events, its result made what the model reads; or what it asks the user.
async fn call(
    connection: &Connection,
    remote: &str,
    arguments: Value,
    ctx: ToolContext,
) -> Result<Value, ToolError> {
    let server = connection.server.name.clone();
    let progress = |params: Value| {
        let data = json!({ "server": server, "tool": remote, "progress": params });
        ctx.emit("mcp_progress", data);
    };
    let called = connection.call(remote, arguments, &ctx, &progress).await;
    match called.map_err(ToolError::caused_by)? {
        Called::Done(result) => read(result, &ctx),
        Called::Asks(wait) => Err(wait.into()),
    }
}

/// The stand-in for the tools of a server the session is not connected to (it asked
/// for authorization with `challenge`): `{prefix}connect`, which asks the user to.
pub(super) fn connect_tool(connection: &Rc<Connection>, challenge: Option<String>) -> Tool {
    let server = &connection.server;
    let name = format!("{}connect", server.prefix);
    let description = format!(
        "Connects to the MCP server '{}': asks the user to authorize this session there. Call it \
         when you need that server's tools; they are offered once the user connected.",
        server.name
    );
    let connection = connection.clone();
    let schema = json!({ "type": "object", "properties": {} });
    let tool: Tool = Tool::raw(name, description, schema, move |_, ctx| {
        let (connection, challenge) = (connection.clone(), challenge.clone());
        async move {
            let called = connection.connect_call(&ctx, challenge.as_deref()).await;
            match called.map_err(ToolError::caused_by)? {
                Called::Done(result) => Ok(result),
                Called::Asks(wait) => Err(wait.into()),
            }
        }
    })
    .into();
    tool
}

/// What the model reads of a `tools/call` result: its structured content when there
/// is some, else its text blocks (an embedded text resource under its URI, a link as
/// a link); images, audio and blobs are given as attachments. An error result
/// (`isError`) is the tool's error, with its text.
fn read(result: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
    let text =
        |block: &Value, key: &str| block.get(key).and_then(Value::as_str).map(str::to_string);
    let mut texts = Vec::new();
    let blocks = result.get("content").and_then(Value::as_array);
    for block in blocks.into_iter().flatten() {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let resource = block.get("resource").unwrap_or(&Value::Null);
        let uri = text(resource, "uri")
            .or_else(|| text(block, "uri"))
            .unwrap_or_default();
        match kind {
            "text" => texts.extend(text(block, "text")),
            "image" | "audio" => match (text(block, "data"), text(block, "mimeType")) {
                (Some(data), Some(media_type)) if !failed => {
                    ctx.attach(attachment(media_type, data))?;
                }
                _ => {}
            },
            "resource" => match (text(resource, "text"), text(resource, "blob")) {
                (Some(content), _) => texts.push(format!("[{uri}]\n{content}")),
                (None, Some(blob)) if !failed => {
                    let media_type = text(resource, "mimeType").unwrap_or_default();
                    ctx.attach(attachment(media_type, blob).named(uri))?;
                }
                _ => texts.push(format!("[{uri}]")),
            },
            "resource_link" => {
                let name = text(block, "name").unwrap_or_else(|| uri.clone());
                texts.push(format!("[{name}]({uri})"));
            }
            _ => {} // a kind of content this client does not know
        }
    }
    let text = texts.join("\n");
    if failed {
        let text = if text.is_empty() {
            "the tool failed".into()
        } else {
            text
        };
        return Err(ToolError::failed(text));
    }
    Ok(match result.get("structuredContent") {
        Some(structured) if !structured.is_null() => structured.clone(),
        _ => json!({ "text": text }),
    })
}

/// An inline attachment: an image when its media type says so, else a file.
fn attachment(media_type: String, data: String) -> Attachment {
    if media_type.starts_with("image/") {
        Attachment::image(media_type, data)
    } else {
        Attachment::file(media_type, data)
    }
}
