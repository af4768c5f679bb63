//! The tests of the OAuth flow's pieces: URLs and challenges read, a client secret
//! pinned to its authorization server.

use super::*;

#[test]
fn urls_and_challenges_are_read() {
    assert_eq!(
        split_url("https://mcp.example.com:8443/a/mcp?x=1"),
        Some(("https://mcp.example.com:8443", "/a/mcp"))
    );
    assert_eq!(
        split_url("http://127.0.0.1:9/"),
        Some(("http://127.0.0.1:9", "/"))
    );
    assert_eq!(split_url("https://h"), Some(("https://h", "")));
    let challenge = Some(
        r#"Bearer error="invalid_token", resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", scope=files"#,
    );
    assert_eq!(
        challenge_param(challenge, "resource_metadata").as_deref(),
        Some("https://h/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(
        challenge_param(challenge, "scope").as_deref(),
        Some("files")
    );
    assert_eq!(challenge_param(challenge, "realm"), None);
    let text = random_text().unwrap();
    assert_eq!(text.len(), 43, "a PKCE verifier is 43 to 128 characters");
    assert_ne!(text, random_text().unwrap());
}

#[test]
fn a_client_secret_goes_only_to_its_own_authorization_server() {
    let server = |s: crate::mcp::McpServer| s.oauth("https://w.example/v1/mcp/callback");
    struct Nowhere;
    impl crate::provider::Transport for Nowhere {
        fn send<'a>(
            &'a self,
            _: &'a HttpRequest,
            _: std::time::Duration,
        ) -> futures::future::LocalBoxFuture<
            'a,
            Result<crate::provider::HttpResponse, crate::provider::TransportError>,
        > {
            Box::pin(async { Err(crate::provider::TransportError::Timeout) })
        }
        fn sleep(&self, _: std::time::Duration) -> futures::future::LocalBoxFuture<'_, ()> {
            Box::pin(async {})
        }
        fn now_ms(&self) -> u64 {
            0
        }
        fn random(&self) -> f64 {
            0.0
        }
        fn warn(&self, _: &str) {}
    }
    let base = || {
        crate::mcp::McpServer::new(
            "files",
            "https://mcp.example.com/mcp",
            std::rc::Rc::new(Nowhere),
        )
    };
    let config = |s: &crate::mcp::McpServer| s.oauth.clone().unwrap();
    let public = server(base().oauth_client("id", None));
    assert!(
        public
            .pinned(&config(&public), "https://anywhere.example")
            .is_ok()
    );
    let secret = server(base().oauth_client("id", Some("s3cret".into())));
    assert!(
        secret
            .pinned(&config(&secret), "https://mcp.example.com/")
            .is_ok()
    );
    let refused = secret
        .pinned(&config(&secret), "https://evil.example")
        .unwrap_err();
    assert!(refused.to_string().contains("oauth_issuer"), "{refused}");
    let named = server(
        base()
            .oauth_client("id", Some("s3cret".into()))
            .oauth_issuer("https://auth.example.com"),
    );
    assert!(
        named
            .pinned(&config(&named), "https://auth.example.com")
            .is_ok()
    );
    assert!(
        named
            .pinned(&config(&named), "https://mcp.example.com")
            .is_err()
    );
}
