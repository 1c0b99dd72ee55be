//! The CRDs' validation beyond types: OpenAPI bounds and the CEL rules
//! (`x-kubernetes-validations`) that the API server checks on every write,
//! so that a bad pool is refused by `kubectl apply` with a message naming
//! the field and the rule, instead of being stored and reported later.
//!
//! CEL is used where OpenAPI alone cannot say the rule (it spans fields) or
//! cannot say it clearly (a regular expression is no message). Checks that
//! need the cluster's state (the pull Secret's namespace is the operator's,
//! the Secret exists) stay with the controller, in the pool's conditions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use crate::image_ref::REFERENCE_MAX_LEN;
use crate::image_ref_pattern;

/// The operators a label selector understands. The API server rejects any
/// other, so a typo is reported on `kubectl apply` rather than as a pool that
/// cannot select anything.
pub const SELECTOR_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

/// Most expressions one selector may have: bounds the CEL rule's cost.
const MAX_SELECTOR_EXPRESSIONS: u32 = 32;

/// One CEL rule with its message.
fn rule(rule: &str, message: &str) -> Value {
    json!({ "rule": rule, "message": message })
}

/// A label selector (`spec.nodeSelector`, the node groups', the blocking
/// pods'): `LabelSelector`'s own schema, with an `enum` on the operator and
/// the rule that ties an expression's values to its operator (what
/// `kubectl` would otherwise learn only from the controller's status).
pub fn label_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<LabelSelector>();
    if let Some(expressions) = schema
        .pointer_mut("/properties/matchExpressions")
        .and_then(Value::as_object_mut)
    {
        expressions.insert("maxItems".into(), json!(MAX_SELECTOR_EXPRESSIONS));
    }
    if let Some(operator) = schema
        .pointer_mut("/properties/matchExpressions/items/properties/operator")
        .and_then(Value::as_object_mut)
    {
        operator.insert("enum".into(), json!(SELECTOR_OPERATORS));
    }
    if let Some(item) = schema
        .pointer_mut("/properties/matchExpressions/items")
        .and_then(Value::as_object_mut)
    {
        item.insert(
            "x-kubernetes-validations".into(),
            json!([rule(
                "(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
                "operators In and NotIn need at least one value; Exists and DoesNotExist take none",
            )]),
        );
    }
    schema
}

/// `spec.image.ref`: a tag, a digest or both.
pub fn image_ref(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": REFERENCE_MAX_LEN,
        "description": "A tag (`quay.io/acme/os:prod`), a digest (`quay.io/acme/os@sha256:...`) or both. A tag is resolved and re-polled; a digest is checked against its registry (the manifest exists and covers every member's architecture) before any node is told.",
        "x-kubernetes-validations": [rule(
            concat!("self.matches(r'", image_ref_pattern!(), "')"),
            "must be an image reference with a tag and/or a sha256 digest, such as quay.io/acme/os:prod: a lower-case repository, no transport prefix (docker://) and no whitespace",
        )]
    })
}

/// `spec.desiredImage` of a BootcNode: always pinned to a digest.
pub fn digest_ref(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": REFERENCE_MAX_LEN,
        "description": "`repository@sha256:<digest>`: the image this node should run.",
        "x-kubernetes-validations": [rule(
            concat!("self.matches(r'", image_ref_pattern!(), "') && self.contains('@sha256:')"),
            "must be repository@sha256:<64 hex digits>: a node is only ever told a digest its pool resolved",
        )]
    })
}

/// `spec.rollout.maxUnavailable`: int-or-string. `nullable: false` is
/// explicit because kube's schema rewriter otherwise marks an optional
/// int-or-string nullable, and the API server keeps a null on a nullable
/// field instead of defaulting it.
pub fn max_unavailable(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        "nullable": false,
        "default": 1,
        "description": "How many nodes may be cordoned and rebooting at once: a number of nodes, or a percentage (\"25%\") of the pool's nodes, rounded up. 0 (or \"0%\"): every node stages and none reboots.",
        "x-kubernetes-validations": [rule(
            "type(self) == int ? self >= 0 : self.matches('^([0-9]|[1-9][0-9]|100)%$')",
            "must be a number of nodes (0 or more), or a percentage from 0% to 100% (such as \"25%\")",
        )]
    })
}

/// `spec.rollout.maxUnhealthy`: int-or-string, at least 1 (unset: 2).
pub fn max_unhealthy(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        "description": "How many nodes in reboot slots may be unhealthy (Degraded, or NotReady beyond a reboot) before no new slot is handed out: a number of at least 1, or a percentage (\"10%\") of the pool's nodes, rounded up (unset: 2).",
        "x-kubernetes-validations": [rule(
            "type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",
            "must be a number of nodes of at least 1, or a percentage from 1% to 100% (such as \"10%\")",
        )]
    })
}

/// `spec.rollout.batches`: each a number of nodes (at least 1) or a
/// percentage of the pool, rounded up; at most 16 steps.
pub fn batches(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 16,
        "description": "Canary steps: how many members may have been updated by the end of each step, a number of nodes or a percentage (\"10%\") of the pool rounded up, such as [1, \"10%\", \"50%\", \"100%\"]. After each step the rollout soaks for soakSeconds, then goes on only if at least successThreshold percent of the updated nodes are healthy; after the last step the rest follow.",
        "items": {
            "x-kubernetes-int-or-string": true,
            // Bounds the rule's cost for the API server's estimate.
            "maxLength": 4,
            "x-kubernetes-validations": [rule(
                "type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",
                "must be a number of nodes of at least 1, or a percentage from 1% to 100% (such as \"10%\")",
            )]
        }
    })
}

/// Longest maintenance window, in minutes: a week.
const MAX_WINDOW_MINUTES: u32 = 7 * 24 * 60;

/// `spec.rollout.maintenanceWindows[].duration`: hours and minutes, more
/// than zero and at most a week. The pattern says the form; the rule (which
/// holds only once the form does) says the bounds.
pub fn window_duration(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 2,
        "maxLength": 16,
        "pattern": WINDOW_DURATION_PATTERN,
        "description": "How long the window stays open (elapsed time): hours and minutes such as `4h`, `90m` or `1h30m`; more than zero, at most `168h` (a week).",
        "x-kubernetes-validations": [rule(
            &format!(
                "!self.matches('{WINDOW_DURATION_PATTERN}') || (duration(self) > duration('0s') && duration(self) <= duration('{MAX_WINDOW_MINUTES}m'))"
            ),
            "must be more than zero and at most 168h (a week)",
        )]
    })
}

/// The form of a window's duration: `4h`, `90m`, `1h30m`.
pub const WINDOW_DURATION_PATTERN: &str = "^([0-9]{1,3}h)?([0-9]{1,5}m)?$";

/// A blackout's start or end: a wall-clock date and time, `YYYY-MM-DDTHH:MM`
/// (fixed width, so that CEL compares two as strings in time order).
pub fn civil_date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 16,
        "maxLength": 16,
        "pattern": CIVIL_DATE_TIME_PATTERN,
        "description": "A date and time on the wall clock of the blackout's time zone, `YYYY-MM-DDTHH:MM` such as `2026-12-20T18:00`."
    })
}

/// The form of a blackout's start and end.
pub const CIVIL_DATE_TIME_PATTERN: &str =
    "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]$";

/// `spec.rollout.dependsOn`: pool names, each once.
pub fn depends_on(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 16,
        "x-kubernetes-list-type": "set",
        "description": "Other pools, by name, that must be up to date on their current target before this pool hands out a new reboot slot (for example workers after infra). A pool that does not exist holds this one.",
        "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": 253,
            "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        }
    })
}

/// The form of an alert endpoint's name (`spec.rollout.alertGate.endpoint`,
/// `--alert-gate-endpoint NAME=URL`): a DNS label.
pub const ALERT_ENDPOINT_NAME_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// `spec.rollout.alertGate.endpoint`: the name of a configured endpoint.
pub fn alert_endpoint_name(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 63,
        "pattern": ALERT_ENDPOINT_NAME_PATTERN,
        "description": "The Prometheus endpoint to ask, by its name among those the operator is installed with (--alert-gate-endpoint NAME=URL, the chart's controller.alertGateEndpoints): the addresses are the admin's, never a pool's.",
    })
}

/// Is `name` an alert endpoint's name ([`ALERT_ENDPOINT_NAME_PATTERN`])?
pub fn is_alert_endpoint_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&name.len())
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-')
}

/// Is `matcher` one PromQL label matcher ([`ALERT_MATCHER_PATTERN`]): a
/// label name, `=`, `!=`, `=~` or `!~`, and one double-quoted value in
/// which a quote appears only escaped? The controller checks it again
/// before it puts it in a query, whatever the schema let through.
pub fn is_alert_matcher(matcher: &str) -> bool {
    let name_len = matcher
        .char_indices()
        .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
        .map_or(matcher.len(), |(i, _)| i);
    let rest = &matcher[name_len..];
    let Some(value) = ["=~", "!~", "!=", "="]
        .iter()
        .find_map(|op| rest.strip_prefix(op))
    else {
        return false;
    };
    let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else {
        return false;
    };
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return false,
            '\\' if chars.next().is_none() => return false,
            _ => {}
        }
    }
    name_len > 0
}

/// `spec.rollout.silences.endpoint`: the name of a configured
/// Alertmanager ([`ALERT_ENDPOINT_NAME_PATTERN`]).
pub fn alertmanager_endpoint_name(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 63,
        "pattern": ALERT_ENDPOINT_NAME_PATTERN,
        "description": "The Alertmanager, by its name among those the operator is installed with (--alertmanager-endpoint NAME=URL, the chart's controller.alertmanagerEndpoints): the addresses are the admin's, never a pool's.",
    })
}

/// The form of a Prometheus label name.
pub const LABEL_NAME_PATTERN: &str = "^[a-zA-Z_][a-zA-Z0-9_]*$";

/// Is `name` a Prometheus label name ([`LABEL_NAME_PATTERN`])?
pub fn is_label_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .char_indices()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
}

/// `spec.rollout.silences.nodeLabel`: a Prometheus label name.
pub fn silence_node_label(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 128,
        "description": "The alerts' label that names their node (unset: node).",
        "x-kubernetes-validations": [rule(
            &format!("self.matches(r'{LABEL_NAME_PATTERN}')"),
            "must be a Prometheus label name: letters, digits and _, not starting with a digit, such as node or instance",
        )]
    })
}

/// `spec.rollout.silences.matchers`: label matchers, each once, in the
/// alert gate's form ([`ALERT_MATCHER_PATTERN`]).
pub fn silence_matchers(_: &mut SchemaGenerator) -> Schema {
    label_matchers(
        "More label matchers every silenced alert must match, such as `severity!=\"critical\"` (unset: every alert of the node). A value is taken as written, but for \\\" and \\\\.",
        "must be a label matcher: a label name, one of = != =~ !~, and a double-quoted value, such as severity!=\"critical\"",
    )
}

/// `spec.rollout.alertGate.prometheusURL` (deprecated): an http(s) URL with
/// a host.
pub fn prometheus_url(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 2048,
        "description": "Deprecated: use endpoint. Accepted only when it is, exactly, the URL of an endpoint the operator is configured with (that endpoint is then asked); any other URL holds the rollout with a condition that says so, and nothing is asked.",
        "x-kubernetes-validations": [rule(
            "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHost() != ''",
            "must be an http or https URL with a host, such as http://prometheus.monitoring.svc:9090",
        )]
    })
}

/// The form of one PromQL label matcher: `name="value"`, with `=`, `!=`,
/// `=~` or `!~`.
pub const ALERT_MATCHER_PATTERN: &str = r#"^[a-zA-Z_][a-zA-Z0-9_]*(=|!=|=~|!~)"([^"\\]|\\.)*"$"#;

/// `spec.rollout.alertGate.matchers`: PromQL label matchers, each once.
pub fn alert_matchers(_: &mut SchemaGenerator) -> Schema {
    label_matchers(
        "PromQL label matchers a firing alert must all match to hold the rollout, such as `severity=\"critical\"` or `alertname=~\"Node.*\"` (unset: any firing alert).",
        "must be a PromQL label matcher: a label name, one of = != =~ !~, and a double-quoted value, such as severity=\"critical\"",
    )
}

/// A set of at most 16 label matchers ([`ALERT_MATCHER_PATTERN`]), each
/// refused with `message` when it is not one.
fn label_matchers(description: &str, message: &str) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 16,
        "x-kubernetes-list-type": "set",
        "description": description,
        "items": {
            "type": "string",
            "minLength": 4,
            "maxLength": 256,
            "x-kubernetes-validations": [rule(
                &format!("self.matches(r'{ALERT_MATCHER_PATTERN}')"),
                message,
            )]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alert_matcher_is_one_label_matcher_and_nothing_more() {
        for good in [
            r#"severity="critical""#,
            r#"alertname=~"Node.*""#,
            r#"team!="""#,
            r#"_x1!~"a\"b""#,
        ] {
            assert!(is_alert_matcher(good), "{good}");
        }
        for bad in [
            "severity=critical",
            r#"severity="x"} or kube_secret_info{"#,
            r#"severity="x",job="y""#,
            r#"1a="x""#,
            r#"="x""#,
            r#"a="x\""#,
            r#"a=="x""#,
        ] {
            assert!(!is_alert_matcher(bad), "{bad}");
        }
        assert!(is_alert_endpoint_name("main"));
        assert!(is_alert_endpoint_name("prom-2"));
        for bad in ["", "-a", "a-", "Main", "a.b", &"a".repeat(64)] {
            assert!(!is_alert_endpoint_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_label_name_is_letters_digits_and_underscores() {
        for good in ["node", "instance", "_x", "kubernetes_node", "a1"] {
            assert!(is_label_name(good), "{good}");
        }
        for bad in ["", "1a", "node-name", "a.b", "a b", "é"] {
            assert!(!is_label_name(bad), "{bad}");
        }
    }
}
