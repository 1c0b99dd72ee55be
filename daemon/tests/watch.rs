#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The host watch: an mtime touch on `ostree/bootc` (what bootc does after
//! an operation) is one "host status may have changed" event.

use daemon::agent::watch::HostWatch;
use futures::StreamExt;
use std::time::{Duration, SystemTime};

fn touch(path: &std::path::Path) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(SystemTime::now())
        .unwrap();
}

#[tokio::test]
async fn an_mtime_touch_is_an_event() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ostree/bootc");
    std::fs::create_dir_all(&dir).unwrap();
    let watch = HostWatch::open(root.path()).unwrap();
    assert_eq!(watch.watched, std::slice::from_ref(&dir));
    let mut events = Box::pin(watch.into_events().unwrap().into_stream());
    touch(&dir);
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event after the touch")
        .expect("the stream goes on");
    // A burst is one event; the next touch is another.
    touch(&dir);
    touch(&dir);
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event after the second touch")
        .expect("the stream goes on");
}

#[tokio::test]
async fn no_directory_means_no_events_and_no_error() {
    let root = tempfile::tempdir().unwrap();
    let watch = HostWatch::open(root.path()).unwrap();
    assert!(watch.watched.is_empty());
    let mut events = Box::pin(watch.into_events().unwrap().into_stream());
    assert!(
        tokio::time::timeout(Duration::from_millis(50), events.next())
            .await
            .is_err(),
        "pending forever"
    );
}
