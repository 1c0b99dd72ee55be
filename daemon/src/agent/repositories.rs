//! The image allow-list the daemon hands its helper: a required setting of
//! the install. The daemon refuses to start without at least one allowed
//! repository, or [`ANY`] stated on its own, so that a default install never
//! lets a compromised daemon stage any image. Pure; `main` reads the values
//! from `--allowed-repository` or `BOOTC_ALLOWED_REPOSITORIES` (which the
//! DaemonSet takes from the ConfigMap `bootc-daemon`).

/// The value that allows every repository, stated explicitly.
pub const ANY: &str = "any";

/// The environment variable the DaemonSet sets from its ConfigMap
/// (comma-separated, like repeated `--allowed-repository`).
pub const ENV: &str = "BOOTC_ALLOWED_REPOSITORIES";

/// The ConfigMap key in `deploy/` that the DaemonSet reads [`ENV`] from.
pub const CONFIG_KEY: &str = "allowed-repositories";

/// What the helper may stage from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowList {
    /// Every repository ([`ANY`], stated explicitly).
    Any,
    /// These repositories (`registry/path`) or namespaces (`registry/path/`).
    Only(Vec<String>),
}

impl AllowList {
    /// The helper's `--allowed-repository` values: none for [`AllowList::Any`].
    pub fn repositories(&self) -> Vec<String> {
        match self {
            AllowList::Any => Vec::new(),
            AllowList::Only(repositories) => repositories.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllowListError {
    #[error(
        "no allowed repository: the daemon stages images only from repositories it is told to allow. Set `{CONFIG_KEY}` in the ConfigMap bootc-daemon (namespace bootc-daemon; with kustomize, a configMapGenerator with `behavior: merge` in your overlay, see the README), or {ENV}, or pass --allowed-repository REGISTRY/PATH (repeatable; a trailing / allows everything below a namespace); `{ANY}` allows every repository, explicitly"
    )]
    Missing,
    #[error(
        "allowed repositories {given:?}: `{ANY}` allows every repository and cannot be combined with repositories"
    )]
    AnyWithOthers { given: Vec<String> },
}

/// The allow-list from the values given (each may itself be a
/// comma-separated list; blanks are ignored). See the module docs.
pub fn allow_list(values: &[String]) -> Result<AllowList, AllowListError> {
    let given: Vec<String> = values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect();
    match given.as_slice() {
        [] => Err(AllowListError::Missing),
        [only] if only == ANY => Ok(AllowList::Any),
        _ if given.iter().any(|v| v == ANY) => Err(AllowListError::AnyWithOthers { given }),
        _ => Ok(AllowList::Only(given)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(values: &[&str]) -> Result<AllowList, AllowListError> {
        allow_list(&values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn the_allow_list_is_required_and_any_is_explicit() {
        let only = |r: &[&str]| Ok(AllowList::Only(r.iter().map(|v| (*v).to_owned()).collect()));
        // (what, values, allow-list)
        let rows: Vec<(&str, Vec<&str>, Result<AllowList, AllowListError>)> = vec![
            ("nothing given", vec![], Err(AllowListError::Missing)),
            (
                "the placeholder: empty",
                vec![""],
                Err(AllowListError::Missing),
            ),
            ("blanks only", vec![" , ,"], Err(AllowListError::Missing)),
            ("any, on its own", vec!["any"], Ok(AllowList::Any)),
            (
                "one repository",
                vec!["quay.io/acme/os"],
                only(&["quay.io/acme/os"]),
            ),
            (
                "repeated and comma-separated",
                vec!["quay.io/acme/os, quay.io/acme/ns/", "r.io/x"],
                only(&["quay.io/acme/os", "quay.io/acme/ns/", "r.io/x"]),
            ),
            (
                "any with a repository",
                vec!["any,quay.io/acme/os"],
                Err(AllowListError::AnyWithOthers {
                    given: vec!["any".into(), "quay.io/acme/os".into()],
                }),
            ),
        ];
        for (what, values, want) in rows {
            assert_eq!(list(&values), want, "{what}");
        }
        assert_eq!(AllowList::Any.repositories(), Vec::<String>::new());
        let text = AllowListError::Missing.to_string();
        for needle in [
            "allowed-repositories",
            "bootc-daemon",
            "--allowed-repository",
            "`any`",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
    }
}
