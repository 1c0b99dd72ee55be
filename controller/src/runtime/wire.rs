//! How the Node and BootcNode watch events are decoded.
//!
//! Most of the bytes of such an event are thrown away as soon as it is
//! decoded: `metadata.managedFields` (on a BootcNode that two managers write,
//! often larger than the rest of the object), and on a Node most of
//! `status` (images, nodeInfo, addresses, capacity, allocatable, volumes) and
//! the annotations of others. Decoding them through the full types builds
//! `serde_json::Value` trees and many small strings only to free them again,
//! a good part of the controller's CPU during a large rollout.
//!
//! The types here decode only what the caches keep and skip the rest unread
//! (serde's `IgnoredAny`); each converts into the real type, which is what
//! the caches and everything after them see:
//! - a BootcNode: everything but `metadata.managedFields`, and its
//!   conversion ends with `strip_bootc_node` (the history goes);
//! - a Node: what `strip_node` keeps, that is metadata without
//!   managedFields, only the annotations `node_annotation_kept` names (the
//!   others are skipped while decoding), and what [`api::Node`] reads of
//!   the spec and status (the cordon, the conditions). The conversion still
//!   ends with `strip_node`, which stays the one rule of what a cached Node
//!   keeps.
//!
//! Each conversion ends by giving back the spare room of the lists it
//! keeps. serde_json tells no list's length ahead, so a list is decoded by
//! growing it (room for 4, then 8), and the decoded object is the one the
//! cache keeps (see `real`): a Node's five conditions held room for eight,
//! a finalizer or an owner reference room for four, about 400 bytes a Node
//! and as much a BootcNode (some 15 MiB of a 20,000-node controller).
//!
//! The wire types are watched in place of the real ones, so they answer to
//! kube as the real kinds do (same group, version, kind and plural).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use api::node::{NodeSpec, NodeStatus};
use api::{BootcNode, BootcNodeSpec, BootcNodeStatus, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::runtime::watcher::Event;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A Node as decoded from the wire: what the Node cache keeps.
#[derive(Clone, Debug, Deserialize)]
pub(super) struct NodeWire {
    #[serde(default, deserialize_with = "metadata::<KeptAnnotations, _>")]
    metadata: ObjectMeta,
    spec: Option<NodeSpec>,
    status: Option<NodeStatus>,
}

/// A BootcNode as decoded from the wire: all of it but managed fields.
/// (Its history is decoded, then dropped by `strip_bootc_node`: skipping
/// it unread would mean a second list of the status's fields.)
#[derive(Clone, Debug, Deserialize)]
pub(super) struct BootcNodeWire {
    #[serde(deserialize_with = "metadata::<BTreeMap<String, String>, _>")]
    metadata: ObjectMeta,
    spec: BootcNodeSpec,
    status: Option<BootcNodeStatus>,
}

impl From<NodeWire> for Node {
    fn from(wire: NodeWire) -> Node {
        let mut node = Node {
            metadata: wire.metadata,
            spec: wire.spec,
            status: wire.status,
        };
        // Drops nothing more: here for the rule's sake (and it makes the
        // annotations an empty map when there were none, as it always has).
        super::strip_node(&mut node);
        compact_metadata(&mut node.metadata);
        if let Some(conditions) = node.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            conditions.shrink_to_fit();
        }
        node
    }
}

impl From<BootcNodeWire> for BootcNode {
    fn from(wire: BootcNodeWire) -> BootcNode {
        let mut bn = BootcNode {
            metadata: wire.metadata,
            spec: wire.spec,
            status: wire.status,
        };
        super::strip_bootc_node(&mut bn);
        compact_metadata(&mut bn.metadata);
        if let Some(status) = bn.status.as_mut() {
            status.conditions.shrink_to_fit();
            status.host_updaters.shrink_to_fit();
        }
        bn
    }
}

/// Gives back the spare room of the metadata's lists (the module doc says
/// why; a string is decoded at its length).
fn compact_metadata(meta: &mut ObjectMeta) {
    if let Some(finalizers) = meta.finalizers.as_mut() {
        finalizers.shrink_to_fit();
    }
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.shrink_to_fit();
    }
}

/// A watch event of a wire type as one of its real type, shared: the
/// cache keeps the object the stream passes on (a Node or a BootcNode
/// moved through every stage of the stream, and copied into the cache,
/// cost a twentieth of the controller's CPU in a rollout).
pub(super) fn real<W: Into<K>, K>(event: Event<W>) -> Event<Arc<K>> {
    match event {
        Event::Apply(obj) => Event::Apply(Arc::new(obj.into())),
        Event::Delete(obj) => Event::Delete(Arc::new(obj.into())),
        Event::InitApply(obj) => Event::InitApply(Arc::new(obj.into())),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

/// Object metadata, every field but `managedFields`; the annotations are
/// decoded as `A`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata<A> {
    annotations: Option<A>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl<A: Into<BTreeMap<String, String>>> Metadata<A> {
    fn into_object_meta(self) -> ObjectMeta {
        ObjectMeta {
            annotations: self.annotations.map(Into::into),
            creation_timestamp: self.creation_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            deletion_timestamp: self.deletion_timestamp,
            finalizers: self.finalizers,
            generate_name: self.generate_name,
            generation: self.generation,
            labels: self.labels,
            managed_fields: None,
            name: self.name,
            namespace: self.namespace,
            owner_references: self.owner_references,
            resource_version: self.resource_version,
            self_link: self.self_link,
            uid: self.uid,
        }
    }
}

/// `metadata` through [`Metadata`]; null is the default, as for the full
/// types.
fn metadata<'de, A, D>(deserializer: D) -> Result<ObjectMeta, D::Error>
where
    A: Deserialize<'de> + Into<BTreeMap<String, String>>,
    D: Deserializer<'de>,
{
    let meta = Option::<Metadata<A>>::deserialize(deserializer)?;
    Ok(meta.map(Metadata::into_object_meta).unwrap_or_default())
}

/// A Node's annotations that `node_annotation_kept` names; the others are
/// skipped, their values unread.
struct KeptAnnotations(BTreeMap<String, String>);

impl From<KeptAnnotations> for BTreeMap<String, String> {
    fn from(kept: KeptAnnotations) -> Self {
        kept.0
    }
}

impl<'de> Deserialize<'de> for KeptAnnotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(KeptAnnotationsVisitor)
    }
}

struct KeptAnnotationsVisitor;

impl<'de> Visitor<'de> for KeptAnnotationsVisitor {
    type Value = KeptAnnotations;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of annotations")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut kept = BTreeMap::new();
        while let Some(key) = map.next_key_seed(KeptKey)? {
            match key {
                Some(key) => {
                    kept.insert(key, map.next_value()?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(KeptAnnotations(kept))
    }
}

/// An annotation's key, copied only if kept.
struct KeptKey;

impl<'de> DeserializeSeed<'de> for KeptKey {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeptKey {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an annotation key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(super::node_annotation_kept(key).then(|| key.to_owned()))
    }
}

/// `kube::Resource` for a wire type: the real type's kind, group, version
/// and plural, so that it is listed and watched as the real type is.
macro_rules! resource_as {
    ($wire:ty, $real:ty) => {
        impl Resource for $wire {
            type DynamicType = ();
            type Scope = <$real as Resource>::Scope;

            fn kind(_: &()) -> Cow<'_, str> {
                <$real as Resource>::kind(&())
            }
            fn group(_: &()) -> Cow<'_, str> {
                <$real as Resource>::group(&())
            }
            fn version(_: &()) -> Cow<'_, str> {
                <$real as Resource>::version(&())
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                <$real as Resource>::api_version(&())
            }
            fn plural(_: &()) -> Cow<'_, str> {
                <$real as Resource>::plural(&())
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource_as!(NodeWire, Node);
resource_as!(BootcNodeWire, BootcNode);

#[cfg(test)]
mod tests;
