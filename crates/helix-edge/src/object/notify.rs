//! The `notify` capability: after each slice the session's outbox is reconciled with
//! the calls that wait on a person (each owes every sink a `call.waiting`, and a
//! `call.resolved` once it stops waiting: [`crate::notify::Outbox`]), and what is due
//! is delivered after the response (`wait_until`), never in the run's way: signed
//! (Standard Webhooks), each try bounded, failures retried from the alarm with waits
//! that double. `GET …/notifications` lists them.

use super::capability::{Call, Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::{ApiError, Operation};
use crate::auth::AuthConfig;
use crate::host::Level;
use crate::http::{internal, json_response};
use crate::notify::{
    DECISION_CALL_PATH, Decision, Delivered, Delivery, Event, EventKind, Notify, Outbox, Waiting,
    Webhook, body, decision_token, signature,
};
use crate::store::{PendingCall, PendingKind, Store};
use crate::worker_host::{config_value, log};
use futures::future::{Either, join_all, select};
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::{AbortController, Date, Delay, Env, Fetch, Headers};

pub(super) const NOTIFY: Capability = Capability {
    routes: &[(DECISION_CALL_PATH, |inner, call| {
        Box::pin(inner.decision_call(call))
    })],
    operations: &[(Operation::ListNotifications, |inner, call| {
        Box::pin(inner.notifications(call))
    })],
    after_slice: Some(|inner, id| {
        Box::pin(async move {
            inner.notify(id).await;
            true
        })
    }),
    next_due: Some(|inner| inner.notification_due()),
    ..NOTHING
};

/// How long one try may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a notification being sent is not due again (past its try's timeout): a
/// crash mid-delivery sends it again after this.
const LEASE_MS: u64 = 15_000;

thread_local! {
    /// The deployment's notifications, read once per isolate.
    static CONFIG: RefCell<Option<Option<Rc<Notify>>>> = const { RefCell::new(None) };
    /// The sessions whose notifications are being delivered (in this isolate).
    static DELIVERING: crate::busy::Sessions = const { RefCell::new(Vec::new()) };
}

/// The notifications the deployment configures, if any (a configuration it refuses is
/// said in the log, once per isolate, and nothing is sent).
pub(crate) fn configured(env: &Env) -> Option<Rc<Notify>> {
    if let Some(known) = CONFIG.with_borrow(Clone::clone) {
        return known;
    }
    let read = match Notify::from_vars(|name| config_value(env, name)) {
        Ok(notify) => notify.map(Rc::new),
        Err(why) => {
            log(
                Level::Error,
                "notify_misconfigured",
                json!({ "error": why }),
            );
            None
        }
    };
    CONFIG.with_borrow_mut(|c| *c = Some(read.clone()));
    read
}

impl Inner {
    /// Writes what the session's waiting calls owe the sinks, then delivers what is due.
    async fn notify(&self, id: &str) {
        let Some(config) = configured(&self.env) else {
            return;
        };
        let Ok(parts) = self.parts() else { return };
        let Ok(Some(loaded)) = parts.runner.store().load(id).await else {
            return;
        };
        let head = &loaded.head;
        // A sub-agent's call is its child's to notify (the child's own calls are).
        let waiting: Vec<Waiting<'_>> = head
            .pending
            .iter()
            .filter(|call| call.kind != PendingKind::Child)
            .map(|call| Waiting {
                call,
                run_id: &head.run.run_id,
            })
            .collect();
        let key = match crate::setup::Setup::get(&self.env, &self.app).map(|s| s.auth.clone()) {
            Ok(AuthConfig::Token(key)) => Some(key),
            _ => None,
        };
        let now = Date::now().as_millis();
        let make = |call: &PendingCall, run: &str, kind: EventKind, sink: usize, key_: &str| {
            let event = Event {
                id: key_,
                kind,
                at: now,
                session: id,
                agent: &head.agent,
                run_id: run,
                call,
                session_link: config.link(&format!("/v1/sessions/{id}")),
                decide: links(&config, key.as_deref(), id, call, kind, now),
            };
            let format = config.webhooks.get(sink).map(|w| w.format);
            body(&event, format.unwrap_or(crate::notify::Format::Json))
        };
        let outbox = Outbox::new(parts.sql.clone());
        let sinks = config.webhooks.len();
        if let Err(e) = outbox.reconcile(id, &waiting, sinks, now, make) {
            log(
                Level::Warn,
                "notify_failed",
                json!({ "session": id, "error": e }),
            );
        }
        // What is owed already goes out even when this slice's writes failed.
        self.deliver(id, config);
    }

    /// Delivers the session's due notifications after the response; when a round sent
    /// any, the session is driven again so that the alarm is set for the next retry.
    fn deliver(&self, id: &str, config: Rc<Notify>) {
        let Ok(parts) = self.parts() else { return };
        let Some(guard) = crate::busy::Busy::take(&DELIVERING, id) else {
            return; // the delivery under way takes the new ones too
        };
        let outbox = Outbox::new(parts.sql.clone());
        let me = self.me.clone();
        let id = id.to_string();
        self.state.wait_until(async move {
            let mut sent_any = false;
            loop {
                let now = Date::now().as_millis();
                let batch = match outbox.take(now, LEASE_MS) {
                    Ok(batch) if !batch.is_empty() => batch,
                    Ok(_) => break,
                    Err(e) => {
                        log(
                            Level::Warn,
                            "notify_failed",
                            json!({ "session": id, "error": e }),
                        );
                        break;
                    }
                };
                sent_any = true;
                let tries = batch.iter().map(|d| send(config.webhooks.get(d.sink), d));
                let results = join_all(tries).await;
                let now = Date::now().as_millis();
                for (d, how) in batch.iter().zip(results) {
                    match outbox.record(d, &how, now) {
                        Ok(true) => {
                            let fields = json!({ "session": id, "notification": d.key,
                                "attempts": d.attempts + 1, "last": format!("{how:?}") });
                            log(Level::Warn, "notification_given_up", fields);
                        }
                        Ok(false) => {}
                        Err(e) => {
                            let fields = json!({ "session": id, "error": e });
                            log(Level::Warn, "notify_failed", fields);
                        }
                    }
                }
            }
            drop(guard);
            if let (true, Some(inner)) = (sent_any, me.upgrade()) {
                inner.schedule(&id);
            }
        });
    }

    /// When the next notification falls due (ms), if one is owed. While a delivery
    /// round is under way it takes what falls due and drives the session when it ends:
    /// the alarm waits at least a lease (never a hot loop on rows it has not taken yet).
    fn notification_due(&self) -> Option<u64> {
        configured(&self.env)?;
        let parts = self.parts().ok()?;
        let due = Outbox::new(parts.sql.clone()).next_due().ok().flatten()?;
        let id = self.id.borrow().clone().unwrap_or_default();
        let delivering = DELIVERING.with_borrow(|d| d.contains(&id));
        Some(match delivering {
            true => due.max(Date::now().as_millis() + LEASE_MS),
            false => due,
        })
    }

    /// The call a decision link names, while it waits (with when it started waiting,
    /// which the link carries too), and the session's agent.
    async fn decision_call(&self, call: &Call<'_>) -> Reply {
        let parts = self.attach(call.id)?;
        let asked: serde_json::Value = serde_json::from_slice(call.body).unwrap_or_default();
        let wanted = asked["call"].as_str().unwrap_or_default();
        let loaded = parts.runner.store().load(call.id).await;
        let loaded = loaded.map_err(|e| internal("decision call", e))?;
        let Some(loaded) = loaded else {
            return Err(ApiError::client(
                404,
                "session_not_found",
                "No such session.",
            ));
        };
        let head = &loaded.head;
        let pending = head.pending.iter().find(|p| p.tool_call_id == wanted);
        // Answered while another call of its step still waits: it waits no more.
        let pending = pending.filter(|p| !parts.runner.has_answer(call.id, &p.answer_id()));
        match pending {
            Some(p) => json_response(200, &json!({ "agent": head.agent, "call": p })),
            None => Err(ApiError::client(
                404,
                "tool_call_not_found",
                "The call does not wait.",
            )),
        }
    }

    /// `GET …/notifications`: the session's notifications, newest first.
    async fn notifications(&self, call: &Call<'_>) -> Reply {
        let Some(config) = configured(&self.env) else {
            let message = "Notifications are not configured: set NOTIFY_WEBHOOK_URL (and NOTIFY_WEBHOOK_SECRET to sign them).";
            return Err(ApiError::new(
                503,
                "notifications_not_configured",
                message,
                false,
            ));
        };
        let parts = self.attach(call.id)?;
        // The session must exist (the outbox of an unknown one is empty, not a 404's).
        self.head(&parts.runner, call.id).await?;
        // A sink's origin only: the rest of a webhook's URL is often its credential.
        let sinks: Vec<String> = config.webhooks.iter().map(|w| origin(&w.url)).collect();
        let listed = Outbox::new(parts.sql.clone())
            .list(&sinks)
            .map_err(|e| internal("notifications", e))?;
        json_response(
            200,
            &json!({ "notifications": listed, "sinks": sinks.len() }),
        )
    }
}

/// The scheme and host of `url` (`https://hooks.slack.com`): its origin without the
/// credentials a user part may carry.
fn origin(url: &str) -> String {
    let origin = crate::api::origin(url);
    match origin.split_once("://") {
        Some((scheme, authority)) => {
            let host = authority.rsplit('@').next().unwrap_or_default();
            format!("{scheme}://{host}")
        }
        None => origin.to_string(),
    }
}

/// The decision links of a waiting approval (not for a role-gated one: a link alone
/// never decides that), signed with the API token; none without one.
fn links(
    config: &Notify,
    key: Option<&str>,
    session: &str,
    call: &PendingCall,
    kind: EventKind,
    now: u64,
) -> Option<(String, String)> {
    let key = key?;
    if kind != EventKind::Waiting || call.kind != PendingKind::Approval || call.approvers.is_some()
    {
        return None;
    }
    let expires = now / 1000 + config.link_ttl_secs;
    let link = |approve| {
        let decision = Decision {
            session: session.into(),
            call: call.tool_call_id.clone(),
            since: call.since,
            approve,
            expires,
        };
        let token = decision_token(key, &decision)?;
        Some(config.link(&format!("/v1/decisions/{token}")))
    };
    Some((link(true)?, link(false)?))
}

/// One try of `d` to its sink.
async fn send(sink: Option<&Webhook>, d: &Delivery) -> Delivered {
    let failed = |status: Option<u16>, error: String| Delivered::Failed { status, error };
    let Some(sink) = sink else {
        return failed(None, "the sink is no longer configured".into());
    };
    let timestamp = Date::now().as_millis() / 1000;
    let headers = Headers::new();
    let mut set = vec![
        ("content-type", "application/json".to_string()),
        ("user-agent", "helix-edge".to_string()),
        ("webhook-id", d.key.clone()),
        ("webhook-timestamp", timestamp.to_string()),
    ];
    if let Some(secret) = &sink.secret {
        set.push((
            "webhook-signature",
            signature(secret, &d.key, timestamp, &d.body),
        ));
    }
    for (k, v) in set {
        if let Err(e) = headers.set(k, &v) {
            return failed(None, e.to_string());
        }
    }
    let body = Some(d.body.as_str().into());
    let request = match crate::outgoing::unredirected(&sink.url, "POST", &headers, body) {
        Ok(request) => request,
        Err(e) => return failed(None, e.to_string()),
    };
    let controller = AbortController::default();
    let signal = controller.signal();
    let fetch = Fetch::Request(request);
    let sent = Box::pin(fetch.send_with_signal(&signal));
    match select(sent, Delay::from(TIMEOUT)).await {
        Either::Left((Ok(resp), _)) => match resp.status_code() {
            status @ 200..=299 => Delivered::Taken { status },
            status => failed(Some(status), format!("the sink answered {status}")),
        },
        Either::Left((Err(e), _)) => failed(None, e.to_string()),
        Either::Right(_) => {
            controller.abort();
            failed(None, format!("no answer in {} s", TIMEOUT.as_secs()))
        }
    }
}
