//! The OS guards of a new target (`crate::holds::os_guard`), as a table.

use std::collections::BTreeMap;

use api::Reason;
use api::image_labels::{CONTAINERS_BOOTC, OS_ID, OS_VERSION_ID, OSTREE_BOOTABLE};

use crate::holds::os_guard::{
    ImageOs, KubeVersion, Running, check, compares_members, kubelet_condition, kubelet_skew, major,
};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn os(id: &str, version: &str) -> ImageOs {
    ImageOs::from_labels(&labels(&[
        (CONTAINERS_BOOTC, "1"),
        (OS_ID, id),
        (OS_VERSION_ID, version),
    ]))
}

fn running(id: &str, version: &str) -> Running {
    Running {
        image: format!("r.io/os@sha256:{id}{version}"),
        os: os(id, version),
        members: 3,
    }
}

#[test]
fn labels_read_as_bootc_images_carry_them() {
    let fedora = ImageOs::from_labels(&labels(&[
        (CONTAINERS_BOOTC, "1"),
        (OSTREE_BOOTABLE, "true"),
        (OS_ID, "fedora"),
        (OS_VERSION_ID, "42"),
    ]));
    assert!(fedora.bootable);
    assert_eq!(fedora.id.as_deref(), Some("fedora"));
    assert!(ImageOs::from_labels(&labels(&[(OSTREE_BOOTABLE, "true")])).bootable);
    assert!(!ImageOs::from_labels(&labels(&[(CONTAINERS_BOOTC, "0")])).bootable);
    assert!(!ImageOs::from_labels(&labels(&[])).bootable);
    assert_eq!(ImageOs::from_labels(&labels(&[(OS_ID, " ")])).id, None);
    assert_eq!(major("9.6"), "9");
    assert_eq!(major("42"), "42");
}

#[test]
fn a_target_is_refused_for_its_os_as_the_table_says() {
    let unknown = ImageOs {
        bootable: true,
        ..ImageOs::default()
    };
    let not_bootable = ImageOs {
        bootable: false,
        ..os("fedora", "42")
    };
    // (case, target, members, allowMajorUpgrade, refused with)
    type Row = (&'static str, ImageOs, Vec<Running>, bool, Option<Reason>);
    let rows: Vec<Row> = vec![
        (
            "same release",
            os("fedora", "42"),
            vec![running("fedora", "42")],
            false,
            None,
        ),
        (
            "minor update",
            os("rhel", "9.6"),
            vec![running("rhel", "9.4")],
            false,
            None,
        ),
        (
            "major upgrade",
            os("fedora", "43"),
            vec![running("fedora", "42")],
            false,
            Some(Reason::OsMajorChange),
        ),
        (
            "major upgrade, allowed",
            os("fedora", "43"),
            vec![running("fedora", "42")],
            true,
            None,
        ),
        (
            "major downgrade",
            os("centos", "9"),
            vec![running("centos", "10")],
            false,
            Some(Reason::OsMajorChange),
        ),
        (
            "another family",
            os("centos", "10"),
            vec![running("fedora", "42")],
            false,
            Some(Reason::OsMajorChange),
        ),
        (
            "one member of many on another major",
            os("fedora", "42"),
            vec![running("fedora", "42"), running("fedora", "41")],
            false,
            Some(Reason::OsMajorChange),
        ),
        (
            "target declares nothing",
            unknown.clone(),
            vec![running("fedora", "42")],
            false,
            None,
        ),
        (
            "members declare nothing",
            os("fedora", "43"),
            vec![Running {
                os: unknown,
                ..running("x", "1")
            }],
            false,
            None,
        ),
        (
            "members' images unread",
            os("fedora", "43"),
            vec![],
            false,
            None,
        ),
        (
            "not a bootc image",
            not_bootable.clone(),
            vec![running("fedora", "42")],
            false,
            Some(Reason::ImageNotBootable),
        ),
        (
            "not a bootc image, even allowed",
            not_bootable,
            vec![],
            true,
            Some(Reason::ImageNotBootable),
        ),
    ];
    for (case, target, members, allow, want) in rows {
        // Members are read only when they can change the answer.
        if !compares_members(&target, allow) {
            let got = check("r.io/os:next", &target, &[], allow);
            assert_eq!(
                got.as_ref().err().map(|p| p.reason),
                want,
                "{case}, unread: {got:?}"
            );
        }
        let got = check("r.io/os:next", &target, &members, allow);
        assert_eq!(
            got.as_ref().err().map(|p| p.reason),
            want,
            "{case}: {got:?}"
        );
    }
}

#[test]
fn the_refusal_names_both_releases_the_members_and_the_field() {
    let err = check(
        "r.io/os:43",
        &os("fedora", "43"),
        &[running("fedora", "42")],
        false,
    )
    .unwrap_err();
    for part in [
        "r.io/os:43 is fedora 43",
        "3 member(s) run fedora 42",
        "spec.image.allowMajorUpgrade: true",
    ] {
        assert!(err.message.contains(part), "{part} not in {}", err.message);
    }
}

#[test]
fn kubernetes_versions_are_read_as_major_minor() {
    let v = |major, minor| Some(KubeVersion { major, minor });
    // (text, read)
    let rows = [
        ("v1.37.2", v(1, 37)),
        ("1.34", v(1, 34)),
        ("1.35.0-rc.1+k3s1", v(1, 35)),
        ("v1.36+", v(1, 36)),
        (" 1.37.1 ", v(1, 37)),
        ("1", None),
        ("latest", None),
        ("", None),
    ];
    for (text, read) in rows {
        assert_eq!(KubeVersion::parse(text), read, "{text:?}");
    }
}

#[test]
fn a_targets_kubelet_keeps_to_the_version_skew_policy() {
    let api = KubeVersion {
        major: 1,
        minor: 37,
    };
    // (kubelet declared, refused with a message containing)
    let rows: [(&str, Option<&str>); 9] = [
        ("1.37.2", None),
        ("v1.37.0", None),
        ("1.36.4", None),
        ("1.34.0", None),
        (
            "1.38.0",
            Some("its kubelet 1.38 is newer than the API server 1.37"),
        ),
        (
            "1.33.9",
            Some("its kubelet 1.33 is 4 minor versions older than the API server 1.37"),
        ),
        ("1.30", Some("7 minor versions older")),
        ("2.37", Some("of another major version")),
        (
            "stable",
            Some("dev.bootc.kubelet.version=\"stable\" is not a Kubernetes version"),
        ),
    ];
    for (kubelet, refused) in rows {
        let out = kubelet_skew("r.io/os:stable", kubelet, api);
        match (refused, out) {
            (None, Ok(())) => {}
            (Some(text), Err(p)) => {
                assert_eq!(p.reason, Reason::KubeletSkew, "{kubelet}");
                assert!(p.message.contains(text), "{kubelet}: {}", p.message);
                assert!(p.message.contains("r.io/os:stable"), "{}", p.message);
                assert!(
                    p.message
                        .contains("may be up to three minor versions older"),
                    "the policy quoted: {}",
                    p.message
                );
            }
            (want, got) => panic!("{kubelet}: want refused {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn the_pool_says_whether_its_targets_kubelet_was_checked() {
    let checked = kubelet_condition(Some("1.37.2"));
    assert!(checked.status);
    assert_eq!(checked.reason, Reason::KubeletWithinSkew);
    assert!(checked.message.contains("1.37.2"), "{}", checked.message);
    let undeclared = kubelet_condition(None);
    assert!(!undeclared.status);
    assert_eq!(undeclared.reason, Reason::KubeletUndeclared);
    assert!(
        undeclared.message.contains("dev.bootc.kubelet.version"),
        "{}",
        undeclared.message
    );
}
