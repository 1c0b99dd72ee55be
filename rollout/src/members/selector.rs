//! Label selectors as the pool's fields write them: parsed, or an error
//! that names the field, the expression, its key, operator and values.
//! Below every step (it imports nothing of this crate).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::{Expression, Selector};

/// The label selector at `field` as a selector, or an error naming the
/// expression that does not parse, with its key, operator and values.
pub fn parse_at(selector: &LabelSelector, field: &str) -> Result<Selector, String> {
    Selector::try_from(selector.clone()).map_err(|error| {
        let bad = selector
            .match_expressions
            .iter()
            .flatten()
            .enumerate()
            .find_map(|(i, r)| Expression::try_from(r.clone()).err().map(|e| (i, r, e)));
        match bad {
            Some((i, r, e)) => format!(
                "{field}.matchExpressions[{i}] (key {:?}, operator {:?}, values {:?}): {e}",
                r.key,
                r.operator,
                r.values.as_deref().unwrap_or_default()
            ),
            None => format!("{field}: {error}"),
        }
    })
}
