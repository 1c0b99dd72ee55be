//! A pull secret as the operator uses it: which pools it opts in to, and
//! which version of it the nodes are told about.
//!
//! **Opt-in.** A Secret of the operator's namespace serves a pool only if
//! its [`POOLS_ANNOTATION`](crate::labels::POOLS_ANNOTATION) lists that
//! pool (`bootc.dev/pools: a,b`). Only someone who may write Secrets there
//! can set it: naming a Secret in a pool (which anyone who may write pools
//! can do) grants the daemons nothing by itself.
//!
//! **Version.** `BootcNode.spec.pullSecretHash` carries the Secret's uid
//! and resourceVersion (`<uid>/<resourceVersion>`), not a hash of its
//! content: every BootcNode reader sees it, and an unsalted hash of the
//! credentials would be an offline guessing oracle. The daemon compares it
//! with the Secret it reads, so that both agree on which version is meant;
//! any change to the Secret (its annotations included) is a new version.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels::POOLS_ANNOTATION;

/// The pools the Secret opts in to (its annotation, comma-separated; blanks
/// ignored).
pub fn pools(meta: &ObjectMeta) -> Vec<&str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(POOLS_ANNOTATION))
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// May `pool` use the Secret?
pub fn allows(meta: &ObjectMeta, pool: &str) -> bool {
    pools(meta).contains(&pool)
}

/// `<uid>/<resourceVersion>`: the version of the Secret the nodes are told
/// about (see the module docs); None for an object without them.
pub fn version(meta: &ObjectMeta) -> Option<String> {
    match (&meta.uid, &meta.resource_version) {
        (Some(uid), Some(rv)) => Some(format!("{uid}/{rv}")),
        _ => None,
    }
}

/// How a pool is told it may not use a Secret, and how to opt it in.
/// `listed`: the pools the Secret lists already, kept by the command.
pub fn not_allowed_message(namespace: &str, name: &str, pool: &str, listed: &[String]) -> String {
    let (overwrite, pools) = match listed {
        [] => ("", pool.to_owned()),
        others => (" --overwrite", format!("{},{pool}", others.join(","))),
    };
    format!(
        "spec.pullSecretRef: Secret {namespace}/{name} does not list pool {pool:?} in its {POOLS_ANNOTATION} annotation, so neither the controller nor the daemons use it; whoever may write Secrets in {namespace} opts it in: kubectl annotate{overwrite} secret -n {namespace} {name} {POOLS_ANNOTATION}={pools}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(pools: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            annotations: pools
                .map(|p| BTreeMap::from([(POOLS_ANNOTATION.to_owned(), p.to_owned())])),
            uid: Some("u-1".into()),
            resource_version: Some("42".into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_secret_serves_only_the_pools_it_lists() {
        // (annotation, pool, allowed)
        let rows = [
            (None, "a", false),
            (Some(""), "a", false),
            (Some("a"), "a", true),
            (Some("a, b"), "b", true),
            (Some("ab"), "a", false),
            (Some("a,b"), "c", false),
            (Some("*"), "a", false),
        ];
        for (annotation, pool, want) in rows {
            assert_eq!(
                allows(&meta(annotation), pool),
                want,
                "{annotation:?} {pool}"
            );
        }
        let text = not_allowed_message("bootc-operator", "pull", "workers", &[]);
        assert!(
            text.contains("kubectl annotate secret -n bootc-operator pull bootc.dev/pools=workers")
                && text.contains("bootc-operator/pull"),
            "{text}"
        );
        // A Secret that lists another pool: the command keeps it, and
        // overwrites (kubectl refuses to change an annotation without).
        let text = not_allowed_message("bootc-operator", "pull", "workers", &["canary".into()]);
        assert!(
            text.contains("kubectl annotate --overwrite secret -n bootc-operator pull bootc.dev/pools=canary,workers"),
            "{text}"
        );
    }

    #[test]
    fn the_version_is_the_uid_and_resource_version_not_the_content() {
        assert_eq!(version(&meta(None)).as_deref(), Some("u-1/42"));
        assert_eq!(version(&ObjectMeta::default()), None);
    }
}
