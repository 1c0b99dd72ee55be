//! The daemons' grant on pull secrets: a Role in the operator's namespace
//! (`deploy/rbac/controller.yaml`), bound to the daemon's ServiceAccount
//! (`deploy/rbac/daemon.yaml`), whose one rule lets the daemons GET exactly
//! the Secrets that the pools and their BootcNodes name **and** that opt in
//! to the pool naming them (the Secret's `bootc.dev/pools` annotation, see
//! `api::pull_secret`). The controller keeps its rules up to date.
//!
//! - Naming a Secret in a pool grants nothing by itself: anyone who may
//!   write pools may name any Secret, but only someone who may write
//!   Secrets can opt one in. A refused reference is reported on the pool
//!   (`PullSecretNotAllowed`).
//! - Every daemon shares the one ServiceAccount, so a Secret granted for
//!   one pool is readable by every daemon (SECURITY.md section 7).
//!
//! - BootcNodes count as well as pools: a daemon reads the Secret its
//!   BootcNode names, and a BootcNode keeps its old Secret while the pool's
//!   new one is missing or broken, or until the controller has moved it.
//! - No Secret named, no rule: RBAC reads an empty `resourceNames` as every
//!   name.
//! - The controller holds `get` on every Secret of its namespace, so RBAC's
//!   escalation check lets it write this rule without `escalate`; the Role
//!   and its binding come from `deploy/`, so it needs neither `create` nor
//!   `bind`, only `patch` on this one Role.
//! - Every reconcile makes sure the Role grants its pool's Secret before it
//!   writes BootcNodes (a pool's new Secret is granted before any BootcNode
//!   names it); the caches have no change notification, so for revocations
//!   and deleted pools they are also compared once a second (no request).
//!   The BootcNodes are read as the cache counts them (`cache::Tallied`):
//!   each (pool, Secret) pair in use once, however many nodes name it.
//!   The Role is written only when its rules change, and not before the
//!   first reconcile (with caches not yet synced it would revoke every
//!   grant); with no pool at all since the controller started, it is left
//!   as it is.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::{BootcNode, BootcNodePool, SecretReference};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::cache::{ByName, Tallied};

/// The Role the controller keeps, in the operator's namespace.
pub const ROLE: &str = api::labels::DAEMON_PULL_SECRETS_ROLE;

/// How often the caches are compared with the last rules written.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long a failed write waits before the next attempt.
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// A write that takes longer has failed (a reconcile waits for it).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[error(
    "writing Role {namespace}/{ROLE} (the daemons' pull-secret grant): {message}; the Role comes from deploy/ (kubectl apply -k deploy/)"
)]
pub struct RoleError {
    namespace: String,
    message: String,
}

/// The Role's rules for these Secret references, each with the pool it is
/// for: `get` on the names of those in `namespace` (the Role's own) whose
/// Secret opts in to that pool (`opted_in(secret, pool)`), or no rule at
/// all.
pub fn rules<'a>(
    namespace: &str,
    references: impl IntoIterator<Item = (&'a str, &'a SecretReference)>,
    opted_in: impl Fn(&str, &str) -> bool,
) -> Vec<PolicyRule> {
    // Each (pool, Secret) pair once before the opt-in is looked up: a
    // pool's BootcNodes all name the same Secret, and this runs every
    // second over all of them (a repeat of the pair before is skipped
    // without a lookup in the set).
    let mut pairs: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut last = None;
    for (pool, r) in references {
        let pair = (pool, r.name.as_str());
        if r.namespace == namespace && !r.name.is_empty() && last != Some(pair) {
            pairs.insert(pair);
            last = Some(pair);
        }
    }
    let names: BTreeSet<&str> = pairs
        .into_iter()
        .filter(|(pool, name)| opted_in(name, pool))
        .map(|(_, name)| name)
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".to_owned()]),
        resource_names: Some(names.into_iter().map(str::to_owned).collect()),
        verbs: vec!["get".to_owned()],
        non_resource_urls: None,
    }]
}

/// The rules for what `pools` and their BootcNodes name (`named`: each
/// (owning pool, Secret) pair in use): the [`rules`] of every pair. A pair
/// of a Secret the pools grant already (nearly all: a pool's members name
/// its Secret) adds nothing and is passed over.
fn wanted(
    namespace: &str,
    pools: &[Arc<BootcNodePool>],
    named: &[(String, SecretReference)],
    opted_in: impl Fn(&str, &str) -> bool,
) -> Vec<PolicyRule> {
    let from_pools: Vec<(&str, &SecretReference)> = pools
        .iter()
        .filter_map(|p| {
            Some((
                p.metadata.name.as_deref()?,
                p.spec.pull_secret_ref.as_ref()?,
            ))
        })
        .collect();
    let by_pools = rules(namespace, from_pools.iter().copied(), &opted_in);
    let by_pools = granted(&by_pools);
    let from_nodes = named
        .iter()
        .filter(|(_, r)| !(r.namespace == namespace && by_pools.contains(r.name.as_str())))
        .map(|(pool, r)| (pool.as_str(), r));
    rules(
        namespace,
        from_pools.iter().copied().chain(from_nodes),
        &opted_in,
    )
}

/// A BootcNode counts by the pool that owns it and the Secret it names.
impl Tallied for BootcNode {
    type Key = (String, SecretReference);
    fn tally_key(&self) -> Option<Self::Key> {
        let reference = self.spec.pull_secret_ref.as_ref()?;
        let owner = rollout::members::membership::owner_reference_of(self)?;
        Some((owner.name.clone(), reference.clone()))
    }
}

/// The Secret names `rules` grant.
fn granted(rules: &[PolicyRule]) -> BTreeSet<&str> {
    rules
        .iter()
        .flat_map(|r| r.resource_names.iter().flatten())
        .map(String::as_str)
        .collect()
}

/// Writes the Role's rules (server-side apply; the rest of the Role is
/// `deploy/`'s).
pub async fn apply(
    client: &kube::Client,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), RoleError> {
    let body = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ROLE, "namespace": namespace},
        "rules": rules,
    });
    let params = PatchParams::apply(api::labels::CONTROLLER_MANAGER).force();
    let role = Api::<Role>::namespaced(client.clone(), namespace);
    let patch = Patch::Apply(&body);
    let write = role.patch(ROLE, &params, &patch);
    let message = match tokio::time::timeout(WRITE_TIMEOUT, write).await {
        Ok(Ok(_)) => return Ok(()),
        Ok(Err(error)) => error.to_string(),
        Err(_) => format!("no answer within {WRITE_TIMEOUT:?}"),
    };
    Err(RoleError {
        namespace: namespace.to_owned(),
        message,
    })
}

/// The grant, kept from the controller's caches of pools and BootcNodes.
pub struct Grant {
    client: kube::Client,
    namespace: String,
    pools: Store<BootcNodePool>,
    nodes: ByName<BootcNode>,
    secrets: Store<Secret>,
    /// The rules last written (None: not yet, or the last write failed).
    written: tokio::sync::Mutex<Option<Vec<PolicyRule>>>,
    /// Whether a reconcile has run, so the caches are synced.
    synced: AtomicBool,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl Grant {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        pools: Store<BootcNodePool>,
        nodes: ByName<BootcNode>,
        secrets: Store<Secret>,
    ) -> Arc<Self> {
        Arc::new(Grant {
            client,
            namespace: namespace.to_owned(),
            pools,
            nodes,
            secrets,
            written: tokio::sync::Mutex::new(None),
            synced: AtomicBool::new(false),
        })
    }

    /// Makes sure the Role grants what `pool` names before its reconcile
    /// writes BootcNodes, so that no daemon is sent to a Secret it may not
    /// read yet: when the rules last written already do, nothing is read
    /// (revocations are the keeper's, within a second); otherwise the Role
    /// is brought up to date. A reconcile runs with the caches synced, and
    /// from then on the keeper runs too. False when the write failed
    /// (logged).
    pub async fn sync(&self, pool: &BootcNodePool) -> bool {
        self.synced.store(true, Ordering::Relaxed);
        if self.already_grants(pool).await {
            return true;
        }
        self.write_if_changed().await
    }

    /// Do the rules last written grant every Secret `pool` may name?
    async fn already_grants(&self, pool: &BootcNodePool) -> bool {
        let written = self.written.lock().await;
        let Some(written) = written.as_ref() else {
            return false;
        };
        let (Some(name), Some(reference)) = (
            pool.metadata.name.as_deref(),
            pool.spec.pull_secret_ref.as_ref(),
        ) else {
            return true;
        };
        let want = rules(&self.namespace, [(name, reference)], |n, p| {
            self.opted_in(n, p)
        });
        granted(&want).is_subset(&granted(written))
    }

    /// Does the Secret `name` of the operator's namespace opt in to `pool`?
    fn opted_in(&self, name: &str, pool: &str) -> bool {
        let secret = self
            .secrets
            .get(&ObjectRef::new(name).within(&self.namespace));
        secret.is_some_and(|s| api::pull_secret::allows(&s.metadata, pool))
    }

    /// Writes the rules for what the caches name now, unless they are what
    /// was last written.
    async fn write_if_changed(&self) -> bool {
        let mut written = self.written.lock().await;
        let want = {
            let (pools, named) = (self.pools.state(), self.nodes.tally());
            wanted(&self.namespace, &pools, &named, |n, p| self.opted_in(n, p))
        };
        if written.as_ref() == Some(&want) {
            return true;
        }
        match apply(&self.client, &self.namespace, &want).await {
            Ok(()) => {
                let names = want.first().and_then(|r| r.resource_names.clone());
                tracing::info!(role = ROLE, secrets = ?names.unwrap_or_default(), "daemons' pull-secret grant written");
                *written = Some(want);
                true
            }
            Err(error) => {
                tracing::warn!(%error, "daemons' pull-secret grant not written; retrying");
                *written = None;
                false
            }
        }
    }

    /// Keeps the Role in step with the caches (revocations, pools gone)
    /// once a reconcile has found them synced (an empty cache would revoke
    /// every grant), until the returned [`Keeper`] is dropped. Not
    /// `Store::wait_until_ready`: kube wakes only the last of several tasks
    /// waiting on one store, and the controller's own tasks wait on these.
    pub fn keep(self: &Arc<Self>) -> Keeper {
        let grant = self.clone();
        Keeper(tokio::spawn(async move {
            loop {
                let ok = !grant.synced.load(Ordering::Relaxed) || grant.write_if_changed().await;
                tokio::time::sleep(if ok { CHECK_EVERY } else { RETRY_AFTER }).await;
            }
        }))
    }
}

/// Stops the keeper when dropped.
#[derive(Debug)]
pub struct Keeper(tokio::task::JoinHandle<()>);

impl Drop for Keeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, namespace: &str) -> SecretReference {
        SecretReference {
            name: name.into(),
            namespace: namespace.into(),
        }
    }

    /// `wanted` passes over the BootcNodes whose Secret the pools grant
    /// already: its rules are `rules` of every pair all the same.
    #[test]
    fn the_wanted_rules_are_those_of_every_pair() {
        use api::test_support::{BootcNodeBuilder, PoolBuilder};
        let ns = "bootc-operator";
        // "pull" opts in to a and b, "old" to a only, "x" to b only.
        let opted_in = |secret: &str, pool: &str| {
            matches!(
                (secret, pool),
                ("pull", "a" | "b") | ("old", "a") | ("x", "b")
            )
        };
        let pool = |name: &str, secret: &str| {
            Arc::new(PoolBuilder::new(name).pull_secret(ns, secret).build())
        };
        let member = |name: &str, pool: &str, secret: &SecretReference| {
            let mut bn = BootcNodeBuilder::new(name).owner(pool, pool).build();
            bn.spec.pull_secret_ref = Some(secret.clone());
            Arc::new(bn)
        };
        let pools = [pool("a", "pull"), pool("b", "pull")];
        // (what, its BootcNodes, the names granted)
        type Case<'a> = (&'a str, Vec<Arc<BootcNode>>, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            (
                "members on their pools' Secret",
                vec![
                    member("n1", "a", &r("pull", ns)),
                    member("n2", "b", &r("pull", ns)),
                ],
                vec!["pull"],
            ),
            (
                "a member still on its pool's old Secret",
                vec![member("n1", "a", &r("old", ns))],
                vec!["old", "pull"],
            ),
            (
                "an old Secret that does not opt in to its pool",
                vec![member("n1", "b", &r("old", ns))],
                vec!["pull"],
            ),
            (
                "one that opts in to the member's pool only",
                vec![
                    member("n1", "a", &r("x", ns)),
                    member("n2", "b", &r("x", ns)),
                ],
                vec!["pull", "x"],
            ),
            (
                "a name the pools grant, in another namespace",
                vec![member("n1", "a", &r("pull", "default"))],
                vec!["pull"],
            ),
        ];
        for (what, nodes, names) in cases {
            let named = ByName::of(nodes.iter().map(|b| (**b).clone())).tally();
            let got = wanted(ns, &pools, &named, opted_in);
            let every_pair: Vec<(&str, &SecretReference)> = pools
                .iter()
                .map(|p| {
                    (
                        p.metadata.name.as_deref().unwrap(),
                        p.spec.pull_secret_ref.as_ref().unwrap(),
                    )
                })
                .chain(nodes.iter().map(|b| {
                    let owner = rollout::members::membership::owner_reference_of(b).unwrap();
                    (
                        owner.name.as_str(),
                        b.spec.pull_secret_ref.as_ref().unwrap(),
                    )
                }))
                .collect();
            assert_eq!(got, rules(ns, every_pair, opted_in), "{what}");
            assert_eq!(granted(&got), names.into_iter().collect(), "{what}");
        }
    }

    #[test]
    fn only_secrets_that_opt_in_to_the_naming_pool_are_granted() {
        let ns = "bootc-operator";
        // The Secret "pull" opts in to pool "a" only; "webhook-tls" to none.
        let opted_in = |secret: &str, pool: &str| secret == "pull" && pool == "a";
        let (pull, tls) = (r("pull", ns), r("webhook-tls", ns));
        let names = |refs: Vec<(&str, &SecretReference)>| {
            rules(ns, refs, opted_in)
                .first()
                .and_then(|rule| rule.resource_names.clone())
                .unwrap_or_default()
        };
        assert_eq!(names(vec![("a", &pull)]), ["pull"]);
        assert!(
            names(vec![("evil", &tls)]).is_empty(),
            "a Secret named by a pool it does not opt in to"
        );
        assert!(
            names(vec![("b", &pull)]).is_empty(),
            "another pool's Secret"
        );
        assert_eq!(
            names(vec![("b", &pull), ("a", &pull), ("x", &tls)]),
            ["pull"]
        );
    }

    #[test]
    fn each_pools_secret_is_asked_about_once_however_many_bootc_nodes_name_it() {
        let ns = "bootc-operator";
        let pull = r("pull", ns);
        let asked = std::cell::Cell::new(0);
        let refs = std::iter::repeat_n(("a", &pull), 1000).chain([("b", &pull)]);
        let got = rules(ns, refs, |_, _| {
            asked.set(asked.get() + 1);
            true
        });
        assert_eq!(got.len(), 1);
        assert_eq!(asked.get(), 2, "once per (pool, Secret) pair");
    }

    const NS: &str = api::labels::OPERATOR_NAMESPACE;

    fn store_of<K>(objects: Vec<K>) -> Store<K>
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let (store, mut writer) = kube::runtime::reflector::store();
        for o in objects {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(o));
        }
        store
    }

    /// A Secret of the operator's namespace opted in to `pools`.
    fn secret(name: &str, pools: &str) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.metadata.namespace = Some(NS.into());
        s.metadata.annotations = Some(
            [(api::labels::POOLS_ANNOTATION.to_owned(), pools.to_owned())]
                .into_iter()
                .collect(),
        );
        s
    }

    /// Pool "a" naming Secret "pull" (which opts in to it), and a BootcNode
    /// of the pool still naming "old" (which no longer does); the Role last
    /// written with `written`.
    async fn granted_before(
        api: &scripted_api::ScriptedApi,
        written: &[&str],
    ) -> (Arc<Grant>, BootcNodePool) {
        let pool: BootcNodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNodePool",
            "metadata": {"name": "a", "uid": "uid-a"},
            "spec": {
                "nodeSelector": {},
                "image": {"ref": "registry.test/os:1"},
                "pullSecretRef": {"name": "pull", "namespace": NS},
            },
        }))
        .unwrap();
        let bn: BootcNode = serde_json::from_value(serde_json::json!({
            "apiVersion": "node.bootc.dev/v1alpha1",
            "kind": "BootcNode",
            "metadata": {"name": "w1", "ownerReferences": [{
                "apiVersion": "node.bootc.dev/v1alpha1", "kind": "BootcNodePool",
                "name": "a", "uid": "uid-a",
            }]},
            "spec": {"desiredImage": "", "pullSecretRef": {"name": "old", "namespace": NS}},
        }))
        .unwrap();
        let grant = Grant::new(
            api.client(),
            NS,
            store_of(vec![pool.clone()]),
            ByName::of([bn]),
            store_of(vec![secret("pull", "a"), secret("old", "")]),
        );
        let refs: Vec<SecretReference> = written.iter().map(|n| r(n, NS)).collect();
        *grant.written.lock().await = Some(rules(NS, refs.iter().map(|r| ("a", r)), |_, _| true));
        (grant, pool)
    }

    /// The Role's write, granting exactly `names`.
    fn role_write(names: &[&str]) -> scripted_api::Exchange {
        let path = scripted_api::namespaced_path::<Role>(NS, ROLE);
        let mut role = Role::default();
        role.metadata.name = Some(ROLE.to_owned());
        scripted_api::patch(&path)
            .query("fieldManager", api::labels::CONTROLLER_MANAGER)
            .body_includes(serde_json::json!({"rules": [{"resourceNames": names}]}))
            .ok(&role)
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_whose_secret_is_granted_reads_and_writes_nothing() {
        // "old" is no longer opted in: its revocation is the keeper's, not
        // this reconcile's (which would walk every BootcNode to find it).
        let api = scripted_api::ScriptedApi::new(scripted_api::Script::new());
        let (grant, pool) = granted_before(&api, &["old", "pull"]).await;
        assert!(api.finish(grant.sync(&pool)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_whose_secret_is_not_granted_yet_brings_the_role_up_to_date() {
        let api =
            scripted_api::ScriptedApi::new(scripted_api::Script::new().then(role_write(&["pull"])));
        let (grant, pool) = granted_before(&api, &["old"]).await;
        assert!(api.finish(grant.sync(&pool)).await);
    }

    #[test]
    fn rules_name_exactly_the_referenced_secrets_of_the_namespace() {
        let ns = "bootc-operator";
        // What, the references, the names granted (None: no rule).
        type Case = (
            &'static str,
            Vec<SecretReference>,
            Option<Vec<&'static str>>,
        );
        let cases: &[Case] = &[
            (
                "nothing named: no rule (an empty list would mean every name)",
                vec![],
                None,
            ),
            ("one pool", vec![r("pull", ns)], Some(vec!["pull"])),
            (
                "shared and repeated names once, sorted",
                vec![r("b", ns), r("a", ns), r("b", ns)],
                Some(vec!["a", "b"]),
            ),
            (
                "a pool moved to a new Secret, its BootcNodes still on the old",
                vec![r("new", ns), r("old", ns), r("old", ns)],
                Some(vec!["new", "old"]),
            ),
            (
                "another namespace's Secret is not this Role's to grant",
                vec![r("pull", "default")],
                None,
            ),
            (
                "mixed namespaces",
                vec![r("elsewhere", "kube-system"), r("pull", ns)],
                Some(vec!["pull"]),
            ),
            ("an empty name grants nothing", vec![r("", ns)], None),
        ];
        for (what, refs, want) in cases {
            let got = rules(ns, refs.iter().map(|r| ("p", r)), |_, _| true);
            match want {
                None => assert!(got.is_empty(), "{what}: {got:?}"),
                Some(names) => {
                    assert_eq!(got.len(), 1, "{what}: {got:?}");
                    let rule = &got[0];
                    assert_eq!(rule.api_groups, Some(vec![String::new()]), "{what}");
                    assert_eq!(rule.resources, Some(vec!["secrets".to_owned()]), "{what}");
                    assert_eq!(rule.verbs, vec!["get".to_owned()], "{what}");
                    assert_eq!(
                        rule.resource_names.as_deref(),
                        Some(
                            names
                                .iter()
                                .map(|n| (*n).to_owned())
                                .collect::<Vec<_>>()
                                .as_slice()
                        ),
                        "{what}"
                    );
                    assert!(rule.non_resource_urls.is_none(), "{what}");
                }
            }
        }
    }
}
