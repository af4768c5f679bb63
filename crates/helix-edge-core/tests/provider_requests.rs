//! The HTTP requests built for each provider, checked against the providers' documented
//! shapes over several turns (tool calls and results round-trip), and the configuration
//! rules of SPEC §6.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::error::ProviderError;
use helix_edge_core::message::{Message, Thinking, ToolCall};
use helix_edge_core::model::{CacheTtl, ModelRequest, ModelSettings, ToolSpec};
use helix_edge_core::provider::{ProviderConfig, ProviderKind};
use serde_json::{Map, Value, json};

fn config(vars: &[(&str, &str)]) -> Result<ProviderConfig, helix_edge_core::error::ProviderError> {
    ProviderConfig::from_vars(|k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
}

fn transcript() -> Vec<Message> {
    let call = ToolCall {
        id: "call_1".into(),
        name: "get_weather".into(),
        arguments: json!({"city": "Paris"}),
    };
    vec![
        Message::user("Weather in Paris?"),
        Message::Assistant {
            content: "Let me check.".into(),
            tool_calls: vec![call.clone()],
            thinking: vec![
                Thinking {
                    content: "Need the tool.".into(),
                    signature: Some("sig-1".into()),
                    redacted: None,
                },
                Thinking {
                    redacted: Some("opaque".into()),
                    ..Default::default()
                },
                // Another provider's reasoning (unsigned): no request carries it, neither
                // to Anthropic (it has no signature to check) nor to OpenAI's format.
                Thinking {
                    content: "Reasoning of an OpenAI-format model.".into(),
                    ..Default::default()
                },
            ],
            metadata: None,
        },
        Message::tool_result(&call, json!({"temp": 21})),
        Message::User {
            content: "Finish with __finish__.".into(),
            attachments: vec![],
            metadata: Some(Map::new()),
        },
        Message::assistant_text("It is 21°C."),
        Message::tool_error(
            &call,
            "tool_denied",
            "Tool call was not approved by the user",
        ),
    ]
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        strict: false,
    }]
}

fn body(
    config: &ProviderConfig,
    settings: &ModelSettings,
) -> (String, Vec<(String, String)>, Value) {
    let messages = transcript();
    let request = ModelRequest {
        system: "Be brief.".into(),
        messages: &messages,
        tools: tools(),
        settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };
    let http = config.request(&request);
    (
        http.url,
        http.headers,
        serde_json::from_str(&http.body).unwrap(),
    )
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn openai_chat_completions_round_trips_tool_calls_and_results() {
    let c = config(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "sk-1")]).unwrap();
    let settings = ModelSettings {
        temperature: Some(0.5),
        max_output_tokens: Some(256),
        ..Default::default()
    };
    let (url, headers, body) = body(&c, &settings);
    assert_eq!(url, "https://api.openai.com/v1/chat/completions");
    assert_eq!(header(&headers, "authorization"), Some("Bearer sk-1"));
    assert_eq!(
        body,
        json!({
            "model": "gpt-4o-mini",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "Let me check.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\":21}"},
                {"role": "user", "content": "Finish with __finish__."},
                {"role": "assistant", "content": "It is 21°C."},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"code\":\"tool_denied\",\"error\":\"Tool call was not approved by the user\"}"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "get_weather", "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
            }}],
            "tool_choice": "auto",
            "temperature": 0.5,
            "max_completion_tokens": 256
        })
    );
}

#[test]
fn compatible_servers_get_max_tokens_and_no_key_when_none_is_set() {
    let c = config(&[
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", "http://127.0.0.1:9000/v1/"),
        ("LLM_MODEL", "local"),
    ])
    .unwrap();
    let settings = ModelSettings {
        max_output_tokens: Some(64),
        model: Some("agent-model".into()),
        ..Default::default()
    };
    let (url, headers, body) = body(&c, &settings);
    assert_eq!(url, "http://127.0.0.1:9000/v1/chat/completions");
    assert_eq!(header(&headers, "authorization"), None);
    assert_eq!(
        (
            body["max_tokens"].clone(),
            body.get("max_completion_tokens")
        ),
        (json!(64), None)
    );
    assert_eq!(
        body["model"], "agent-model",
        "the agent's model overrides the deployment's"
    );
}

/// Anthropic's own thinking goes back signed or redacted, exactly as received; unsigned
/// thinking (another provider's) is left out.
#[test]
fn anthropic_messages_group_tool_results_and_send_thinking_back() {
    let c = config(&[("LLM_PROVIDER", "anthropic"), ("LLM_API_KEY", "sk-ant")]).unwrap();
    let (url, headers, body) = body(&c, &ModelSettings::default());
    assert_eq!(url, "https://api.anthropic.com/v1/messages");
    assert_eq!(header(&headers, "x-api-key"), Some("sk-ant"));
    assert_eq!(header(&headers, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(&headers, "authorization"), None);
    assert_eq!(
        body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "stream": true,
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Need the tool.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "{\"temp\":21}"},
                    {"type": "text", "text": "Finish with __finish__."}
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "It is 21°C."}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "is_error": true,
                     "content": "{\"code\":\"tool_denied\",\"error\":\"Tool call was not approved by the user\"}"}
                ]}
            ],
            "tools": [{"name": "get_weather", "description": "Weather for a city",
                       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
        })
    );
}

#[test]
fn workers_ai_uses_its_openai_endpoint_for_the_account() {
    let c = config(&[
        ("LLM_PROVIDER", "workers-ai"),
        ("CF_ACCOUNT_ID", "acc123"),
        ("LLM_API_KEY", "cf-token"),
    ])
    .unwrap();
    assert_eq!(c.kind, ProviderKind::WorkersAi);
    let (url, headers, body) = body(&c, &ModelSettings::default());
    assert_eq!(
        url,
        "https://api.cloudflare.com/client/v4/accounts/acc123/ai/v1/chat/completions"
    );
    assert_eq!(header(&headers, "authorization"), Some("Bearer cf-token"));
    assert_eq!(body["model"], "@cf/meta/llama-3.3-70b-instruct-fp8-fast");
    assert_eq!(body.get("stream_options"), None);
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert!(
        config(&[("LLM_PROVIDER", "workers-ai")]).is_err(),
        "needs an account id or a base URL"
    );
}

#[test]
fn provider_selection_follows_spec_defaults_and_rejects_bad_values() {
    assert_eq!(
        config(&[]).unwrap().kind,
        ProviderKind::Demo,
        "no key: demo"
    );
    assert_eq!(
        config(&[("LLM_API_KEY", "k")]).unwrap().kind,
        ProviderKind::OpenAi,
        "a key alone: openai"
    );
    assert_eq!(
        config(&[("LLM_PROVIDER", "demo"), ("LLM_API_KEY", "k")])
            .unwrap()
            .kind,
        ProviderKind::Demo
    );
    assert!(config(&[("LLM_PROVIDER", "gpt")]).is_err());
    assert!(config(&[("LLM_PROVIDER", "openai"), ("LLM_BASE_URL", "ftp://x")]).is_err());
    assert!(config(&[("LLM_MAX_RETRIES", "many")]).is_err());
    let Err(ProviderError::NotConfigured(keyless)) = config(&[("LLM_PROVIDER", "openai")]) else {
        panic!("a provider's own endpoint with no key is not configured");
    };
    assert!(
        keyless.contains("https://api.openai.com/v1, which needs LLM_API_KEY"),
        "{keyless}"
    );
    let local = [
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", "http://127.0.0.1:9000/v1"),
    ];
    assert!(config(&local).is_ok(), "a local server may need no key");
    let c = config(&[("LLM_API_KEY", "sk-very-secret")]).unwrap();
    assert!(
        !format!("{c:?}").contains("sk-very-secret"),
        "the key never appears in debug output"
    );
}

#[test]
fn strict_tools_are_sent_closed_and_marked_strict_to_both_providers() {
    let messages = [Message::user("hi")];
    let settings = ModelSettings::default();
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]});
    let tools = |strict| {
        vec![ToolSpec {
            name: "get_weather".into(),
            description: "d".into(),
            input_schema: schema.clone(),
            strict,
        }]
    };
    let request = |strict| ModelRequest {
        system: String::new(),
        messages: &messages,
        tools: tools(strict),
        settings: &settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };
    let closed = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": ["string", "null"]}},
        "required": ["city", "unit"],
        "additionalProperties": false
    });

    let openai = config(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "k")]).unwrap();
    let body: Value = serde_json::from_str(&openai.request(&request(true)).body).unwrap();
    let function = &body["tools"][0]["function"];
    assert_eq!(function["strict"], json!(true));
    assert_eq!(function["parameters"], closed);
    let body: Value = serde_json::from_str(&openai.request(&request(false)).body).unwrap();
    assert_eq!(body["tools"][0]["function"].get("strict"), None);
    assert_eq!(body["tools"][0]["function"]["parameters"], schema);

    let anthropic = config(&[("LLM_PROVIDER", "anthropic"), ("LLM_API_KEY", "k")]).unwrap();
    let http = anthropic.request(&request(true));
    let body: Value = serde_json::from_str(&http.body).unwrap();
    assert_eq!(body["tools"][0]["strict"], json!(true));
    assert_eq!(body["tools"][0]["input_schema"], closed);
    assert_eq!(
        header(&http.headers, "anthropic-beta"),
        Some("structured-outputs-2025-11-13")
    );
    let http = anthropic.request(&request(false));
    assert_eq!(header(&http.headers, "anthropic-beta"), None);
    let body: Value = serde_json::from_str(&http.body).unwrap();
    assert_eq!(body["tools"][0].get("strict"), None);
}

#[test]
fn attachments_reach_each_provider_in_its_own_content_parts() {
    let attachment = |v: Value| serde_json::from_value(v).unwrap();
    let messages = [Message::User {
        content: "What is in these?".into(),
        attachments: vec![
            attachment(json!({"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="})),
            attachment(
                json!({"type": "image", "mediaType": "image/jpeg", "url": "https://e.x/cat.jpg"}),
            ),
            attachment(
                json!({"type": "file", "mediaType": "application/pdf", "data": "JVBERi0=", "name": "a.pdf"}),
            ),
            attachment(
                json!({"type": "file", "mediaType": "application/pdf", "url": "https://e.x/b.pdf", "name": "b.pdf"}),
            ),
            attachment(
                json!({"type": "file", "mediaType": "text/plain", "data": "aGVsbG8=", "name": "c.txt"}),
            ),
        ],
        metadata: Some(Map::from_iter([("hidden".to_string(), json!(true))])),
    }];
    let settings = ModelSettings::default();
    let request = ModelRequest {
        system: String::new(),
        messages: &messages,
        tools: vec![],
        settings: &settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };

    let openai = config(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "k")]).unwrap();
    let body: Value = serde_json::from_str(&openai.request(&request).body).unwrap();
    assert_eq!(
        body["messages"][0],
        json!({"role": "user", "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "https://e.x/cat.jpg"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
            {"type": "text", "text": "[Attachment: b.pdf (application/pdf) at https://e.x/b.pdf]"},
            {"type": "file", "file": {"filename": "c.txt", "file_data": "data:text/plain;base64,aGVsbG8="}}
        ]}),
        "metadata never reaches the model"
    );

    let anthropic = config(&[("LLM_PROVIDER", "anthropic"), ("LLM_API_KEY", "k")]).unwrap();
    let body: Value = serde_json::from_str(&anthropic.request(&request).body).unwrap();
    assert_eq!(
        body["messages"][0],
        json!({"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://e.x/cat.jpg"}},
            {"type": "document", "title": "a.pdf", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
            {"type": "document", "title": "b.pdf", "source": {"type": "url", "url": "https://e.x/b.pdf"}},
            {"type": "document", "title": "c.txt", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
            {"type": "text", "text": "What is in these?"}
        ]})
    );
}

#[test]
fn prompt_caching_marks_anthropic_breakpoints_and_keys_openai_by_session() {
    let messages = transcript();
    let request = |settings| ModelRequest {
        system: "Be brief.".into(),
        messages: &messages,
        tools: tools(),
        settings,
        options: None,
        session_id: "sess-42",
        abort: Default::default(),
    };
    let five = ModelSettings {
        prompt_cache: Some(CacheTtl::FiveMinutes),
        ..Default::default()
    };
    let hour = ModelSettings {
        prompt_cache: Some(CacheTtl::OneHour),
        ..Default::default()
    };
    let off = ModelSettings::default();

    let anthropic = config(&[("LLM_PROVIDER", "anthropic"), ("LLM_API_KEY", "k")]).unwrap();
    let body: Value = serde_json::from_str(&anthropic.request(&request(&five)).body).unwrap();
    let eph = json!({"type": "ephemeral"});
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": eph}])
    );
    assert_eq!(body["tools"][0]["cache_control"], eph, "the last tool");
    let marked: Vec<(usize, usize)> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            let blocks = m["content"].as_array().unwrap();
            blocks
                .iter()
                .enumerate()
                .filter(|(_, b)| b.get("cache_control").is_some())
                .map(move |(j, _)| (i, j))
                .collect::<Vec<_>>()
        })
        .collect();
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(
        marked,
        [(2, 1), (4, 0)],
        "the last block of the two latest user turns"
    );
    let http = anthropic.request(&request(&hour));
    assert_eq!(
        header(&http.headers, "anthropic-beta"),
        Some("extended-cache-ttl-2025-04-11")
    );
    let body: Value = serde_json::from_str(&http.body).unwrap();
    assert_eq!(
        body["tools"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    let http = anthropic.request(&request(&off));
    assert_eq!(header(&http.headers, "anthropic-beta"), None);
    assert!(!http.body.contains("cache_control"));

    let openai = config(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "k")]).unwrap();
    let body: Value = serde_json::from_str(&openai.request(&request(&five)).body).unwrap();
    assert_eq!(body["prompt_cache_key"], "sess-42");
    assert_eq!(body.get("prompt_cache_retention"), None);
    let body: Value = serde_json::from_str(&openai.request(&request(&hour)).body).unwrap();
    assert_eq!(body["prompt_cache_retention"], "24h");
    let body: Value = serde_json::from_str(&openai.request(&request(&off)).body).unwrap();
    assert_eq!(body.get("prompt_cache_key"), None);
}

#[test]
fn a_configuration_never_sends_what_its_profile_lacks() {
    let image: helix_edge_core::attachment::Attachment = serde_json::from_value(
        json!({"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo=", "name": "a.png"}),
    )
    .unwrap();
    let messages = [Message::User {
        content: "look".into(),
        attachments: vec![image],
        metadata: None,
    }];
    let settings = ModelSettings {
        prompt_cache: Some(helix_edge_core::model::CacheTtl::FiveMinutes),
        ..ModelSettings::default()
    };
    let request = ModelRequest {
        system: String::new(),
        messages: &messages,
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "d".into(),
            input_schema: json!({"type": "object", "properties": {}}),
            strict: true,
        }],
        settings: &settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };
    let body =
        |c: &ProviderConfig| -> Value { serde_json::from_str(&c.request(&request).body).unwrap() };

    // OpenAI's own API: everything goes.
    let openai = body(&config(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "k")]).unwrap());
    assert_eq!(openai["tools"][0]["function"]["strict"], json!(true));
    assert_eq!(openai["prompt_cache_key"], "s1");
    assert_eq!(openai["messages"][0]["content"][1]["type"], "image_url");

    // Workers AI: no strict tools, no cache key; images still go.
    let workers = [
        ("LLM_PROVIDER", "workers-ai"),
        ("CF_ACCOUNT_ID", "acc"),
        ("LLM_API_KEY", "t"),
    ];
    let workers = body(&config(&workers).unwrap());
    assert_eq!(workers["tools"][0]["function"].get("strict"), None);
    assert_eq!(workers.get("prompt_cache_key"), None);
    assert_eq!(workers["messages"][0]["content"][1]["type"], "image_url");

    // Any other OpenAI-compatible server: the conservative profile; the image is told
    // of in text.
    let local = [
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", "http://127.0.0.1:9/v1"),
    ];
    let compatible = body(&config(&local).unwrap());
    assert_eq!(compatible["tools"][0]["function"].get("strict"), None);
    assert_eq!(compatible.get("prompt_cache_key"), None);
    assert_eq!(
        compatible["messages"][0]["content"],
        "look\n[Attachment: a.png (image/png), not readable by this model]"
    );

    // LLM_CAPABILITIES says what such a server takes.
    let told = [
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", "http://127.0.0.1:9/v1"),
        ("LLM_CAPABILITIES", "strict_tools,prompt_cache,images"),
    ];
    let adjusted = body(&config(&told).unwrap());
    assert_eq!(adjusted["tools"][0]["function"]["strict"], json!(true));
    assert_eq!(adjusted["prompt_cache_key"], "s1");
    let bad = config(&[("LLM_CAPABILITIES", "telepathy"), ("LLM_API_KEY", "k")]);
    assert!(matches!(bad, Err(ProviderError::NotConfigured(m)) if m.contains("'telepathy'")));
}

#[test]
fn tool_choice_reasoning_effort_and_thinking_budgets_reach_each_provider_as_it_spells_them() {
    use helix_edge_core::model::{ReasoningEffort, ToolChoice};
    let messages = [Message::user("hi")];
    let tools = vec![ToolSpec {
        name: "get_weather".into(),
        description: "d".into(),
        input_schema: json!({"type": "object", "properties": {}}),
        strict: false,
    }];
    let body = |c: &ProviderConfig, settings: &ModelSettings| -> Value {
        let request = ModelRequest {
            system: String::new(),
            messages: &messages,
            tools: tools.clone(),
            settings,
            options: None,
            session_id: "s1",
            abort: Default::default(),
        };
        serde_json::from_str(&c.request(&request).body).unwrap()
    };
    let openai = config(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "k")]).unwrap();
    let anthropic = config(&[("LLM_PROVIDER", "anthropic"), ("LLM_API_KEY", "k")]).unwrap();
    let choices = [
        (ToolChoice::Auto, json!("auto"), json!({"type": "auto"})),
        (
            ToolChoice::Required,
            json!("required"),
            json!({"type": "any"}),
        ),
        (ToolChoice::None, json!("none"), json!({"type": "none"})),
        (
            ToolChoice::Tool("get_weather".into()),
            json!({"type": "function", "function": {"name": "get_weather"}}),
            json!({"type": "tool", "name": "get_weather"}),
        ),
    ];
    for (choice, openai_form, anthropic_form) in choices {
        let settings = ModelSettings {
            tool_choice: Some(choice),
            ..Default::default()
        };
        assert_eq!(body(&openai, &settings)["tool_choice"], openai_form);
        assert_eq!(body(&anthropic, &settings)["tool_choice"], anthropic_form);
    }

    let reasoning = ModelSettings {
        reasoning_effort: Some(ReasoningEffort::High),
        thinking_budget: Some(2000),
        temperature: Some(0.3),
        max_output_tokens: Some(1000),
        ..Default::default()
    };
    assert_eq!(body(&openai, &reasoning)["reasoning_effort"], "high");
    let thinking = body(&anthropic, &reasoning);
    assert_eq!(
        thinking["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert!(
        thinking["max_tokens"].as_u64().unwrap() > 2000,
        "max_tokens stays above the budget"
    );
    assert_eq!(
        thinking.get("temperature"),
        None,
        "no temperature with thinking"
    );
    let small = ModelSettings {
        thinking_budget: Some(10),
        ..Default::default()
    };
    assert_eq!(body(&anthropic, &small)["thinking"]["budget_tokens"], 1024);

    // A server without reasoning gets neither.
    let workers = [
        ("LLM_PROVIDER", "workers-ai"),
        ("CF_ACCOUNT_ID", "a"),
        ("LLM_API_KEY", "t"),
    ];
    let workers = body(&config(&workers).unwrap(), &reasoning);
    assert_eq!(workers.get("reasoning_effort"), None);
}

/// Pass-through fields (an agent's, a run's `providerOptions`) land in their own
/// provider's body key by key, and only there.
#[test]
fn pass_through_fields_reach_only_their_own_providers_body() {
    let settings = ModelSettings {
        openai_fields: Some(Map::from_iter([("seed".to_string(), json!(7))])),
        anthropic_fields: Some(Map::from_iter([(
            "thinking".to_string(),
            json!({"type": "adaptive"}),
        )])),
        thinking_budget: Some(2048),
        ..Default::default()
    };
    let openai = config(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "sk")]).unwrap();
    let (_, _, sent) = body(&openai, &settings);
    assert_eq!(sent["seed"], 7);
    assert_eq!(sent.get("thinking"), None);
    let anthropic = config(&[("LLM_PROVIDER", "anthropic"), ("LLM_API_KEY", "sk-ant")]).unwrap();
    let (_, _, sent) = body(&anthropic, &settings);
    assert_eq!(sent.get("seed"), None);
    assert_eq!(
        sent["thinking"],
        json!({"type": "adaptive"}),
        "a pass-through field goes over what the adapter wrote"
    );
}
