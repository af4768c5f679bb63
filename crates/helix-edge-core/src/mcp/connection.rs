//! A connection to one MCP server for one session: initialised on first use (the
//! revision negotiated, `notifications/initialized` sent), its MCP session kept in the
//! session's vault (so a session moved to another isolate, or a worker restarted,
//! goes on in it), initialised again when the server forgets it, the tool list read page by page and kept until it is
//! older than the server's `tools_max_age` or the server says it changed, and tool
//! calls with their progress. Requests carry the session's access token where the
//! server needs OAuth ([`super::oauth`]), refreshed once when the server refuses it.

use super::McpServer;
use super::rpc::{Answer, McpError, PROTOCOL_VERSIONS, Sending, Session, millis};
use crate::abort::AbortSignal;
use crate::error::Coded;
use crate::journal::Vault;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::Rc;

/// The most pages of a tool list read (a server that pages forever is cut off).
const MAX_PAGES: usize = 20;

/// How long a failed listing waits before its one more try.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Listed {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// What the server says of its effects (hints: a server is not trusted to lower
    /// an agent's guard, only to raise it): `destructiveHint: true` on a tool not
    /// marked read-only.
    pub destructive: bool,
}

impl Listed {
    /// A tool of a `tools/list` page, if it has a name and an input schema.
    fn read(mut tool: Value) -> Option<Self> {
        let name = tool.get("name")?.as_str()?.to_string();
        let text = |v: &Value| v.as_str().map(str::to_string);
        let hint = |name: &str| {
            tool.pointer(&format!("/annotations/{name}"))
                .and_then(Value::as_bool)
        };
        let destructive =
            hint("destructiveHint") == Some(true) && hint("readOnlyHint") != Some(true);
        Some(Self {
            description: tool.get("description").and_then(text),
            input_schema: tool.get_mut("inputSchema")?.take(),
            output_schema: tool.get_mut("outputSchema").map(Value::take),
            destructive,
            name,
        })
    }
}

/// The connection's session and what it knows.
#[derive(Default)]
struct Known {
    session: Option<Session>,
    next_id: u64,
    /// The tools listed, and when (ms).
    tools: Option<(Rc<[Listed]>, u64)>,
}

/// One session's connection to one server.
pub(super) struct Connection {
    pub server: Rc<McpServer>,
    known: RefCell<Known>,
}

impl Connection {
    pub fn new(server: Rc<McpServer>) -> Self {
        // Request ids from the clock on: a session kept in the vault and used again
        // after a restart never sees one twice (a waiting call's request stays open).
        let next_id = server.transport.now_ms().saturating_mul(1000);
        Self {
            server,
            known: RefCell::new(Known {
                next_id,
                ..Known::default()
            }),
        }
    }

    /// Where the session's MCP session (its id and revision) is kept.
    fn session_key(&self) -> String {
        format!("mcp:{}:session", self.server.name)
    }

    /// Forgets the MCP session, here and in `vault`.
    fn forget_session(&self, vault: &Vault) {
        self.known.borrow_mut().session = None;
        let _ = vault.remove(&self.session_key());
    }

    /// Forgets the session and the tool list (the credentials changed).
    pub fn forget_tools(&self, vault: &Vault) {
        self.forget_session(vault);
        self.known.borrow_mut().tools = None;
    }

    fn next_id(&self) -> u64 {
        let mut known = self.known.borrow_mut();
        known.next_id += 1;
        known.next_id
    }

    /// The session, carrying `bearer`: the one known here or kept in `vault`, else a new
    /// one initialised (and kept).
    async fn session(&self, bearer: &Option<String>, vault: &Vault) -> Result<Session, McpError> {
        let kept = || {
            let kept = vault.get(&self.session_key()).ok().flatten()?;
            serde_json::from_str::<Session>(&kept).ok()
        };
        let known = self.known.borrow().session.clone();
        if let Some(session) = known.or_else(kept) {
            self.known.borrow_mut().session = Some(session.clone());
            return Ok(Session {
                bearer: bearer.clone(),
                ..session
            });
        }
        let server = &self.server;
        let id = self.next_id();
        let initialize = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSIONS[0],
                // Form elicitations wait on the user durably (see `super::tools`).
                "capabilities": { "elicitation": { "form": {} } },
                "clientInfo": { "name": "helix-edge", "version": env!("CARGO_PKG_VERSION") },
            },
        });
        let unsent = Session {
            bearer: bearer.clone(),
            ..Session::default()
        };
        let answer = server
            .send(&unsent, &initialize, request(id, None, &|_| {}))
            .await?;
        let protocol = answer.result.get("protocolVersion").and_then(Value::as_str);
        let protocol = match protocol {
            Some(p) if PROTOCOL_VERSIONS.contains(&p) => p.to_string(),
            other => {
                let reason =
                    format!("it speaks protocol {other:?}, this client {PROTOCOL_VERSIONS:?}");
                return Err(server.protocol(reason));
            }
        };
        let session = Session {
            id: answer.session_id,
            protocol: Some(protocol),
            bearer: bearer.clone(),
        };
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        server.send(&session, &initialized, request_none()).await?;
        self.known.borrow_mut().session = Some(session.clone());
        // The access token is not kept with it (`Session` skips it).
        if let Ok(kept) = serde_json::to_string(&session) {
            let _ = vault.set(&self.session_key(), &kept);
        }
        Ok(session)
    }

    /// Request `method` with `params` in the session of `vault`'s: initialised again once
    /// if the server forgot it, its access token refreshed once if the server refuses
    /// it. The answer may be a request of the user's instead of a result.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        vault: &Vault,
        abort: Option<&AbortSignal>,
        progress: &dyn Fn(Value),
    ) -> Result<(Answer, Session), McpError> {
        let oauth = self.server.oauth.is_some();
        let mut bearer = match oauth {
            true => self.server.access_token(vault).await?,
            false => None,
        };
        let (mut again, mut refresh) = (true, bearer.is_some());
        loop {
            let session = match self.session(&bearer, vault).await {
                // Refused as the session began: the token is refreshed once too.
                Err(McpError::Unauthorized { .. }) if refresh => {
                    refresh = false;
                    bearer = self.server.refused_token(vault).await?;
                    continue;
                }
                session => session?,
            };
            let id = self.next_id();
            let mut params = params.clone();
            if let Some(params) = params.as_object_mut() {
                // Asks for progress notifications, tagged with the request's id.
                params.insert("_meta".into(), json!({ "progressToken": id }));
            }
            let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
            match self
                .server
                .send(&session, &message, request(id, abort, progress))
                .await
            {
                Err(McpError::SessionGone { .. }) if again => {
                    again = false;
                    self.forget_session(vault);
                }
                Err(McpError::Unauthorized { .. }) if refresh => {
                    refresh = false;
                    self.forget_session(vault);
                    bearer = self.server.refused_token(vault).await?;
                    if bearer.is_none() {
                        // Asked again without a token: the challenge says where.
                        continue;
                    }
                }
                Err(e) => return Err(e),
                Ok(answer) => {
                    if answer.tools_changed {
                        self.known.borrow_mut().tools = None;
                    }
                    return Ok((answer, session));
                }
            }
        }
    }

    /// The server's tools: the list kept, or read again when it is too old. Reading
    /// changes nothing at the server, so a failure that may pass is tried once more
    /// after [`RETRY_AFTER`].
    ///
    /// A server that needs the user to connect (again) offers the tools the session
    /// listed last, kept in its vault, so that a call waiting on the authorization is
    /// still the agent's when it goes on (and a new one asks too).
    pub async fn tools(&self, vault: &Vault) -> Result<Rc<[Listed]>, McpError> {
        let now = self.server.transport.now_ms();
        let max_age = millis(self.server.tools_max_age);
        if let Some((tools, at)) = &self.known.borrow().tools
            && now.saturating_sub(*at) < max_age
        {
            return Ok(tools.clone());
        }
        let listed = match self.list(vault).await {
            Err(e) if e.retryable() => {
                self.server.transport.sleep(RETRY_AFTER).await;
                self.list(vault).await
            }
            listed => listed,
        };
        let key = format!("mcp:{}:tools", self.server.name);
        let tools = match listed {
            Ok(tools) => tools,
            Err(e @ McpError::Unauthorized { .. }) => {
                let kept = vault.get(&key).ok().flatten();
                return kept
                    .and_then(|kept| serde_json::from_str::<Vec<Listed>>(&kept).ok())
                    .map(Into::into)
                    .ok_or(e);
            }
            Err(e) => return Err(e),
        };
        if self.server.oauth.is_some()
            && let Ok(kept) = serde_json::to_string(&tools)
        {
            let _ = vault.set(&key, &kept);
        }
        let tools: Rc<[Listed]> = tools.into();
        self.known.borrow_mut().tools = Some((tools.clone(), now));
        Ok(tools)
    }

    /// Reads the tool list, page by page.
    async fn list(&self, vault: &Vault) -> Result<Vec<Listed>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let (answer, _) = self
                .request("tools/list", params, vault, None, &|_| {})
                .await?;
            let mut page = answer.result;
            let Some(Value::Array(listed)) = page.get_mut("tools").map(Value::take) else {
                return Err(self.server.protocol("its tool list has no tools"));
            };
            let count = listed.len();
            let read: Vec<Listed> = listed.into_iter().filter_map(Listed::read).collect();
            if read.len() < count {
                return Err(self
                    .server
                    .protocol("a tool it lists has no name or input schema"));
            }
            tools.extend(read);
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }
}

fn request<'a>(
    id: u64,
    abort: Option<&'a AbortSignal>,
    progress: &'a dyn Fn(Value),
) -> Sending<'a> {
    Sending {
        id: Some(id),
        abort,
        progress,
    }
}

fn request_none() -> Sending<'static> {
    Sending {
        id: None,
        abort: None,
        progress: &|_| {},
    }
}
