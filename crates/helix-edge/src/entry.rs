//! The worker entry: carries out the core's plan for each request ([`crate::api::plan`]:
//! the auth order, whether the body is read, who answers), authenticates (SPEC §2,
//! fail-closed), enforces the body limit, and forwards every session route to the
//! session's Durable Object (`idFromName(sessionId)`). It never answers 5xx for bad
//! client input. What optional features add to it is registered in [`PAGES`] and
//! [`OPTIONAL`].

use crate::api::{
    AgentsView, ApiError, CreateSessionBody, HEALTHZ_BODY, Operation, Plan, Target, parse_body,
    wants_stream,
};
use crate::app::App;
use crate::auth::{AuthConfig, Caller, Principal, authorize};
use crate::http::{
    ObjectRequest, RawRequest, TRACEPARENT, call_object, error, header, internal, json,
    json_response, read_body,
};
use crate::runner::CreateSession;
use crate::runner::waits::CREATE_PATH;
use crate::setup::Setup;
use crate::store::Owner;
use crate::trace::TraceContext;
use crate::worker_host::random_hex;
use futures::future::LocalBoxFuture;
use worker::{Context, Env, Method, Response, Result};

type Reply = std::result::Result<Response, ApiError>;

/// Answers a request before the API's routes, if it is one of a feature's pages.
type Page =
    for<'a> fn(&'a RawRequest, &'a str, &'a Env, &'a App) -> LocalBoxFuture<'a, Option<Reply>>;

/// The features' pages, tried in order: the test build's routes, a page's sign-in
/// through the identity provider, an MCP server's authorization callback, decision
/// links, the console.
const PAGES: &[Page] = &[
    #[cfg(feature = "test-routes")]
    |req, path, env, app| Box::pin(crate::test_routes::route(req, path, env, app)),
    #[cfg(feature = "users")]
    |req, path, env, _| Box::pin(crate::oidc::route(req, path, env)),
    #[cfg(feature = "mcp")]
    |req, path, env, app| Box::pin(crate::mcp::callback(req, path, env, app)),
    #[cfg(feature = "notify")]
    |req, path, env, app| Box::pin(crate::decisions::route(req, path, env, app)),
    #[cfg(feature = "console")]
    |req, path, _, _| {
        let page = crate::console::serve(&req.method(), path);
        Box::pin(async move { page.map(|r| r.map_err(|e| internal("console", e))) })
    },
];

/// Answers an operation the worker serves itself (with its setup, or from D1), for the
/// user who asks, if a user does.
type Own = for<'a> fn(
    &'a Setup,
    &'a Env,
    &'a App,
    &'a RawRequest,
    Option<&'a Caller>,
) -> LocalBoxFuture<'a, Reply>;

/// Reads a bearer credential as a user's token (`None`: it is not one, or the
/// deployment checks none), given the deployment's auth and the time in seconds.
type UserCheck = for<'a> fn(
    &'a Env,
    &'a AuthConfig,
    &'a str,
    u64,
) -> LocalBoxFuture<'a, Option<std::result::Result<Caller, ApiError>>>;

/// Users' tokens (feature `users`).
#[cfg(feature = "users")]
const USERS: Option<UserCheck> =
    Some(|env, auth, credential, now| Box::pin(crate::users::caller(env, auth, credential, now)));
#[cfg(not(feature = "users"))]
const USERS: Option<UserCheck> = None;

/// Reads the session a request's body names (a chat's), or refuses the body.
type SessionOf = fn(&[u8]) -> Result<String, ApiError>;

/// The API's operations that the worker answers itself or whose session is named in
/// the body, registered by the feature that serves them: the worker's own answer, and
/// how to read the session the body names. (The session object's operations are its
/// capability table's.)
const OPTIONAL: &[(Operation, Option<Own>, Option<SessionOf>)] = &[
    #[cfg(feature = "chat")]
    (
        Operation::Chat,
        None,
        Some(|body| crate::chat::ChatRequest::parse(body).map(|c| c.id)),
    ),
    #[cfg(feature = "openapi")]
    (
        Operation::OpenApi,
        Some(|setup, _, _, _, _| Box::pin(std::future::ready(openapi(setup)))),
        None,
    ),
    // Read from D1, as the session list is.
    #[cfg(feature = "schedules")]
    (
        Operation::ListAllSchedules,
        Some(|setup, env, _, req, caller| {
            Box::pin(crate::list::schedules(setup, env, req, caller))
        }),
        None,
    ),
    #[cfg(feature = "inbox")]
    (
        Operation::Inbox,
        Some(|setup, env, _, req, caller| Box::pin(crate::list::inbox(setup, env, req, caller))),
        None,
    ),
    #[cfg(feature = "usage")]
    (
        Operation::Usage,
        Some(|setup, env, _, req, caller| Box::pin(crate::list::usage(setup, env, req, caller))),
        None,
    ),
];

/// `GET /v1/openapi.json`: the API's document with this worker's agents filled in,
/// rendered once per isolate.
#[cfg(feature = "openapi")]
fn openapi(setup: &Setup) -> Reply {
    thread_local! {
        static DOCUMENT: std::cell::OnceCell<String> = const { std::cell::OnceCell::new() };
    }
    let document = DOCUMENT.with(|d| {
        d.get_or_init(|| crate::api::document(&setup.agents))
            .clone()
    });
    json(200, &document).map_err(|e| internal("openapi", e))
}

/// The worker entry as a function, for workers that add routes of their own in front of
/// helix-edge's: serves the API and answers 404 for anything else. Never fails for
/// client input: every error becomes a JSON body.
pub async fn fetch(req: RawRequest, env: Env, ctx: Context, app: App) -> Result<Response> {
    match dispatch(&req, &env, &ctx, &app).await {
        Ok(resp) => Ok(resp),
        // An answer given before the body is read (a refused credential, a body past
        // the limit) leaves the rest unread: the runtime discards it. (Cancelling the
        // body's stream instead restarts the worker mid-request in workerd.)
        Err(err) => error(&err),
    }
}

async fn dispatch(req: &RawRequest, env: &Env, ctx: &Context, app: &App) -> Reply {
    let url = req.url();
    let path_and_query = crate::api::path_and_query(&url);
    let path = path_and_query.split('?').next().unwrap_or(path_and_query);
    for page in PAGES {
        if let Some(answer) = page(req, path, env, app).await {
            return answer;
        }
    }
    let method = req.method();
    let setup = Setup::get(env, app)?;
    let credential = credential(req);
    let now_secs = worker::Date::now().as_millis() / 1000;
    let caller = match (USERS, credential.as_deref()) {
        (Some(check), Some(c)) => check(env, &setup.auth, c, now_secs).await.transpose()?,
        _ => None,
    };
    // A user reaches every route; which sessions, their objects decide (and the lists).
    // Whether a session token was the credential: its holder decides no role's approval.
    let authorize = |session: Option<&str>| match caller {
        Some(_) => Ok(false),
        None => authorize(&setup.auth, credential.as_deref(), session, now_secs)
            .map(|p| matches!(p, Principal::Session(_)))
            .map_err(ApiError::from),
    };
    let (operation, session, reads_body, target) = match crate::api::plan(&method, path)? {
        Plan::Healthz => return json(200, HEALTHZ_BODY).map_err(|e| internal("healthz", e)),
        Plan::Refuse(e) => {
            authorize(None)?;
            return Err(e);
        }
        Plan::Serve {
            operation,
            session,
            body,
            target,
        } => (operation, session, body, target),
    };
    let optional = OPTIONAL.iter().find(|(o, _, _)| *o == operation);
    let served = optional.is_some() || crate::object::serves(operation);
    // Nobody's body is read before their credential is known good: a valid session
    // token for another session (forbidden below, once the session is known) passes
    // this far, a missing or forged one does not.
    match authorize(None) {
        Ok(_) | Err(ApiError { status: 403, .. }) => {}
        Err(e) => return Err(e),
    }
    let body = match reads_body && served {
        true => Some(read_body(req).await?),
        false => None,
    };
    // A chat names its session in its body: a session token for it is accepted.
    let named = match (optional.and_then(|(_, _, of)| *of), &body) {
        (Some(session_of), Some(body)) => Some(session_of(body)),
        _ => None,
    };
    let named_id = named.as_ref().and_then(|n| n.as_ref().ok());
    let session_token = authorize(named_id.map(String::as_str).or(session))?;
    if !served {
        return Err(ApiError::not_served(operation));
    }
    // The databases' schema is checked in the background, once per isolate.
    let shards = setup.shards.iter();
    let shards = shards.filter_map(|name| Some((name.clone(), env.d1(name).ok()?)));
    ctx.wait_until(crate::migrations::refresh(shards.collect()));
    if let Some(outdated) = crate::migrations::known_outdated() {
        return Err(outdated);
    }
    if let Some((_, Some(own), _)) = optional {
        return own(&setup, env, app, req, caller.as_ref()).await;
    }
    // A run's start or continuation may answer with the run's stream (SPEC §2d).
    let stream = operation.may_stream() && wants_stream(header(req, "accept").as_deref());
    match (target, operation) {
        (Target::Worker, Operation::ListAgents) => {
            json_response(200, &AgentsView::from(&setup.agents))
        }
        (Target::Worker, _) => crate::list::list(&setup, env, req, caller.as_ref()).await,
        (Target::Create, _) => {
            let owner = caller.map(|c| c.user);
            let trace = header(req, TRACEPARENT).and_then(|t| TraceContext::parse(&t));
            let request = (owner, trace, stream);
            create(env, app, body.unwrap_or_default(), request).await
        }
        (Target::Object, _) => {
            let id = match (named, session) {
                (Some(named), _) => named?,
                (None, Some(id)) => id.to_string(),
                // The table gives every other operation a session id.
                (None, None) => return Err(ApiError::route_not_found(path)),
            };
            let request = ObjectRequest {
                method: Method::from(method),
                path: path_and_query,
                last_event_id: header(req, "last-event-id"),
                body,
                user: caller.as_ref().map(Caller::to_header),
                session_token,
                traceparent: header(req, TRACEPARENT),
                stream,
            };
            call_object(env, app.sessions(), &id, request).await
        }
    }
}

/// `Authorization: Bearer <t>`, or `?token=<t>` (EventSource cannot set headers).
fn credential(req: &RawRequest) -> Option<String> {
    let header = header(req, "authorization");
    if let Some(token) = header.as_deref().and_then(|h| h.strip_prefix("Bearer ")) {
        return Some(token.trim().to_string());
    }
    crate::api::query_pairs(&req.url())
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

/// `POST /v1/sessions`: the body is parsed and validated here, once; the session's
/// object gets the runner's request and answers the 201 itself.
async fn create(
    env: &Env,
    app: &App,
    body: Vec<u8>,
    (owner, trace, stream): (Option<Owner>, Option<TraceContext>, bool),
) -> Reply {
    let (options, body) = crate::provider_options::take(&body).map_err(ApiError::validation)?;
    let parsed: CreateSessionBody = parse_body(&body)?;
    let request = CreateSession {
        options,
        owner,
        trace,
        ..parsed.into_request(|| format!("s_{}", random_hex(16)))?
    };
    let id = request.session_id.clone();
    let body = serde_json::to_vec(&request).map_err(|e| internal("create", e))?;
    let request = ObjectRequest {
        stream,
        ..ObjectRequest::post(CREATE_PATH, body)
    };
    call_object(env, app.sessions(), &id, request).await
}
