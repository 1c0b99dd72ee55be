//! The labels of an OS image's config that the controller reads before any
//! node is told about it (the guards of `rollout::holds::os_guard`), as bootc
//! images carry them: Fedora's and CentOS Stream's set `containers.bootc`,
//! `ostree.bootable`, `redhat.id`, `redhat.version-id` and
//! `org.opencontainers.image.version`. The kubelet's version has no
//! label of any distribution: [`KUBELET_VERSION`] is ours, set by whoever
//! builds the image.

/// `1` on every bootc image (bootc's base images set it; `bootc
/// container lint` checks it): an image without it cannot boot a host.
pub const CONTAINERS_BOOTC: &str = "containers.bootc";
/// The older spelling of the same promise, `true` or `1`.
pub const OSTREE_BOOTABLE: &str = "ostree.bootable";
/// The OS family: os-release's `ID` (`fedora`, `centos`, `rhel`).
pub const OS_ID: &str = "redhat.id";
/// The OS version: os-release's `VERSION_ID` (`42`, `10`, `9.6`); its
/// major is what comes before the first dot.
pub const OS_VERSION_ID: &str = "redhat.version-id";
/// The image's own version, which bootc reports as the deployment's.
pub const IMAGE_VERSION: &str = "org.opencontainers.image.version";

/// The version of the kubelet the image carries (`1.37.2`, `v1.37.2`):
/// in a bootc host the kubelet ships in the OS image, so a new image is a
/// kubelet upgrade, checked against Kubernetes' version skew policy before
/// any node is told. An image build sets it from the kubelet it installs,
/// e.g. `LABEL dev.bootc.kubelet.version=1.37.2`.
pub const KUBELET_VERSION: &str = "dev.bootc.kubelet.version";

/// Every label the controller keeps of an image's config: the guards'.
pub const READ: [&str; 5] = [
    CONTAINERS_BOOTC,
    OSTREE_BOOTABLE,
    OS_ID,
    OS_VERSION_ID,
    KUBELET_VERSION,
];
