//! `/metrics` for Prometheus only (`controller/src/runtime/secure_metrics.rs`),
//! against the real API server: the real controller binary with a
//! certificate from `--metrics-cert-dir`, and tokens the API server knows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ControllerProc, env_with};
use tests::control_plane::{DAEMON_TOKEN, Options, free_port};
use tests::metrics_client::get_metrics;

/// TokenReviews the API server has answered so far (its audit log).
fn token_reviews(env: &common::Env) -> usize {
    std::fs::read_to_string(env.cp.audit_log())
        .unwrap()
        .lines()
        .filter(|l| {
            l.contains("\"resource\":\"tokenreviews\"")
                && l.contains("\"stage\":\"ResponseComplete\"")
        })
        .count()
}

/// No token and an unknown token are 401, an authenticated user without
/// the grant (the daemon's ServiceAccount) 403, Prometheus's own token with
/// the ClusterRole 200 with the metrics; its next scrapes cost no
/// TokenReview (the verdict is kept).
#[tokio::test]
async fn metrics_answer_only_tokens_allowed_to_read_them() {
    let env = env_with(Options {
        audit: true,
        ..Default::default()
    })
    .await;
    let certs = env.cp.dir().join("metrics-tls");
    std::fs::create_dir(&certs).unwrap();
    tests::pki::ca(&certs).unwrap();
    tests::pki::serving_leaf(&certs, "tls").unwrap();
    let addr = format!("127.0.0.1:{}", free_port().unwrap());
    let ctl = ControllerProc::spawn(
        &env,
        "metrics",
        &[
            "--metrics-addr",
            &addr,
            "--metrics-cert-dir",
            certs.to_str().unwrap(),
        ],
    );
    ctl.wait_log("metrics endpoint listening").await;
    let ca = certs.join("ca.crt");
    let get = |token: Option<String>| {
        let (addr, ca) = (addr.clone(), ca.clone());
        async move { get_metrics(&addr, &ca, token.as_deref()).await.unwrap() }
    };

    assert_eq!(get(None).await.0, 401);
    assert_eq!(get(Some("not-a-token".into())).await.0, 401);
    assert_eq!(get(Some(DAEMON_TOKEN.into())).await.0, 403);
    let token = tests::metrics_client::reader_token(&env.cp).unwrap();
    let (code, body) = get(Some(token.clone())).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("bootc_leader"), "{body}");

    let reviews = token_reviews(&env);
    for _ in 0..3 {
        assert_eq!(get(Some(token.clone())).await.0, 200);
    }
    assert_eq!(
        token_reviews(&env),
        reviews,
        "a kept verdict was asked again"
    );
    assert!(
        ctl.log_text()
            .contains("metrics certificate from the mounted Secret")
    );
}
