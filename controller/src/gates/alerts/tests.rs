use std::sync::{Arc, Mutex};

use super::*;

/// A loopback HTTP/1.1 server that answers every request with `answer`
/// (status line, headers and body) and records each request's target.
struct Server {
    base: String,
    seen: Arc<Mutex<Vec<String>>>,
}

async fn serving(answer: String) -> Server {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut request = [0u8; 8192];
            let n = conn.read(&mut request).await.unwrap_or(0);
            let line = String::from_utf8_lossy(&request[..n]);
            let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
            record.lock().unwrap().push(target);
            let _ = conn.write_all(answer.as_bytes()).await;
        }
    });
    Server { base, seen }
}

fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn endpoints(settings: &[String]) -> AlertEndpoints {
    AlertEndpoints::parse(settings.iter().map(String::as_str)).unwrap()
}

fn gate(endpoint: &str) -> AlertGate {
    AlertGate {
        endpoint: Some(endpoint.into()),
        prometheus_url: None,
        matchers: vec![r#"severity="critical""#.into()],
    }
}

const FIRING: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing","instance":"secret-host","severity":"critical"},"value":[1,"1"]}]}}"#;

async fn ask_once(answer: String, gate: &AlertGate) -> (Result<Vec<String>, String>, Vec<String>) {
    let server = serving(answer).await;
    let configured = endpoints(&[format!("main={}/prom", server.base)]);
    let out = firing(&http_client().unwrap(), gate, &configured).await;
    let seen = server.seen.lock().unwrap().clone();
    (out, seen)
}

#[test]
fn the_query_asks_for_the_firing_alerts_that_match_and_nothing_else() {
    let mut g = gate("main");
    g.matchers.push(r#"alertname=~"Node.*""#.into());
    assert_eq!(
        query(&g).unwrap(),
        r#"ALERTS{alertstate="firing",severity="critical",alertname=~"Node.*"}"#
    );
    g.matchers
        .push(r#"severity="x"} or kube_secret_info{"#.into());
    let refused = query(&g).unwrap_err();
    assert!(refused.contains("matchers[2]"), "{refused}");
}

#[test]
fn endpoints_are_urls_without_user_query_or_fragment() {
    for bad in [
        "p=http://prom:9090/api/v1/query?query=kube_secret_info&x=",
        "p=http://prom:9090/#",
        "p=http://user:pw@prom:9090",
        "p=file:///etc/passwd",
        "P=http://prom:9090",
        "http://prom:9090",
    ] {
        assert!(AlertEndpoints::parse([bad]).is_err(), "{bad}");
    }
    assert!(AlertEndpoints::parse(["a=http://p", "a=http://q"]).is_err());
    let url = url(&Url::parse("http://prom:9090/prefix/").unwrap(), "ALERTS{}").unwrap();
    assert_eq!(url.path(), "/prefix/api/v1/query");
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    assert_eq!(pairs, [("query".to_owned(), "ALERTS{}".to_owned())]);
}

#[test]
fn a_pool_names_a_configured_endpoint_and_an_old_url_must_be_one() {
    let configured = endpoints(&["main=http://prom.monitoring.svc:9090".into()]);
    let (name, _) = endpoint(&gate("main"), &configured).unwrap();
    assert_eq!(name, "main");
    let refused = endpoint(&gate("other"), &configured).unwrap_err();
    assert!(
        refused.contains(r#"spec.rollout.alertGate.endpoint "other""#)
            && refused.contains("configured: main"),
        "{refused}"
    );
    let mut old = gate("main");
    old.endpoint = None;
    old.prometheus_url = Some("http://prom.monitoring.svc:9090/".into());
    assert_eq!(endpoint(&old, &configured).unwrap().0, "main");
    old.prometheus_url = Some("http://127.0.0.1:8081/healthz?x=\u{7}".into());
    let refused = endpoint(&old, &configured).unwrap_err();
    assert!(
        refused.contains(
            r#"spec.rollout.alertGate.prometheusURL "http://127.0.0.1:8081/healthz?x=\\u{7}""#
        ),
        "{refused}"
    );
    assert!(!refused.contains('\u{7}'), "{refused}");
}

#[tokio::test]
async fn only_the_controllers_query_is_sent_and_only_alert_names_come_back() {
    let (out, seen) = ask_once(ok(FIRING), &gate("main")).await;
    assert_eq!(out.unwrap(), ["NodeDown"]);
    assert_eq!(
        seen,
        [
            "/prom/api/v1/query?query=ALERTS%7Balertstate%3D%22firing%22%2Cseverity%3D%22critical%22%7D"
        ]
    );
}

#[tokio::test]
async fn an_old_url_that_is_not_configured_sends_nothing() {
    let server = serving(ok(FIRING)).await;
    let configured = endpoints(&["main=http://127.0.0.1:9/".into()]);
    let mut old = gate("main");
    old.endpoint = None;
    old.prometheus_url = Some(format!("{}/x?query=kube_secret_info&x=", server.base));
    let refused = firing(&http_client().unwrap(), &old, &configured)
        .await
        .unwrap_err();
    assert!(refused.contains("prometheusURL"), "{refused}");
    assert!(server.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let inside = serving(ok(FIRING)).await;
    let redirect = format!(
        "HTTP/1.1 302 Found\r\nLocation: {}/internal\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        inside.base
    );
    let (out, _) = ask_once(redirect, &gate("main")).await;
    assert_eq!(
        out.unwrap_err(),
        r#"alert endpoint "main" answered HTTP 302"#
    );
    assert!(inside.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn what_the_server_wrote_never_reaches_the_status() {
    let cases = [
        (
            ok(
                r#"{"status":"error","errorType":"bad_data","error":"INTERNAL-ONLY db_password=hunter2 \u001b]0;T\u0007"}"#,
            ),
            r#"alert endpoint "main" refused the query"#,
        ),
        (
            ok("<html>internal-secret-token</html>"),
            r#"alert endpoint "main" did not answer as Prometheus's API"#,
        ),
        (
            ok(
                r#"{"status":"success","data":{"result":[{"metric":{"__name__":"kube_secret_info","secret":"stripe-live-api-key"}}]}}"#,
            ),
            r#"alert endpoint "main" answered series other than firing alerts"#,
        ),
    ];
    for (answer, expected) in cases {
        let (out, _) = ask_once(answer, &gate("main")).await;
        assert_eq!(out.unwrap_err(), expected);
    }
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_says_no_more() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("main=http://{}", listener.local_addr().unwrap());
    drop(listener);
    let out = firing(
        &http_client().unwrap(),
        &gate("main"),
        &endpoints(&[closed]),
    )
    .await;
    assert_eq!(
        out.unwrap_err(),
        r#"alert endpoint "main" could not be reached"#
    );
}

#[tokio::test]
async fn control_characters_in_alert_names_are_escaped() {
    let body = FIRING.replace("NodeDown", r#"Node\u001b]0;T\u0007Down"#);
    let (out, _) = ask_once(ok(&body), &gate("main")).await;
    assert_eq!(out.unwrap(), [r#"Node\u{1b}]0;T\u{7}Down"#]);
}

#[test]
fn alerts_are_named_once_and_counted_past_five() {
    let many = named((0..7).map(|i| format!("A{i}")).chain(["A0".to_owned()]));
    assert_eq!(many, ["A0", "A1", "A2", "A3", "A4", "and 2 more"]);
}
